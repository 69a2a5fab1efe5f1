package workload

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strings"
	"time"
)

// Runs are made with ACLs on. Before the workload starts the harness
// bootstraps the cluster once (SetupACL) and makes a write token on
// TokenPrefix for each worker and one for the intruder; the management
// token is kept for the workers' observes (Env.Observer: a lock view
// names only the caller's own sessions) and the intruder-admin negative
// control (the harness's other calls are GET /v1/status, which needs
// none).
//
// The bootstrap is the one call whose retry is delicate: the cluster
// bootstraps once, and the secret exists only in the answer. So:
//
//   - the secret is taken from a 200 answer only. That answer's secret is
//     the cluster's management token: the state machine applies one
//     bootstrap, so no earlier attempt can have committed (this one would
//     have been refused), and an earlier attempt applied later is refused;
//   - an attempt whose outcome is unknown (no answer, a 5xx such as
//     no_leader while the cluster elects) is retried;
//   - a 403 "already bootstrapped" after an unknown outcome means that
//     attempt committed and its answer, with the only copy of the secret,
//     was lost: ErrBootstrapLost. Nobody can make tokens any more; the
//     harness starts a fresh cluster and bootstraps that (it owns the
//     cluster, whose data it deletes anyway). The same 403 with no
//     unknown attempt before means the cluster was not fresh: an error.

// TokenPrefix starts every workload's lock names: the workers' and the
// intruder's tokens may write under it and nowhere else.
const TokenPrefix = "jepsen/"

// Tokens are the ACL secrets of a run.
type Tokens struct {
	Admin    string   // the management token (bootstrap)
	Workers  []string // one per worker
	Intruder string
}

// ErrBootstrapLost: a bootstrap whose answer was lost committed (its
// retry found the cluster bootstrapped); its secret is unknown.
var ErrBootstrapLost = errors.New("the ACL bootstrap's answer was lost and the cluster is bootstrapped: its secret is unknown")

// aclRetries bounds the attempts of each setup call (one a second).
const aclRetries = 30

// SetupACL bootstraps the cluster at base ("https://host:port") and makes
// the run's tokens.
func SetupACL(ctx context.Context, hc *http.Client, base string, workers int) (*Tokens, error) {
	var root struct{ Secret string }
	if err := bootstrap(ctx, hc, base, &root); err != nil {
		return nil, err
	}
	toks := &Tokens{Admin: root.Secret}
	rules := []map[string]string{{"prefix": TokenPrefix, "access": "write"}}
	for i := range workers + 1 {
		name := fmt.Sprintf("jepsen-worker-%d", i)
		if i == workers {
			name = "jepsen-intruder"
		}
		var tok struct{ Secret string }
		// A retried creation may leave an extra token nobody uses: harmless.
		err := retryUnknown(ctx, func() error {
			return aclCall(ctx, hc, base, root.Secret, "POST", "/v1/acl/tokens", map[string]any{"name": name, "rules": rules}, &tok)
		})
		if err != nil {
			return nil, fmt.Errorf("token %s: %w", name, err)
		}
		if i == workers {
			toks.Intruder = tok.Secret
		} else {
			toks.Workers = append(toks.Workers, tok.Secret)
		}
	}
	return toks, nil
}

// bootstrap posts /v1/acl/bootstrap until it is answered (see above).
func bootstrap(ctx context.Context, hc *http.Client, base string, out any) error {
	unknown := false // an attempt may have committed without our seeing the answer
	err := retryUnknown(ctx, func() error {
		err := aclCall(ctx, hc, base, "", "POST", "/v1/acl/bootstrap", nil, out)
		unknown = unknown || outcomeUnknown(err)
		return err
	})
	var ae *aclError
	switch {
	case err == nil:
		return nil
	case errors.As(err, &ae) && ae.status == http.StatusForbidden && strings.Contains(ae.body, "bootstrapped") && unknown:
		return ErrBootstrapLost
	}
	return fmt.Errorf("ACL bootstrap: %w", err)
}

// retryUnknown calls fn until its outcome is known (or aclRetries).
func retryUnknown(ctx context.Context, fn func() error) error {
	for attempt := 1; ; attempt++ {
		err := fn()
		if !outcomeUnknown(err) || attempt == aclRetries {
			return err
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(time.Second):
		}
	}
}

// outcomeUnknown: no answer, or a 5xx (no leader, internal): the call may
// or may not have been applied.
func outcomeUnknown(err error) bool {
	var ae *aclError
	return err != nil && (!errors.As(err, &ae) || ae.status >= 500)
}

// aclError is an error answer.
type aclError struct {
	status     int
	code, body string
}

func (e *aclError) Error() string { return fmt.Sprintf("HTTP %d %s: %s", e.status, e.code, e.body) }

// aclCall sends one JSON request with a bearer token.
func aclCall(ctx context.Context, hc *http.Client, base, token, method, path string, body, out any) error {
	var rd io.Reader
	if body != nil {
		b, _ := json.Marshal(body)
		rd = bytes.NewReader(b)
	}
	req, err := http.NewRequestWithContext(ctx, method, base+path, rd)
	if err != nil {
		return err
	}
	if body != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	if token != "" {
		req.Header.Set("Authorization", "Bearer "+token)
	}
	resp, err := hc.Do(req)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(io.LimitReader(resp.Body, 1<<20))
	if err != nil {
		return err
	}
	if resp.StatusCode/100 != 2 {
		var e struct {
			Error struct{ Code string } `json:"error"`
		}
		_ = json.Unmarshal(b, &e)
		return &aclError{status: resp.StatusCode, code: e.Error.Code, body: string(b)}
	}
	return json.Unmarshal(b, out)
}
