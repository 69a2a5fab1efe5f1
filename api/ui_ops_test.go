package api_test

import (
	"encoding/json"
	"fmt"
	"math"
	"net/http"
	"net/http/httptest"
	"os/exec"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"
	"unicode/utf8"
)

// needChromium skips a browser test without chromium or with -short.
func needChromium(t *testing.T) string {
	t.Helper()
	chromium, err := exec.LookPath("chromium")
	if err != nil {
		t.Skip("chromium is not on PATH: install Debian's chromium package (.ci/run does) to run the dashboard browser test")
	}
	if testing.Short() {
		t.Skip("-short: skipping the browser test")
	}
	return chromium
}

// lockRow returns the dumped DOM's row of the lock table for name.
func lockRow(dom, name string) string {
	return between(dom, `<tr data-lock="`+name+`">`, "</tr>")
}

// mustHave reports every want that part lacks and every unwanted it has.
func mustHave(t *testing.T, what, part string, want, unwanted []string) {
	t.Helper()
	for _, s := range want {
		if !strings.Contains(part, s) {
			t.Errorf("%s lacks %s", what, s)
		}
	}
	for _, s := range unwanted {
		if strings.Contains(part, s) {
			t.Errorf("%s has %s", what, s)
		}
	}
}

// opsFixture: s1 ("backup-job") holds jobs/backup and lost jobs/old to a
// revoke; s2 ("nightly") waits for jobs/backup (request ops-w1); s3 (no
// name) holds db/users.
type opsFixture struct {
	n          *testNode
	s1, s2, s3 string
}

func newOpsFixture(t *testing.T) opsFixture {
	n := singleNode(t, nodeOptions{})
	f := opsFixture{n: n,
		s1: n.session(map[string]any{"ttl": "60s", "name": "backup-job"}),
		s2: n.session(map[string]any{"ttl": "45s", "name": "nightly"}),
		s3: n.session(nil)}
	n.mustGrant(f.s1, "jobs/backup", "write")
	n.mustGrant(f.s1, "jobs/old", "write")
	n.must(http.StatusOK, "POST", "/v1/revoke", map[string]any{"name": "jobs/old"}, nil)
	n.mustGrant(f.s3, "db/users", "write")
	w := async(func() resp { return n.acquire(f.s2, "jobs/backup", "write", "60s", "ops-w1") })
	n.waitPending("ops-w1")
	t.Cleanup(func() {
		n.do("DELETE", "/v1/requests/ops-w1", nil)
		recv(t, w, 10*time.Second, "the waiter")
	})
	return f
}

