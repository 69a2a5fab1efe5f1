package client

import (
	"context"
	"fmt"

	"github.com/lockd/lockd/api/wire"
)

// DeniedCert is one serial of the cluster's certificate deny list.
type DeniedCert = wire.DeniedCert

// DenyCert puts a certificate serial (hex; colons as openssl prints them
// are allowed) on the cluster's deny list: from then on every node
// refuses that certificate on every port (docs/security.md). It needs a
// management token or an operator's client certificate. It returns the
// serial as the list keeps it; denying one twice is no error, so the call
// is repeated after an unknown outcome.
func (c *Client) DenyCert(ctx context.Context, serial, reason string) (string, error) {
	var out wire.DenyCertResponse
	body := wire.DenyCertRequest{Serial: serial, Reason: reason}
	if err := c.do(ctx, call{method: "POST", path: "/v1/certs/denied", body: body, out: &out}); err != nil {
		return "", fmt.Errorf("lockd deny certificate %s: %w", serial, err)
	}
	return out.Denied, nil
}

// DeniedCerts lists the deny list by serial (a management token's or an
// operator certificate's call).
func (c *Client) DeniedCerts(ctx context.Context) ([]DeniedCert, error) {
	var out []DeniedCert
	if err := c.do(ctx, call{method: "GET", path: "/v1/certs/denied", out: &out}); err != nil {
		return nil, fmt.Errorf("lockd list denied certificates: %w", err)
	}
	return out, nil
}
