package api_test

import (
	"net/http"
	"strings"
	"testing"

	"github.com/lockd/lockd/api"
	"github.com/lockd/lockd/api/wire"
)

// A timeout says who holds the name without naming another token's
// session (a management token sees the id); a token name refuses the
// characters a lock name refuses.
func TestTimeoutDoesNotNameAnotherTokensSession(t *testing.T) {
	n := singleNode(t, nodeOptions{api: func(c *api.Config) { c.ACL = true }})
	var root, jobs, other wire.Token
	n.as("", http.StatusOK, "POST", "/v1/acl/bootstrap", nil, &root)
	rules := []map[string]string{{"prefix": "jobs/", "access": "write"}}
	n.as(root.Secret, http.StatusCreated, "POST", "/v1/acl/tokens", map[string]any{"name": "jobs", "rules": rules}, &jobs)
	n.as(root.Secret, http.StatusCreated, "POST", "/v1/acl/tokens", map[string]any{"name": "other", "rules": rules}, &other)
	for _, name := range []string{"evil\u202ename", "bell\a", "sep\u2028"} {
		n.deniedAs(root.Secret, http.StatusBadRequest, "invalid_request", "POST", "/v1/acl/tokens",
			map[string]any{"name": name, "rules": rules})
	}

	session := func(secret string) string {
		var s wire.Session
		n.as(secret, http.StatusCreated, "POST", "/v1/sessions", map[string]any{"ttl": "30s"}, &s)
		return string(s.ID)
	}
	held := session(jobs.Secret)
	n.as(jobs.Secret, http.StatusOK, "POST", "/v1/acquire",
		map[string]any{"session": held, "locks": []map[string]any{{"name": "jobs/t"}}}, nil)
	cases := []struct {
		who    string
		secret string
		named  bool
	}{{"another token", other.Secret, false}, {"the holder's token", jobs.Secret, true}, {"a management token", root.Secret, true}}
	for _, c := range cases {
		r := n.call(c.secret, "POST", "/v1/acquire",
			map[string]any{"session": session(c.secret), "locks": []map[string]any{{"name": "jobs/t"}}, "wait": "0s"})
		body := string(r.body)
		if r.status != http.StatusConflict || !strings.Contains(body, "timeout") {
			t.Fatalf("%s: %v, want 409 timeout", c.who, r)
		}
		if named := strings.Contains(body, held); named != c.named {
			t.Errorf("%s: names the holder's session %v, want %v: %s", c.who, named, c.named, body)
		}
		if !c.named && !strings.Contains(body, "another token's session") {
			t.Errorf("%s: does not say another token's session holds it: %s", c.who, body)
		}
	}
}