// TestUINamesAgesChanges: holder and waiter chips and graph nodes show
// session names (ids stay beside them; an unnamed session is its id);
// holds, waiters and sessions show their real ages (from lockd's "since",
// not from when the page loaded); a grant after the page loaded and a release are
// in the recent changes, the grant in the grant rate; the sessions panel
// lists id, name, TTL, holds and pending counts; the legend says what an
// edge means; with a leader there is no banner.
func TestUINamesAgesChanges(t *testing.T) {
	chromium := needChromium(t)
	f := newOpsFixture(t)
	n := f.n
	time.Sleep(2100 * time.Millisecond) // what the fixture made is 2 s old when the page loads
	var polls atomic.Int32
	var late sync.Once
	front := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path == "/v1/locks" && polls.Add(1) == 2 {
			late.Do(func() {
				if r := n.acquire(f.s3, "jobs/late", "write", "0s", ""); r.status != http.StatusOK {
					t.Errorf("acquire jobs/late: %s", r)
				}
				if r := n.do("DELETE", "/v1/locks/db/users?session="+f.s3, nil); r.status != http.StatusOK {
					t.Errorf("release db/users: %s", r)
				}
			})
		}
		n.srv.ServeHTTP(w, r)
	}))
	t.Cleanup(front.Close)
	dom := runChromium(t, chromium, "--dump-dom", front.URL+"/ui/?live=poll")

	backup := lockRow(dom, "jobs/backup")
	mustHave(t, "jobs/backup's row", backup, []string{
		`<span class="sname" title="backup-job (session ` + f.s1 + `)">backup-job</span>`, // the holder's name
		`>` + f.s1 + `<`, // and its id
		`<span class="sname" title="nightly (session ` + f.s2 + `)">nightly</span>`, // the waiter's name
	}, nil)
	// Held and waiting since 2 s before the page loaded: their ages come
	// from lockd, not from when the page first saw them.
	aged := regexp.MustCompile(`>(held for|waiting) ([2-9]|\d\d+)s<`)
	if n := len(aged.FindAllString(backup, -1)); n != 2 || strings.Contains(backup, "seen for") {
		t.Errorf("jobs/backup's row has %d ages of 2 s or more, want 2 (the holder and the waiter): %s", n, backup)
	}
	mustHave(t, "jobs/late's row", lockRow(dom, "jobs/late"), []string{`>` + f.s3 + `<`}, []string{`class="sname"`})
	lateRow := lockRow(dom, "jobs/late")
	if !regexp.MustCompile(`>held for \d+s<`).MatchString(lateRow) || strings.Contains(lateRow, "seen for") {
		t.Errorf("jobs/late, granted after the page loaded, does not say \"held for Ns\": %s", lateRow)
	}
	mustHave(t, "the graph", between(dom, `<div id="graph">`, `</section>`), []string{
		`data-session="` + f.s1 + `"`, `>backup-job</text>`, `>nightly</text>`,
		"waiting session → the session it waits for (a holder, or a waiter queued ahead of it)",
	}, []string{"waiter → holder"})

	changes := between(dom, `<ol class="changes" id="changes">`, `</ol>`)
	mustHave(t, "the recent changes", changes, []string{`data-change="granted"`, "jobs/late granted (write, #", f.s3,
		`data-change="released"`, "db/users (#"}, []string{"jobs/backup granted"})
	rate := between(dom, `<strong id="grant-rate">`, `</strong>`)
	if v, err := strconv.ParseFloat(strings.TrimSuffix(rate, " grants/s"), 64); err != nil || v <= 0 {
		t.Errorf("grant rate %q, want above 0 after jobs/late", rate)
	}
	mustHave(t, "the page", dom, []string{"as seen by this page", `id="noleader" class="noleader" role="alert" hidden`}, nil)

	sessions := between(dom, `<table class="grid" id="sessions">`, `</table>`)
	row := between(sessions, `<tr data-session-row="`+f.s1+`"`, "</tr>")
	// The TTL without its zero units ("1m", not "1m0s"), lockd's own in the tooltip.
	mustHave(t, "s1's session row", row, []string{">backup-job<", `title="TTL 1m0s">1m<`, `<td class="num">1</td><td class="num">0</td>`}, nil)
	if !regexp.MustCompile(`<span class="age"[^>]*>([2-9]|\d\d+)s</span>`).MatchString(row) {
		t.Errorf("s1's session row shows no age of 2 s or more: %s", row)
	}
	row = between(sessions, `<tr data-session-row="`+f.s2+`"`, "</tr>")
	mustHave(t, "s2's session row", row, []string{">nightly<", ">45s<", `<td class="num">0</td><td class="num">1</td>`}, nil)
	mustHave(t, "the sessions table", sessions, []string{`data-session-row="` + f.s3 + `"`}, nil)
	if t.Failed() {
		t.Logf("DOM:\n%s", dom)
	}
}

// TestUISessionDetail: ?session=ID shows that session's holds with their
// tokens, its pending request ids and its revoked holds.
func TestUISessionDetail(t *testing.T) {
	chromium := needChromium(t)
	f := newOpsFixture(t)
	front := httptest.NewServer(f.n.srv)
	t.Cleanup(front.Close)

	dom := runChromium(t, chromium, "--dump-dom", front.URL+"/ui/?live=poll&session="+f.s1)
	detail := between(dom, `<div id="session-detail">`, `</section>`)
	mustHave(t, "s1's detail", detail, []string{`id="detail-id">` + f.s1 + `<`, "backup-job", `data-held="jobs/backup"`,
		`data-revoked="jobs/old"`, "Waits for nothing."}, []string{"data-pending="})
	if !regexp.MustCompile(`data-held="jobs/backup">.*?#\d+`).MatchString(detail) {
		t.Errorf("s1's detail lacks jobs/backup's token")
	}
	if !strings.Contains(dom, `<tr data-session-row="`+f.s1+`" class="sel"`) {
		t.Errorf("s1's row is not marked selected")
	}
	dom = runChromium(t, chromium, "--dump-dom", front.URL+"/ui/?live=poll&session="+f.s2)
	detail = between(dom, `<div id="session-detail">`, `</section>`)
	mustHave(t, "s2's detail", detail, []string{`data-pending="ops-w1"`, "Holds nothing.", "None revoked."}, []string{"data-held="})
	if t.Failed() {
		t.Logf("DOM:\n%s", dom)
	}
}

