package e2e

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"slices"
	"strings"
	"testing"
	"time"
)

type tokenView struct {
	ID     string `json:"id"`
	Secret string `json:"secret"`
}

// TestACLCluster is the client-trust issue's check, on three lockd
// processes started with --acl: bootstrap once; a token limited to jobs/
// cannot touch other/; another token cannot release, keep alive or close
// the first one's session; no token is 401; session ids are opaque; an
// unknown session is 404; a text/plain body is 415; revoke makes
// /v1/check say invalid; paging; a deleted token gets 401.
func TestACLCluster(t *testing.T) {
	c := startCluster(t, 3, "--acl")
	leader := c.waitLeader(c.nodes, 30*time.Second)
	f := c.others(leader)
	anon := c.api
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	expect := func(what string, err error, status int, code string) {
		t.Helper()
		if err == nil || errCode(err) != code || err.(*apiError).Status != status {
			t.Fatalf("%s: %v, want %d %s", what, err, status, code)
		}
	}

	expect("no token", anon.do(ctx, "GET", f[0].httpAddr, "/v1/locks", nil, nil), http.StatusUnauthorized, "unauthorized")
	secret, err := anon.bootstrapACL(ctx, f[0].httpAddr)
	if err != nil {
		t.Fatal(err)
	}
	expect("second bootstrap", anon.do(ctx, "POST", f[1].httpAddr, "/v1/acl/bootstrap", nil, nil), http.StatusForbidden, "forbidden")
	admin := anon.as(secret)
	newToken := func(name string) (*client, tokenView) {
		body := map[string]any{"name": name, "rules": []map[string]string{{"prefix": "jobs/", "access": "write"}}}
		tok, err := admin.createToken(ctx, f[1].httpAddr, body)
		if err != nil {
			t.Fatalf("create token %s: %v", name, err)
		}
		return anon.as(tok.Secret), tok
	}
	jobs, jobsTok := newToken("jobs")
	other, _ := newToken("other")

	s, err := jobs.createSession(ctx, f[0].httpAddr, "30s")
	if err != nil || len(s) < 20 || strings.Trim(s, "0123456789") == "" {
		t.Fatalf("session %q (%v): want an opaque id of 20+ characters", s, err)
	}
	a, err := jobs.acquire(ctx, f[1].httpAddr, s, "", "jobs/a", "0s")
	if err != nil {
		t.Fatal(err)
	}
	_, err = jobs.acquire(ctx, f[1].httpAddr, s, "", "other/a", "0s")
	expect("jobs/ token on other/a", err, http.StatusForbidden, "forbidden")

	// Another token's session answers as one that does not exist.
	expect("release by another token", other.release(ctx, f[0].httpAddr, s, "jobs/a"), http.StatusNotFound, "session_not_found")
	expect("keepalive by another token", other.keepalive(ctx, f[1].httpAddr, s), http.StatusNotFound, "session_not_found")
	expect("close by another token", other.do(ctx, "DELETE", leader.httpAddr, "/v1/sessions/"+s, nil, nil), http.StatusNotFound, "session_not_found")
	expect("unknown session", jobs.keepalive(ctx, f[0].httpAddr, "no-such-session"), http.StatusNotFound, "session_not_found")

	req, _ := http.NewRequestWithContext(ctx, "POST", "http://"+f[0].httpAddr+"/v1/release",
		strings.NewReader(fmt.Sprintf(`{"session":%q,"name":"jobs/a"}`, s)))
	req.Header.Set("Content-Type", "text/plain")
	req.Header.Set("Authorization", "Bearer "+jobsTok.Secret)
	if resp, err := anon.hc.Do(req); err != nil || resp.StatusCode != http.StatusUnsupportedMediaType {
		t.Fatalf("text/plain release: %v %v, want 415", resp, err)
	} else {
		resp.Body.Close()
	}

	revoke(ctx, t, admin, f[0].httpAddr, "jobs/a", s, a.Token)
	var chk struct{ Valid bool }
	if err := jobs.do(ctx, "GET", f[1].httpAddr, fmt.Sprintf("/v1/check?name=jobs/a&token=%d", a.Token), nil, &chk); err != nil || chk.Valid {
		t.Fatalf("check after revoke: %v %+v", err, chk)
	}

	for _, name := range []string{"jobs/p1", "jobs/p2", "jobs/p3"} {
		if _, err := jobs.acquire(ctx, leader.httpAddr, s, "", name, "0s"); err != nil {
			t.Fatal(err)
		}
	}
	checkPage(ctx, t, admin, f[0].httpAddr)

	if err := admin.deleteToken(ctx, f[1].httpAddr, jobsTok.ID); err != nil {
		t.Fatal(err)
	}
	for _, nd := range c.nodes {
		expect("deleted token on "+nd.id, jobs.do(ctx, "GET", nd.httpAddr, "/v1/locks", nil, nil), http.StatusUnauthorized, "unauthorized")
	}
}

// revoke revokes name, which session alone holds with token, and checks
// the answer names that hold. A revoke whose outcome is unknown is
// settled by the session's own record, whose revoked list names the hold
// once a revoke took it: then it was applied; otherwise it is sent again
// (and if that finds no holder, one still in flight took it first).
func revoke(ctx context.Context, t *testing.T, admin *client, addr, name, session string, token uint64) {
	t.Helper()
	revoked := func() bool {
		s, err := admin.getSession(ctx, addr, session, false)
		if err != nil {
			t.Fatalf("revoke %s: settling an unknown outcome: %v", name, err)
		}
		return slices.ContainsFunc(s.Revoked, func(r revocationView) bool { return r.Name == name && r.Token == token })
	}
	for resent := false; ; resent = true {
		var rv struct {
			Revoked []struct{ Session, Name string } `json:"revoked"`
		}
		err := admin.do(ctx, "POST", addr, "/v1/revoke", map[string]string{"name": name}, &rv)
		switch {
		case err == nil && resent && len(rv.Revoked) == 0 && revoked():
			return
		case err == nil && (len(rv.Revoked) != 1 || rv.Revoked[0].Session != session):
			t.Fatalf("revoke %s: %+v, want the hold of session %s", name, rv, session)
		case err == nil:
			return
		case !unsettled(err):
			t.Fatalf("revoke %s: %v", name, err)
		case revoked():
			return // the first attempt was applied
		}
	}
}

// checkPage: GET /v1/locks?limit=2 returns 2 and X-Next-After.
func checkPage(ctx context.Context, t *testing.T, c *client, addr string) {
	t.Helper()
	req, _ := http.NewRequestWithContext(ctx, "GET", "http://"+addr+"/v1/locks?limit=2", nil)
	req.Header.Set("Authorization", "Bearer "+c.token)
	resp, err := c.hc.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var page []struct{ Name string }
	if err := json.NewDecoder(resp.Body).Decode(&page); err != nil || len(page) != 2 || resp.Header.Get("X-Next-After") != page[1].Name {
		t.Fatalf("page: %v %+v, X-Next-After %q", err, page, resp.Header.Get("X-Next-After"))
	}
}
