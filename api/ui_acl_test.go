package api_test

import (
	"fmt"
	"html"
	"net/http"
	"net/http/httptest"
	"os/exec"
	"strings"
	"testing"

	"github.com/lockd/lockd/api"
)

// TestUIWithACL: with ACLs on, the dashboard asks for a token; with a
// management token it shows everything; with a read token limited to jobs/
// it shows only those names and says the wait-for graph needs a management
// token.
func TestUIWithACL(t *testing.T) {
	chromium, err := exec.LookPath("chromium")
	if err != nil {
		t.Skip("chromium is not on PATH: install Debian's chromium package (.ci/run does) to run the dashboard browser test")
	}
	if testing.Short() {
		t.Skip("-short: skipping the browser test")
	}
	n := singleNode(t, nodeOptions{api: func(c *api.Config) { c.ACL = true }})
	var root, reader api.Token
	n.as("", http.StatusOK, "POST", "/v1/acl/bootstrap", nil, &root)
	n.as(root.Secret, http.StatusCreated, "POST", "/v1/acl/tokens",
		map[string]any{"name": "viewer", "rules": []map[string]string{{"prefix": "jobs/", "access": "read"}}}, &reader)
	var s api.Session
	n.as(root.Secret, http.StatusCreated, "POST", "/v1/sessions", map[string]any{"ttl": "60s"}, &s)
	for _, name := range []string{"jobs/backup", "db/users"} {
		n.as(root.Secret, http.StatusOK, "POST", "/v1/acquire", map[string]any{"session": s.ID, "locks": []map[string]any{{"name": name}}}, nil)
	}

	// The test's own front page puts a token in the tab's sessionStorage,
	// as the login form does, and goes to the dashboard.
	front := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path == "/test-login" {
			fmt.Fprintf(w, `<script>sessionStorage.setItem("lockd-token", %q); location.replace("/ui/?live=poll")</script>`,
				html.EscapeString(r.URL.Query().Get("t")))
			return
		}
		n.srv.ServeHTTP(w, r)
	}))
	t.Cleanup(front.Close)

	dom := runChromium(t, chromium, "--dump-dom", front.URL+"/ui/?live=poll")
	if !strings.Contains(dom, `id="login"`) || strings.Contains(dom, `id="login" hidden`) || !strings.Contains(dom, "runs with ACLs") {
		t.Errorf("without a token the page does not ask for one:\n%s", dom)
	}
	dom = runChromium(t, chromium, "--dump-dom", front.URL+"/test-login?t="+root.Secret)
	for _, want := range []string{`data-lock="jobs/backup"`, `data-lock="db/users"`, `id="live" class="live ok"`} {
		if !strings.Contains(dom, want) {
			t.Errorf("with the management token the page lacks %s", want)
		}
	}
	dom = runChromium(t, chromium, "--dump-dom", front.URL+"/test-login?t="+reader.Secret)
	if !strings.Contains(dom, `data-lock="jobs/backup"`) || strings.Contains(dom, `data-lock="db/users"`) {
		t.Errorf("a jobs/ read token sees the wrong names")
	}
	if !strings.Contains(dom, "needs a management token") {
		t.Errorf("a read token is not told the wait-for graph needs a management token")
	}
	if strings.Contains(dom, root.Secret) || strings.Contains(dom, reader.Secret) {
		t.Errorf("a secret is in the page")
	}
	if t.Failed() {
		t.Logf("DOM:\n%s", dom)
	}
}
