package api_test

import (
	"bufio"
	"bytes"
	"context"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/lockd/lockd/api"
	"github.com/lockd/lockd/api/wire"
)

func TestUIServesEmbeddedFiles(t *testing.T) {
	n := singleNode(t, nodeOptions{})
	for _, c := range []struct{ path, ctype, want string }{
		{"/ui/", "text/html", `<script src="app.js">`},
		{"/ui/app.js", "javascript", "/v1/status"},
		{"/ui/app.css", "text/css", "font"},
	} {
		r := n.must(http.StatusOK, "GET", c.path, nil, nil)
		if ct := r.header.Get("Content-Type"); !strings.Contains(ct, c.ctype) {
			t.Errorf("GET %s: Content-Type %q, want %s", c.path, ct, c.ctype)
		}
		if !strings.Contains(string(r.body), c.want) {
			t.Errorf("GET %s: body lacks %q", c.path, c.want)
		}
	}
	// /ui redirects to /ui/ (the client follows it).
	if r := n.do("GET", "/ui", nil); r.status != http.StatusOK || !strings.Contains(string(r.body), "<title>lockd") {
		t.Errorf("GET /ui: got %d, want the page after a redirect", r.status)
	}
	if r := n.do("GET", "/ui/missing.js", nil); r.status != http.StatusNotFound {
		t.Errorf("GET /ui/missing.js: got %d, want 404", r.status)
	}
	// Only GET: other methods fall through to the API's JSON 404.
	n.mustErr(http.StatusNotFound, wire.CodeNotFound, "POST", "/ui/", nil)
}

func TestWaitGraphEndpoint(t *testing.T) {
	n := singleNode(t, nodeOptions{})
	var edges []wire.WaitEdge
	n.must(http.StatusOK, "GET", "/v1/waitgraph", nil, &edges)
	if len(edges) != 0 {
		t.Fatalf("empty table: got edges %+v", edges)
	}
	holder, waiter := n.session(nil), n.session(nil)
	n.mustGrant(holder, "jobs/x", "write")
	ch := async(func() resp { return n.acquire(waiter, "jobs/x", "write", "30s", "wg-1") })
	n.waitPending("wg-1")
	r := n.must(http.StatusOK, "GET", "/v1/waitgraph", nil, nil)
	if want := `[{"from":"` + waiter + `","to":"` + holder + `"}]`; strings.TrimSpace(string(r.body)) != want {
		t.Fatalf("wait graph %s, want %s", r.body, want)
	}
	n.must(http.StatusOK, "DELETE", "/v1/requests/wg-1", nil, nil)
	recv(t, ch, 10*time.Second, "the cancelled acquire")
}