// TestUINoLeaderBanner: while this node's /v1/status names no leader (the
// test's front server blanks the leader of the node's answer, as during an
// election), the page says so over the data it keeps showing; the banner
// goes once a leader is back.
func TestUINoLeaderBanner(t *testing.T) {
	chromium := needChromium(t)
	f := newOpsFixture(t)
	var from, to atomic.Int32 // status polls without a leader: [from, to)
	var polls atomic.Int32
	front := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path != "/v1/status" {
			f.n.srv.ServeHTTP(w, r)
			return
		}
		rec := httptest.NewRecorder()
		f.n.srv.ServeHTTP(rec, r)
		var st map[string]any
		if err := json.Unmarshal(rec.Body.Bytes(), &st); err != nil {
			t.Errorf("status: %v", err)
		}
		if p := polls.Add(1); p >= from.Load() && p < to.Load() {
			st["leader"] = map[string]any{"id": "", "http_addr": ""}
			st["state"] = "follower"
		}
		w.Header().Set("Content-Type", "application/json")
		json.NewEncoder(w).Encode(st)
	}))
	t.Cleanup(front.Close)

	from.Store(3)
	to.Store(math.MaxInt32)
	dom := runChromium(t, chromium, "--dump-dom", front.URL+"/ui/?live=poll")
	mustHave(t, "without a leader the page", dom, []string{`<div id="noleader" class="noleader" role="alert">no leader — data may be stale`,
		`data-lock="jobs/backup"`, `data-session-row="` + f.s1 + `"`, `data-session="` + f.s2 + `"`, `id="h-leader">none<`}, nil)

	polls.Store(0)
	from.Store(2)
	to.Store(4)
	dom = runChromium(t, chromium, "--dump-dom", front.URL+"/ui/?live=poll")
	mustHave(t, "with the leader back the page", dom, []string{`id="noleader" class="noleader" role="alert" hidden`, `data-lock="jobs/backup"`}, nil)
	if t.Failed() {
		t.Logf("DOM:\n%s", dom)
	}
}

// TestUIBigWaitGraph: five holders and five waiters that each want all
// five locks make 25+ edges (each waiter waits for every holder and for
// the waiters ahead of it). Every session is a node, edge labels give way
// to tooltips, and no two node labels overlap (their boxes estimated from
// the text positions in the DOM, 7.2 px per character of 12 px monospace,
// 16 px tall).
func TestUIBigWaitGraph(t *testing.T) {
	chromium := needChromium(t)
	n := singleNode(t, nodeOptions{})
	const k = 5
	var all []string
	var locks []map[string]any
	for i := range k {
		h := n.session(map[string]any{"ttl": "60s", "name": fmt.Sprintf("holder-%d-with-a-long-name", i)})
		n.mustGrant(h, fmt.Sprintf("g/%d", i), "write")
		locks = append(locks, map[string]any{"name": fmt.Sprintf("g/%d", i), "mode": "write"})
		all = append(all, h)
	}
	for i := range k {
		body := map[string]any{"ttl": "60s"}
		if i%2 == 0 {
			body["name"] = fmt.Sprintf("waiter-%d", i)
		}
		s := n.session(body)
		all = append(all, s)
		id := fmt.Sprintf("big-%d", i)
		ch := async(func() resp {
			return n.do("POST", "/v1/acquire", map[string]any{"session": s, "wait": "60s", "request_id": id, "locks": locks})
		})
		n.waitPending(id)
		t.Cleanup(func() {
			n.do("DELETE", "/v1/requests/"+id, nil)
			recv(t, ch, 10*time.Second, id)
		})
	}
	front := httptest.NewServer(n.srv)
	t.Cleanup(front.Close)
	dom := runChromium(t, chromium, "--dump-dom", front.URL+"/ui/?live=poll")
	graph := between(dom, `<div id="graph">`, `</section>`)
	checkBigGraph(t, dom, graph, all)
}

