package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"time"

	"github.com/lockd/lockd/jepsen/compose"
)

// Runs are made with ACLs on, as the compose cluster starts (LOCKD_ACL):
// the harness bootstraps the cluster once, makes a write token per worker
// and one for the intruder (see workload.Env), and keeps the management
// token for the intruder-admin negative control.

// aclTokens are the secrets a run uses.
type aclTokens struct {
	admin    string
	workers  []string
	intruder string
}

// errBootstrapLost is a bootstrap whose answer was lost and whose retry
// found the cluster bootstrapped: nobody knows the management secret. The
// run cannot go on; a fresh cluster (the next run) starts over.
var errBootstrapLost = errors.New("the ACL bootstrap's answer was lost and the cluster is bootstrapped: its secret is unknown")

// setupACL bootstraps the cluster and makes the run's tokens.
func setupACL(ctx context.Context, cl *compose.Cluster, workers int) (*aclTokens, error) {
	conf, err := cl.TLS()
	if err != nil {
		return nil, err
	}
	hc := &http.Client{Transport: &http.Transport{TLSClientConfig: conf}, Timeout: 10 * time.Second}
	defer hc.CloseIdleConnections()
	addr := cl.HTTPAddr(cl.Names()[0])
	var root struct{ Secret string }
	if err := bootstrap(ctx, hc, addr, &root); err != nil {
		return nil, err
	}
	toks := &aclTokens{admin: root.Secret}
	for i := range workers + 1 {
		var tok struct{ Secret string }
		body := map[string]any{"name": fmt.Sprintf("jepsen-%d", i), "rules": []map[string]string{{"prefix": "", "access": "write"}}}
		if err := aclCall(ctx, hc, addr, root.Secret, "POST", "/v1/acl/tokens", body, &tok); err != nil {
			return nil, fmt.Errorf("token %d: %w", i, err)
		}
		if i == workers {
			toks.intruder = tok.Secret
		} else {
			toks.workers = append(toks.workers, tok.Secret)
		}
	}
	return toks, nil
}

// bootstrap posts /v1/acl/bootstrap until a leader answers it (the
// cluster may still be electing or learning its voters' builds).
func bootstrap(ctx context.Context, hc *http.Client, addr string, out any) error {
	unknown := false // an attempt may have committed without our seeing the answer
	for attempt := 0; ; attempt++ {
		err := aclCall(ctx, hc, addr, "", "POST", "/v1/acl/bootstrap", nil, out)
		var ae *aclError
		switch {
		case err == nil:
			return nil
		case errors.As(err, &ae) && ae.status == http.StatusForbidden && unknown:
			return errBootstrapLost
		case errors.As(err, &ae) && ae.status != http.StatusServiceUnavailable:
			return err
		case attempt == 30:
			return fmt.Errorf("bootstrap: %w", err)
		}
		unknown = unknown || !errors.As(err, &ae) || ae.code == "no_leader"
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(time.Second):
		}
	}
}

// aclError is an error answer.
type aclError struct {
	status     int
	code, body string
}

func (e *aclError) Error() string { return fmt.Sprintf("HTTP %d %s: %s", e.status, e.code, e.body) }

// aclCall sends one JSON request with a bearer token.
func aclCall(ctx context.Context, hc *http.Client, addr, token, method, path string, body, out any) error {
	var rd io.Reader
	if body != nil {
		b, _ := json.Marshal(body)
		rd = bytes.NewReader(b)
	}
	req, err := http.NewRequestWithContext(ctx, method, "https://"+addr+path, rd)
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
	b, _ := io.ReadAll(io.LimitReader(resp.Body, 1<<20))
	if resp.StatusCode/100 != 2 {
		var e struct {
			Error struct{ Code string } `json:"error"`
		}
		_ = json.Unmarshal(b, &e)
		return &aclError{status: resp.StatusCode, code: e.Error.Code, body: string(b)}
	}
	return json.Unmarshal(b, out)
}
