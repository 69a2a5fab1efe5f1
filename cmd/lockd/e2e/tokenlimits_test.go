package e2e

import (
	"context"
	"net/http"
	"strings"
	"testing"
	"time"
)

// TestSessionsPerToken: with --max-sessions-per-token 5 a token's sixth
// live session gets 429 limit_exceeded naming the limit, while another
// token still gets 201; a management token is capped too, and a token
// whose own limits lift the cap is not. Three lockd processes, --acl.
func TestSessionsPerToken(t *testing.T) {
	c := startCluster(t, 3, "--acl", "--max-sessions-per-token", "5")
	leader := c.waitLeader(c.nodes, 30*time.Second)
	f := c.others(leader)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	secret, err := c.api.bootstrapACL(ctx, f[0].httpAddr)
	if err != nil {
		t.Fatal(err)
	}
	admin := c.api.as(secret)
	newToken := func(name string, limits map[string]int) *client {
		body := map[string]any{"name": name, "rules": []map[string]string{{"prefix": "jobs/", "access": "write"}}}
		if limits != nil {
			body["limits"] = limits
		}
		tok, err := admin.createToken(ctx, f[1].httpAddr, body)
		if err != nil {
			t.Fatalf("create token %s: %v", name, err)
		}
		return c.api.as(tok.Secret)
	}
	greedy, other, unbound := newToken("greedy", nil), newToken("other", nil), newToken("unbound", map[string]int{"sessions": -1})
	nodes := []*node{leader, f[0], f[1]}
	fill := func(who string, cl *client, n int) {
		for i := range n {
			if _, err := cl.createSession(ctx, nodes[i%3].httpAddr, "1m"); err != nil {
				t.Fatalf("%s's session %d: %v", who, i+1, err)
			}
		}
	}
	fill("greedy", greedy, 5)
	_, err = greedy.createSession(ctx, f[1].httpAddr, "1m")
	if err == nil || err.(*apiError).Status != http.StatusTooManyRequests || errCode(err) != "limit_exceeded" ||
		!strings.Contains(err.Error(), "sessions per token") {
		t.Fatalf("greedy's sixth session: %v, want 429 limit_exceeded naming sessions per token", err)
	}
	if _, err := other.createSession(ctx, f[0].httpAddr, "1m"); err != nil {
		t.Fatalf("another token's session after greedy's refusal: %v", err)
	}
	fill("root", admin, 5)
	if _, err := admin.createSession(ctx, leader.httpAddr, "1m"); err == nil || errCode(err) != "limit_exceeded" {
		t.Fatalf("the management token's sixth session: %v, want limit_exceeded", err)
	}
	fill("unbound", unbound, 7)
}
