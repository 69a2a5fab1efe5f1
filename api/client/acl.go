package client

import (
	"context"
	"fmt"
	"net/url"
)

// ACL tokens (docs/security.md). Calls that make or delete tokens are not
// repeated after an unknown outcome: a second bootstrap is refused, and a
// second token would be a token nobody knows the secret of.

// BootstrapACL makes the cluster's first management token. It works once
// per cluster; later calls fail with ErrForbidden.
func (c *Client) BootstrapACL(ctx context.Context) (*Token, error) {
	var t Token
	if err := c.do(ctx, call{method: "POST", path: "/v1/acl/bootstrap", out: &t, retry: retryUnsent}); err != nil {
		return nil, fmt.Errorf("lockd acl bootstrap: %w", err)
	}
	return &t, nil
}

// CreateToken makes a token with rules (a management token's call).
func (c *Client) CreateToken(ctx context.Context, name string, rules ...Rule) (*Token, error) {
	var t Token
	body := map[string]any{"name": name, "rules": rules}
	if err := c.do(ctx, call{method: "POST", path: "/v1/acl/tokens", body: body, out: &t, retry: retryUnsent}); err != nil {
		return nil, fmt.Errorf("lockd create token %q: %w", name, err)
	}
	return &t, nil
}

// Tokens lists the tokens, without secrets (a management token's call).
func (c *Client) Tokens(ctx context.Context) ([]Token, error) {
	var ts []Token
	if err := c.do(ctx, call{method: "GET", path: "/v1/acl/tokens", out: &ts}); err != nil {
		return nil, fmt.Errorf("lockd list tokens: %w", err)
	}
	return ts, nil
}

// DeleteToken deletes a token: from then on no node accepts it.
func (c *Client) DeleteToken(ctx context.Context, id string) error {
	if err := c.do(ctx, call{method: "DELETE", path: "/v1/acl/tokens/" + url.PathEscape(id)}); err != nil {
		return fmt.Errorf("lockd delete token %s: %w", id, err)
	}
	return nil
}
