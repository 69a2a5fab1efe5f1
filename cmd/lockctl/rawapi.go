package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"strings"
	"syscall"

	"github.com/lockd/lockd/api/client"
	"github.com/lockd/lockd/api/wire"
)

// rawAPI speaks the HTTP API directly, for the calls the Go client does
// not offer (a session without keepalives, listing and deleting sessions by
// id, releasing for another process's session, blocking queries). Any node
// answers them: followers forward to the leader.
type rawAPI struct {
	endpoints []string // base URLs, e.g. http://127.0.0.1:7001
	hc        *http.Client
	token     string // ACL secret; "" for none
}

// raw returns a rawAPI of --addr, with the base URLs and the HTTP client
// (TLS included) of the Go client.
func (e *env) raw() (*rawAPI, error) {
	c, err := e.client()
	if err != nil {
		return nil, err
	}
	return &rawAPI{endpoints: c.Endpoints(), hc: c.HTTPClient(), token: e.token.Secret()}, nil
}

// lockPath is /v1/locks/NAME with each segment of NAME escaped.
func lockPath(name string) string {
	segs := strings.Split(name, "/")
	for i, s := range segs {
		segs[i] = url.PathEscape(s)
	}
	return "/v1/locks/" + strings.Join(segs, "/")
}

// do sends method path with body (JSON, nil for none) to the endpoints in
// turn and decodes a 2xx answer into out (when not nil). It moves on to the
// next endpoint when one is unreachable or has no leader; a call that is not
// idempotent moves on only when the connection was refused (nothing was
// sent). An API error answer is returned as a *client.Error, with the
// answer's headers.
func (a *rawAPI) do(ctx context.Context, method, path string, body, out any, idempotent bool) (http.Header, error) {
	var payload []byte
	if body != nil {
		var err error
		if payload, err = json.Marshal(body); err != nil {
			return nil, err
		}
	}
	var lastErr error
	for _, ep := range a.endpoints {
		var rd io.Reader
		if payload != nil {
			rd = bytes.NewReader(payload)
		}
		req, err := http.NewRequestWithContext(ctx, method, ep+path, rd)
		if err != nil {
			return nil, err
		}
		if payload != nil {
			req.Header.Set("Content-Type", "application/json")
		}
		if a.token != "" {
			req.Header.Set("Authorization", "Bearer "+a.token)
		}
		resp, err := a.hc.Do(req)
		if err != nil {
			lastErr = err
			if ctx.Err() != nil || !(idempotent || errors.Is(err, syscall.ECONNREFUSED)) {
				return nil, err
			}
			continue
		}
		h, err := decodeAnswer(resp, out)
		if errors.Is(err, client.ErrNoLeader) && idempotent {
			lastErr = err
			continue
		}
		return h, err
	}
	return nil, lastErr
}

// decodeAnswer reads resp into out, or into a *client.Error for an error
// answer.
func decodeAnswer(resp *http.Response, out any) (http.Header, error) {
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		return resp.Header, err
	}
	if resp.StatusCode/100 != 2 {
		var e struct {
			Error struct {
				Code    string `json:"code"`
				Message string `json:"message"`
			} `json:"error"`
		}
		if json.Unmarshal(b, &e) != nil || e.Error.Code == "" {
			e.Error.Code, e.Error.Message = wire.CodeInternal, strings.TrimSpace(string(b))
		}
		return resp.Header, &client.Error{Code: e.Error.Code, Message: e.Error.Message, HTTPStatus: resp.StatusCode}
	}
	if out != nil {
		if err := json.Unmarshal(b, out); err != nil {
			return resp.Header, fmt.Errorf("bad answer from %s: %w", resp.Request.URL.Host, err)
		}
	}
	return resp.Header, nil
}

// isUnavailable reports whether err means no node answered or none has a
// leader (a condition worth waiting out in watch).
func isUnavailable(err error) bool {
	var nerr net.Error
	var uerr *url.Error
	return errors.Is(err, client.ErrNoLeader) || errors.As(err, &uerr) || errors.As(err, &nerr)
}