// TestUIInChromium drives the dashboard in real headless Chromium against
// a real node with a held lock and waiters. LOCKD_UPDATE_SCREENSHOT=1
// also writes docs/dashboard.png.
func TestUIInChromium(t *testing.T) {
	chromium, err := exec.LookPath("chromium")
	if err != nil {
		t.Skip("chromium is not on PATH: install Debian's chromium package (.ci/run does) to run the dashboard browser test")
	}
	if testing.Short() {
		t.Skip("-short: skipping the browser test")
	}
	n := singleNode(t, nodeOptions{})

	// s1 holds jobs/backup; s2 holds db/users and waits for jobs/backup;
	// s3 waits for db/users: the graph is s3 → s2 → s1.
	s1, s2, s3, s4 := n.session(map[string]any{"ttl": "60s", "name": "backup-job"}), n.session(nil), n.session(nil), n.session(nil)
	n.mustGrant(s1, "jobs/backup", "write")
	n.must(http.StatusOK, "POST", "/v1/proclaim", map[string]any{"session": s1, "name": "jobs/backup", "value": "10.0.0.7:8080"}, nil)
	n.mustGrant(s2, "db/users", "write")
	n.mustGrant(s3, "reports/daily", "read")
	n.mustGrant(s4, "reports/daily", "read")
	n.must(http.StatusOK, "POST", "/v1/acquire", map[string]any{"session": s4, "wait": "0s",
		"locks": []map[string]any{{"name": "pool/workers", "mode": "write", "weight": 2, "limit": 3}}}, nil)
	w1 := async(func() resp { return n.acquire(s2, "jobs/backup", "write", "60s", "ui-waiter-1") })
	n.waitPending("ui-waiter-1")
	w2 := async(func() resp { return n.acquire(s3, "db/users", "write", "60s", "ui-waiter-2") })
	n.waitPending("ui-waiter-2")
	t.Cleanup(func() {
		for _, id := range []string{"ui-waiter-1", "ui-waiter-2"} {
			n.do("DELETE", "/v1/requests/"+id, nil)
		}
		recv(t, w1, 10*time.Second, "waiter 1")
		recv(t, w2, 10*time.Second, "waiter 2")
	})

	// Serve through a wrapper that counts the page's polls and, at its
	// second poll of the lock list, takes a new lock: the page must show
	// it without a reload.
	var polls atomic.Int32
	var late sync.Once
	front := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path == "/v1/locks" && polls.Add(1) == 2 {
			late.Do(func() {
				if r := n.acquire(s1, "jobs/late", "write", "0s", ""); r.status != http.StatusOK {
					t.Errorf("acquire jobs/late: %s", r)
				}
			})
		}
		n.srv.ServeHTTP(w, r)
	}))
	t.Cleanup(front.Close)
	// ?live=poll: headless Chromium's virtual clock stops while the event
	// stream is open; TestEventsStream covers the stream.
	url := front.URL + "/ui/?live=poll"
	dom := runChromium(t, chromium, "--dump-dom", url)
	t.Logf("the page polled /v1/locks %d times", polls.Load())
	if p := polls.Load(); p < 3 {
		t.Errorf("the page polled /v1/locks %d times in 5s of virtual time, want a poll every second", p)
	}
	for _, want := range []string{
		`data-member="n1"`,            // the member row
		`data-lock="jobs/backup"`,     // the held lock
		`>` + s1 + `<`,                // its holder (its full id)
		"ui-waiter-1",                 // a waiter's request id
		`>= 10.0.0.7:8080<`,           // the holder's value
		`data-session="` + s3 + `"`,   // the wait-for graph
		`<span class="badge leader">`, // raft state
		`id="live" class="live ok"`,   // the poll succeeded
	} {
		if !strings.Contains(dom, want) {
			t.Errorf("dumped DOM lacks %s", want)
		}
	}
	if t.Failed() {
		t.Logf("DOM:\n%s", dom)
		t.FailNow()
	}

	// The prefix filter comes from the URL too.
	dom = runChromium(t, chromium, "--dump-dom", url+"&prefix=db/")
	if !strings.Contains(dom, `data-lock="db/users"`) || strings.Contains(dom, `data-lock="jobs/backup"`) {
		t.Errorf("?prefix=db/ does not filter the lock table")
	}

	shot := filepath.Join(t.TempDir(), "dashboard.png")
	runChromium(t, chromium, "--screenshot="+shot, "--window-size=1400,900", url)
	png, err := os.ReadFile(shot)
	if err != nil || !bytes.HasPrefix(png, []byte("\x89PNG")) {
		t.Fatalf("no PNG screenshot at %s: %v", shot, err)
	}
	t.Logf("screenshot: %s (%d bytes)", shot, len(png))
	if os.Getenv("LOCKD_UPDATE_SCREENSHOT") == "1" {
		if err := os.WriteFile(filepath.Join("..", "docs", "dashboard.png"), png, 0o644); err != nil {
			t.Fatal(err)
		}
		t.Log("wrote docs/dashboard.png")
	}
}

// runChromium runs headless Chromium on url with a fresh profile and
// returns its standard output.
func runChromium(t *testing.T, chromium string, args ...string) string {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
	defer cancel()
	base := []string{"--headless", "--no-sandbox", "--disable-gpu", "--disable-dev-shm-usage",
		"--no-first-run", "--hide-scrollbars", "--user-data-dir=" + t.TempDir(), "--virtual-time-budget=5000"}
	cmd := exec.CommandContext(ctx, chromium, append(base, args...)...)
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	if err := cmd.Run(); err != nil {
		t.Fatalf("chromium %s: %v\nstderr:\n%s", strings.Join(args, " "), err, stderr.String())
	}
	return stdout.String()
}