func checkBigGraph(t *testing.T, dom, graph string, all []string) {
	t.Helper()
	count := between(dom, `<span class="count" id="graph-count">`, " edges")
	if e, err := strconv.Atoi(count); err != nil || e < 20 {
		t.Errorf("graph count %q, want 20 or more edges", count)
	}
	if !strings.Contains(dom, `<section class="panel wide" id="graph-panel">`) {
		t.Errorf("a big graph does not get the page's full width")
	}
	mustHave(t, "the graph", graph, []string{"lock names on hover", "<title>"}, []string{`class="elabel"`})
	type box struct {
		id   string
		x, y float64
		w    float64
	}
	re := regexp.MustCompile(`data-session="([^"]+)"><title>[^<]*</title><circle[^>]*></circle><text x="([-\d.]+)" y="([-\d.]+)">([^<]*)</text>`)
	var boxes []box
	for _, m := range re.FindAllStringSubmatch(graph, -1) {
		x, _ := strconv.ParseFloat(m[2], 64)
		y, _ := strconv.ParseFloat(m[3], 64)
		boxes = append(boxes, box{m[1], x, y, math.Max(44, float64(utf8.RuneCountInString(m[4]))*7.2)})
	}
	for _, id := range all {
		if !strings.Contains(graph, `data-session="`+id+`"`) {
			t.Errorf("session %s is not in the graph", id)
		}
	}
	if len(boxes) != len(all) {
		t.Fatalf("%d node labels parsed, want %d:\n%s", len(boxes), len(all), graph)
	}
	for i, a := range boxes {
		for _, b := range boxes[i+1:] {
			if math.Abs(a.x-b.x) < (a.w+b.w)/2 && math.Abs(a.y-b.y) < 16 {
				t.Errorf("labels of %s at (%v,%v) and %s at (%v,%v) overlap", a.id, a.x, a.y, b.id, b.x, b.y)
			}
			if math.Hypot(a.x-b.x, a.y-b.y) < 44 {
				t.Errorf("nodes %s and %s overlap", a.id, b.id)
			}
		}
	}
	// Long names shed the words they share ("holder-"), short ones stay.
	if !strings.Contains(graph, ">…0-with-a-long-…<") || !strings.Contains(graph, ">waiter-0<") {
		t.Errorf("graph nodes do not show (cut) session names")
	}
}

// clickHarness loads the dashboard in a same-origin frame, clicks the
// session named in its own ?s= (its row in the sessions table, or with
// ?via=graph its node in the wait-for graph), waits for the detail view
// and copies the dashboard into #after, and its URL's query into #query.
const clickHarness = `<!doctype html><html><head><link rel="icon" href="data:,"></head><body>
<div id="after"></div><p id="query"></p>
<iframe id="f" src="/ui/?live=poll" width="1200" height="900"></iframe>
<script>
"use strict";
const f = document.getElementById("f");
const q = new URLSearchParams(location.search), want = q.get("s");
const sel = q.get("via") === "graph" ? '#graph g[data-session="' + want + '"] circle' : 'tr[data-session-row="' + want + '"] td';
const until = (cond) => new Promise((resolve) => { const t = setInterval(() => { if (cond()) { clearInterval(t); resolve(); } }, 20); });
const doc = () => f.contentDocument;
(async () => {
  await until(() => doc() && doc().querySelector(sel));
  doc().querySelector(sel).dispatchEvent(new MouseEvent("click", { bubbles: true }));
  await until(() => doc().querySelector("#session-detail [data-held]"));
  document.getElementById("after").replaceChildren(document.importNode(doc().body, true));
  document.getElementById("query").textContent = f.contentWindow.location.search;
  f.remove();
})();
</script></body></html>`

// TestUISessionClick: clicking a session's row, or its node in the
// wait-for graph, shows its details and puts ?session=ID in the URL.
func TestUISessionClick(t *testing.T) {
	chromium := needChromium(t)
	f := newOpsFixture(t)
	front := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path == "/test-harness" {
			w.Header().Set("Content-Type", "text/html")
			w.Write([]byte(clickHarness))
			return
		}
		f.n.srv.ServeHTTP(w, r)
	}))
	t.Cleanup(front.Close)
	for _, via := range []string{"row", "graph"} {
		dom := runChromium(t, chromium, "--dump-dom", front.URL+"/test-harness?via="+via+"&s="+f.s1)
		detail := between(dom, `<div id="session-detail">`, `</section>`)
		mustHave(t, "the detail after a click on a "+via, detail, []string{`id="detail-id">` + f.s1 + `<`, `data-held="jobs/backup"`, `data-revoked="jobs/old"`}, nil)
		if q := between(dom, `<p id="query">`, "</p>"); q != "?live=poll&amp;session="+f.s1 {
			t.Errorf("the page's query after a click on a %s is %q, want ?live=poll&session=%s", via, q, f.s1)
		}
		if t.Failed() {
			t.Fatalf("DOM:\n%s", dom)
		}
	}
}