// TestEventsStream: GET /v1/events sends this node's applied index at once
// and again after each change of the table.
func TestEventsStream(t *testing.T) {
	n := singleNode(t, nodeOptions{})
	ctx, cancel := context.WithTimeout(t.Context(), 10*time.Second)
	defer cancel()
	req, _ := http.NewRequestWithContext(ctx, "GET", n.ts.URL+"/v1/events", nil)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	if ct := resp.Header.Get("Content-Type"); ct != "text/event-stream" {
		t.Fatalf("content type %q", ct)
	}
	br := bufio.NewReader(resp.Body)
	next := func() uint64 {
		for {
			line, err := br.ReadString('\n')
			if err != nil {
				t.Fatalf("reading the stream: %v", err)
			}
			if v, ok := strings.CutPrefix(strings.TrimSpace(line), "data: "); ok {
				idx, err := strconv.ParseUint(v, 10, 64)
				if err != nil {
					t.Fatalf("event %q", line)
				}
				return idx
			}
		}
	}
	first := next()
	n.session(nil)
	if second := next(); second <= first {
		t.Fatalf("after a change the stream said %d, before %d", second, first)
	}
}

// loginHarness is a test page that loads the dashboard in a same-origin
// frame and uses it as a person would: it waits for the token form, types
// the secret (fetched from /test-secret, so it is never in a page or a
// URL) and submits it, copies the dashboard once it shows a lock table or
// a refusal into #after-login, presses "forget token" and copies it again
// into #after-forget. #stored says whether the tab's sessionStorage held a
// token at each step.
const loginHarness = `<!doctype html><html><head><link rel="icon" href="data:,"></head><body>
<div id="after-login"></div><div id="after-forget"></div><p id="stored"></p>
<iframe id="f" src="/ui/?live=poll" width="1200" height="900"></iframe>
<script>
"use strict";
const f = document.getElementById("f");
const until = (cond) => new Promise((resolve) => { const t = setInterval(() => { if (cond()) { clearInterval(t); resolve(); } }, 20); });
const doc = () => f.contentDocument;
const copy = (id) => document.getElementById(id).replaceChildren(document.importNode(doc().body, true));
const stored = (step) => document.getElementById("stored").append(step + ":" + (sessionStorage.getItem("lockd-token") ? "yes" : "no") + " ");
(async () => {
  const secret = await (await fetch("/test-secret")).text();
  await until(() => doc() && doc().getElementById("login") && !doc().getElementById("login").hidden);
  stored("before");
  doc().getElementById("token").value = secret;
  doc().getElementById("login-form").requestSubmit();
  stored("submitted");
  await until(() => doc().querySelector("#locks tr[data-lock]") && doc().querySelector("#live.ok") && doc().querySelector("#graph svg, #graph p.denied"));
  copy("after-login");
  doc().getElementById("forget").click();
  await until(() => !doc().getElementById("login").hidden);
  stored("forgotten");
  copy("after-forget");
  f.remove();
})();
</script></body></html>`

// TestUILoginForm drives the dashboard's token form with ACLs on, with
// lists read a page of one name at a time (the test's front server sets
// limit=1 on the page's GET /v1/locks): a management token shows every
// held lock and the wait-for graph; "forget token" asks again and hides
// them; a read token for jobs/ shows only those names and says the graph
// needs a management token. No secret lands in the page.
func TestUILoginForm(t *testing.T) {
	chromium, err := exec.LookPath("chromium")
	if err != nil {
		t.Skip("chromium is not on PATH: install Debian's chromium package (.ci/run does) to run the dashboard browser test")
	}
	if testing.Short() {
		t.Skip("-short: skipping the browser test")
	}
	n := singleNode(t, nodeOptions{api: func(c *api.Config) { c.ACL = true }})
	var root, reader wire.Token
	n.as("", http.StatusOK, "POST", "/v1/acl/bootstrap", nil, &root)
	n.as(root.Secret, http.StatusCreated, "POST", "/v1/acl/tokens",
		map[string]any{"name": "viewer", "rules": []map[string]string{{"prefix": "jobs/", "access": "read"}}}, &reader)
	var s1, s2 wire.Session
	n.as(root.Secret, http.StatusCreated, "POST", "/v1/sessions", map[string]any{"ttl": "60s", "name": "root-job"}, &s1)
	n.as(root.Secret, http.StatusCreated, "POST", "/v1/sessions", map[string]any{"ttl": "60s"}, &s2)
	held := []string{"db/users", "jobs/backup", "jobs/nightly", "reports/daily"}
	for _, name := range held {
		n.as(root.Secret, http.StatusOK, "POST", "/v1/acquire", map[string]any{"session": s1.ID, "locks": []map[string]any{{"name": name}}}, nil)
	}
	// s2 waits for jobs/backup: an edge in the wait-for graph.
	waiting := async(func() resp {
		return n.call(root.Secret, "POST", "/v1/acquire", map[string]any{"session": s2.ID, "wait": "60s", "request_id": "ui-login-waiter",
			"locks": []map[string]any{{"name": "jobs/backup"}}})
	})
	waitFor(t, 10*time.Second, "the waiter to be pending", func() bool {
		r := n.call(root.Secret, "GET", "/v1/requests/ui-login-waiter?stale", nil)
		return r.status == http.StatusOK && strings.Contains(string(r.body), `"status":"pending"`)
	})
	t.Cleanup(func() {
		n.call(root.Secret, "DELETE", "/v1/requests/ui-login-waiter", nil)
		recv(t, waiting, 10*time.Second, "the waiter")
	})

	var secret atomic.Value
	var paged, unpaged atomic.Int32
	front := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		switch r.URL.Path {
		case "/test-harness":
			w.Header().Set("Content-Type", "text/html")
			io.WriteString(w, loginHarness)
			return
		case "/test-secret":
			io.WriteString(w, secret.Load().(string))
			return
		case "/v1/locks":
			q := r.URL.Query()
			if !q.Has("limit") {
				unpaged.Add(1)
			}
			if q.Has("after") {
				paged.Add(1)
			}
			q.Set("limit", "1")
			r.URL.RawQuery = q.Encode()
		}
		n.srv.ServeHTTP(w, r)
	}))
	t.Cleanup(front.Close)

	// check: the copy of the dashboard in the harness's <div id="id"> has
	// all of want and none of unwanted.
	check := func(dom, id string, want, unwanted []string) {
		t.Helper()
		part := between(dom, `<div id="`+id+`">`, map[string]string{"after-login": `<div id="after-forget">`, "after-forget": `<p id="stored">`}[id])
		mustHave(t, "#"+id, part, want, unwanted)
	}
	for _, c := range []struct {
		who          string
		secret       string
		want, hidden []string
	}{
		{"management", root.Secret,
			[]string{`data-lock="db/users"`, `data-lock="jobs/backup"`, `data-lock="jobs/nightly"`, `data-lock="reports/daily"`,
				`data-session="` + string(s2.ID) + `"`, `id="live" class="live ok"`, `id="login" hidden`,
				`<span class="sname" title="root-job (session ` + string(s1.ID) + `)">root-job</span>`, `data-session-row="` + string(s1.ID) + `"`},
			[]string{"needs a management token"}},
		{"jobs/ reader", reader.Secret,
			[]string{`data-lock="jobs/backup"`, `data-lock="jobs/nightly"`, "needs a management token", `id="live" class="live ok"`,
				`<span class="sid other" title="a session of another token">another token's</span>`},
			// s1 is not this token's session: neither its name nor its id shows.
			[]string{`data-lock="db/users"`, `data-lock="reports/daily"`, `data-session=`, "root-job", `class="sname"`, string(s1.ID)}},
	} {
		secret.Store(c.secret)
		dom := runChromium(t, chromium, "--dump-dom", front.URL+"/test-harness")
		before := t.Failed()
		if !strings.Contains(dom, "before:no submitted:yes forgotten:no") {
			t.Errorf("%s: the token's life in sessionStorage: %q, want before:no submitted:yes forgotten:no", c.who, between(dom, `<p id="stored">`, "</p>"))
		}
		check(dom, "after-login", c.want, c.hidden)
		check(dom, "after-forget", []string{`id="login">`, "runs with ACLs", "Needs a token."}, []string{`data-lock=`, `data-session=`})
		if strings.Contains(dom, root.Secret) || strings.Contains(dom, reader.Secret) {
			t.Errorf("%s: a secret is in the page", c.who)
		}
		if t.Failed() && !before {
			t.Logf("%s: DOM:\n%s", c.who, dom)
		}
	}
	if paged.Load() == 0 || unpaged.Load() != 0 {
		t.Errorf("the page asked for %d later pages of /v1/locks (X-Next-After) and %d times without a limit", paged.Load(), unpaged.Load())
	}
}

// between returns the text of s between the first from and the next to.
func between(s, from, to string) string {
	_, s, _ = strings.Cut(s, from)
	s, _, _ = strings.Cut(s, to)
	return s
}
