package api_test

import (
	"bytes"
	"encoding/json"
	"fmt"
	"html"
	"maps"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/lockd/lockd/api"
	"github.com/lockd/lockd/api/wire"
)

// layoutHarness loads the dashboard in a same-origin frame of its own ?w=
// by ?h= (a browser window of that size), waits until the page shows its
// locks, sessions and wait-for graph (?edges= edges when given), and
// writes into #report what does not fit:
//   - the page or a panel wider than its box (a horizontal scrollbar, or a
//     column cut off), a table, chip or graph wider than its panel or
//     cell, a lock name wrapped into lines of fewer than 24 characters on
//     average (up to 24 characters: wrapped at all);
//   - the lock table's first rows below the fold (not visible without
//     scrolling);
//   - graph nodes labelled alike; edge labels that overlap each other or
//     a node; edges that cross away from a node (their paths sampled
//     every 2 px); a node colour or a member's colour without a legend
//     entry of that colour;
//   - a duration (TTL, age) wrapped over two lines, an age without the
//     time it counts from (ISO 8601) in its tooltip.
//
// The report also carries the edge and edge-label counts, the tooltips
// of the holders' ages by lock, each member's and graph node's colour
// (its kind), the quorum the header shows and the graph's count.
const layoutHarness = `<!doctype html><html><head><link rel="icon" href="data:,">
<style>body { margin: 0; } iframe { border: 0; display: block; }</style></head><body>
<iframe id="f" src="/ui/?live=poll"></iframe><pre id="report"></pre>
<script>
"use strict";
const f = document.getElementById("f");
const q = new URLSearchParams(location.search);
f.width = q.get("w");
f.height = q.get("h");
const until = (cond) => new Promise((resolve) => { const t = setInterval(() => { if (cond()) { clearInterval(t); resolve(); } }, 20); });
const doc = () => f.contentDocument;
const ready = () => doc() && doc().querySelector("#live.ok") && doc().querySelector("#graph svg") &&
  doc().querySelectorAll("#locks tr[data-lock]").length >= Number(q.get("locks")) &&
  doc().querySelectorAll("#sessions tr[data-session-row]").length >= Number(q.get("sessions")) &&
  doc().querySelectorAll("#graph path.edge").length >= Number(q.get("edges") || 0);
const name = (e) => (e.id ? "#" + e.id : e.tagName.toLowerCase() + (e.className && e.className.baseVal === undefined ? "." + e.className.split(" ").join(".") : "")) +
  (e.closest("[data-lock]") ? " of " + e.closest("[data-lock]").dataset.lock : "");
function inside(problems, inner, outer, what) {
  const a = inner.getBoundingClientRect(), b = outer.getBoundingClientRect();
  if (a.right > b.right + 1 || a.left < b.left - 1) {
    problems.push(name(inner) + " (" + Math.round(a.left) + "-" + Math.round(a.right) + "px) sticks out of " + what + " (" + Math.round(b.left) + "-" + Math.round(b.right) + "px)");
  }
}
const lines = (e) => {
  const r = e.ownerDocument.createRange();
  r.selectNodeContents(e);
  return new Set([...r.getClientRects()].filter((x) => x.width > 0).map((x) => Math.round(x.top))).size;
};
const meets = (a, b) => a.left < b.right - 0.5 && b.left < a.right - 0.5 && a.top < b.bottom - 0.5 && b.top < a.bottom - 0.5;
function fits(d, problems) {
  const de = d.documentElement;
  if (de.scrollWidth > de.clientWidth) problems.push("the page is " + de.scrollWidth + "px wide in a " + de.clientWidth + "px window");
  for (const p of d.querySelectorAll(".panel")) {
    if (p.hidden) continue;
    if (p.scrollWidth > p.clientWidth + 1) problems.push("#" + p.id + "'s content is " + p.scrollWidth + "px wide in " + p.clientWidth + "px");
    for (const e of p.querySelectorAll("table, svg")) inside(problems, e, p, "#" + p.id);
  }
  for (const c of d.querySelectorAll("td .chip")) inside(problems, c, c.closest("td"), "its cell");
  for (const td of d.querySelectorAll("#locks td.name")) {
    const n = lines(td);
    if (n > Math.ceil(td.textContent.length / 24)) problems.push("lock name " + td.textContent + " wraps over " + n + " lines");
  }
  const rows = [...d.querySelectorAll("#locks tr[data-lock]")].slice(0, 3);
  const fold = f.contentWindow.innerHeight, bottom = Math.max(...rows.map((r) => r.getBoundingClientRect().bottom));
  if (bottom > fold) problems.push("the first " + rows.length + " lock rows end at " + Math.round(bottom) + "px, below the fold at " + fold + "px");
}
// crossings counts pairs of edges whose paths cross outside every node.
function crossings(d, problems) {
  const svg = d.querySelector("#graph svg");
  const boxes = [...svg.querySelectorAll("g.node, .nodebox")].map((g) => g.getBBox());
  const atNode = (p) => boxes.some((b) => p.x > b.x - 4 && p.x < b.x + b.width + 4 && p.y > b.y - 4 && p.y < b.y + b.height + 4);
  const paths = [...svg.querySelectorAll("path.edge")].map((p) => {
    const n = p.getTotalLength(), pts = [];
    for (let l = 0; l < n; l += 2) pts.push(p.getPointAtLength(l));
    pts.push(p.getPointAtLength(n));
    return { what: p.parentNode.querySelector("title").textContent, pts };
  });
  const side = (a, b, c) => Math.sign((b.x - a.x) * (c.y - a.y) - (b.y - a.y) * (c.x - a.x));
  const cross = (a, b, c, e) => side(a, b, c) * side(a, b, e) < 0 && side(c, e, a) * side(c, e, b) < 0;
  let count = 0;
  paths.forEach((p, i) => paths.slice(i + 1).forEach((o) => {
    for (let j = 1; j < p.pts.length; j++) {
      for (let k = 1; k < o.pts.length; k++) {
        if (!cross(p.pts[j - 1], p.pts[j], o.pts[k - 1], o.pts[k]) || atNode(p.pts[j])) continue;
        count++;
        problems.push("edges \"" + p.what + "\" and \"" + o.what + "\" cross at (" + Math.round(p.pts[j].x) + "," + Math.round(p.pts[j].y) + ")");
        return;
      }
    }
  }));
  return count;
}
function labelsApart(d, problems) {
  const labels = [...d.querySelectorAll("#graph text.elabel")];
  const nodes = [...d.querySelectorAll("#graph g.node, #graph .nodebox")];
  labels.forEach((l, i) => {
    const a = l.getBoundingClientRect();
    for (const o of labels.slice(i + 1)) if (meets(a, o.getBoundingClientRect())) problems.push("edge labels " + l.textContent + " and " + o.textContent + " overlap");
    for (const n of nodes) if (meets(a, n.getBoundingClientRect())) problems.push("edge label " + l.textContent + " overlaps node " + n.textContent);
  });
  return labels.length;
}
// legendFor: every element of sel shows a colour that a legend entry
// (data-kind) of its kind shows too.
function legendFor(d, problems, sel, legend, colour) {
  if (!d.querySelector(sel)) problems.push("no " + sel);
  for (const e of d.querySelectorAll(sel)) {
    const kind = e.closest("[data-kind]") && e.closest("[data-kind]").dataset.kind;
    const sw = kind && d.querySelector(legend + " [data-kind=\"" + kind + "\"] .sw-dot");
    const c = colour(e);
    if (!sw || getComputedStyle(sw).backgroundColor !== c) problems.push(sel + " of kind " + kind + " (" + c + ") has no legend entry of that colour");
  }
}
function times(d, problems) {
  for (const e of d.querySelectorAll("#sessions td:nth-child(3), #sessions td:nth-child(4), .age")) { // TTL, age
    if (lines(e) > 1) problems.push("the duration " + JSON.stringify(e.textContent) + " wraps over " + lines(e) + " lines");
  }
  const ages = {};
  for (const a of d.querySelectorAll(".age")) {
    if (!/\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d/.test(a.title)) problems.push("the age " + a.textContent + " has no time in its tooltip: " + JSON.stringify(a.title));
    const row = a.closest("tr[data-lock]");
    if (row && a.closest(".chip.holder") && !ages[row.dataset.lock]) ages[row.dataset.lock] = a.title;
  }
  return ages;
}
(async () => {
  await until(ready);
  const d = doc(), problems = [];
  fits(d, problems);
  const labels = [...d.querySelectorAll("#graph g.node")].map((g) => [...g.querySelectorAll("text")].map((t) => t.textContent).join(" "));
  if (new Set(labels).size !== labels.length) problems.push("graph nodes labelled alike: " + JSON.stringify(labels));
  const crossed = crossings(d, problems), elabels = labelsApart(d, problems);
  legendFor(d, problems, "#graph g.node circle", "#graph-legend", (e) => getComputedStyle(e).fill);
  legendFor(d, problems, "#members .dot", "#members-legend", (e) => getComputedStyle(e).backgroundColor);
  const ages = times(d, problems);
  const edges = d.querySelectorAll("#graph path.edge").length;
  const members = Object.fromEntries([...d.querySelectorAll("#members [data-member]")].map((m) => [m.dataset.member, m.dataset.kind]));
  const quorum = d.getElementById("h-quorum") ? d.getElementById("h-quorum").textContent : "";
  const kinds = Object.fromEntries([...d.querySelectorAll("#graph g.node")].map((g) => [g.dataset.session, g.dataset.kind]));
  const graph = d.getElementById("graph-count").textContent;
  document.getElementById("report").textContent = JSON.stringify({ labels, problems, crossed, edges, elabels, ages, members, quorum, kinds, graph });
  f.remove();
})();
</script></body></html>`

// layoutFixture fills a node's table the way busy lockctl jobs do:
// sessions named "lockctl vm pid N: COMMAND" (alike up to the pid), locks
// with several holders and waiters, and a wait-for graph among them. It
// returns the number of lock rows and sessions the page will show.
func layoutFixture(t *testing.T, n *testNode) (locks, sessions int) {
	var ss []string
	for i := range 7 {
		stage := []string{"build", "test", "deploy"}[i%3]
		ss = append(ss, n.session(map[string]any{"ttl": "60s",
			"name": fmt.Sprintf("lockctl vm pid %d: /opt/pipeline/bin/run --stage %s --shard %d", 4101+i, stage, i)}))
	}
	n.mustGrant(ss[0], "db/orders", "write")
	n.mustGrant(ss[1], "jobs/backup/nightly", "write")
	n.mustGrant(ss[2], "reports/daily/2026-11-28/eu-west-1/summary", "read")
	n.mustGrant(ss[3], "reports/daily/2026-11-28/eu-west-1/summary", "read")
	for _, s := range ss[4:7] {
		n.must(http.StatusOK, "POST", "/v1/acquire", map[string]any{"session": s, "wait": "0s",
			"locks": []map[string]any{{"name": "pool/workers", "mode": "write", "weight": 1, "limit": 3}}}, nil)
	}
	// Waiters: 1 and 2 on db/orders (2 behind 1), 3 on jobs/backup/nightly,
	// 0 on pool/workers.
	for i, w := range []struct {
		s    string
		spec map[string]any
	}{
		{ss[1], map[string]any{"name": "db/orders"}},
		{ss[2], map[string]any{"name": "db/orders"}},
		{ss[3], map[string]any{"name": "jobs/backup/nightly"}},
		{ss[0], map[string]any{"name": "pool/workers", "mode": "write", "weight": 1, "limit": 3}},
	} {
		queued(t, n, "layout-w"+strconv.Itoa(i), w.s, "60s", w.spec)
	}
	return 4, len(ss)
}

// queued makes session wait for one lock (spec) with request id and wait,
// until the request is pending; the test's cleanup cancels it.
func queued(t *testing.T, n *testNode, id, session, wait string, spec map[string]any) {
	ch := async(func() resp {
		return n.do("POST", "/v1/acquire", map[string]any{"session": session, "wait": wait, "request_id": id,
			"locks": []map[string]any{spec}})
	})
	n.waitPending(id)
	t.Cleanup(func() {
		n.do("DELETE", "/v1/requests/"+id, nil)
		recv(t, ch, 10*time.Second, id)
	})
}

// layoutReport is what layoutHarness found.
type layoutReport struct {
	Labels   []string          `json:"labels"`
	Problems []string          `json:"problems"`
	Crossed  int               `json:"crossed"`
	Edges    int               `json:"edges"`
	Elabels  int               `json:"elabels"`
	Ages     map[string]string `json:"ages"`    // lock -> its first holder's age tooltip
	Members  map[string]string `json:"members"` // member id -> the kind its colour shows
	Quorum   string            `json:"quorum"`
	Kinds    map[string]string `json:"kinds"` // session -> the kind its graph node's colour shows
	Graph    string            `json:"graph"` // the graph's count: "N edges", "· deadlock"
}

// layoutFront serves node (a node's API, or a wrapper of it) behind the
// test harness at /test-harness.
func layoutFront(t *testing.T, node http.Handler) *httptest.Server {
	front := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path == "/test-harness" {
			w.Header().Set("Content-Type", "text/html")
			w.Write([]byte(layoutHarness))
			return
		}
		node.ServeHTTP(w, r)
	}))
	t.Cleanup(front.Close)
	return front
}

// layoutAt runs the harness in a w×h window once the page shows locks
// rows, sessions rows and edges edges, reports its problems as errors and
// screenshots the page in a window of shotSize ("W,H") into dir as
// dashboard-W.png.
func layoutAt(t *testing.T, chromium string, front *httptest.Server, w, h, locks, sessions, edges int, dir, shotSize string) layoutReport {
	t.Helper()
	url := fmt.Sprintf("%s/test-harness?w=%d&h=%d&locks=%d&sessions=%d&edges=%d", front.URL, w, h, locks, sessions, edges)
	dom := runChromium(t, chromium, fmt.Sprintf("--window-size=%d,%d", w+40, h+200), "--dump-dom", url)
	var rep layoutReport
	if err := json.Unmarshal([]byte(html.UnescapeString(between(dom, `<pre id="report">`, "</pre>"))), &rep); err != nil {
		t.Fatalf("%d×%d: no layout report (%v); DOM:\n%s", w, h, err, dom)
	}
	for _, p := range rep.Problems {
		t.Errorf("%d×%d: %s", w, h, p)
	}
	shot := filepath.Join(dir, fmt.Sprintf("dashboard-%d.png", w))
	runChromium(t, chromium, "--screenshot="+shot, "--window-size="+shotSize, front.URL+"/ui/?live=poll")
	if png, err := os.ReadFile(shot); err != nil || !bytes.HasPrefix(png, []byte("\x89PNG")) {
		t.Errorf("%d×%d: no PNG screenshot at %s: %v", w, h, shot, err)
	}
	t.Logf("%d×%d: screenshot %s", w, h, shot)
	return rep
}

// screenshotDir is LOCKD_SCREENSHOT_DIR (to look at the screenshots), or
// a temporary directory.
func screenshotDir(t *testing.T, sub string) string {
	dir := os.Getenv("LOCKD_SCREENSHOT_DIR")
	if dir == "" {
		return t.TempDir()
	}
	dir = filepath.Join(dir, sub)
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	return dir
}

// TestUILayoutInChromium: at 1,280 and 1,920 px the dashboard fits its
// window with a busy table: no horizontal scrollbar, no column cut off,
// lock names on one line, and wait-for graph nodes that can be told
// apart (all 7 sessions wait or are waited for), with the harness's other
// checks (the fold, crossings, labels, legends, durations). It
// screenshots both widths, the whole page (into LOCKD_SCREENSHOT_DIR/busy
// when set, to look at them).
func TestUILayoutInChromium(t *testing.T) {
	chromium := needChromium(t)
	n := singleNode(t, nodeOptions{})
	locks, sessions := layoutFixture(t, n)
	front := layoutFront(t, n.srv)
	dir := screenshotDir(t, "busy")
	for _, width := range []int{1280, 1920} {
		rep := layoutAt(t, chromium, front, width, 1000, locks, sessions, 0, dir, fmt.Sprintf("%d,1500", width))
		if len(rep.Labels) != sessions {
			t.Errorf("%d px: graph labels %q, want one for each of the %d sessions", width, rep.Labels, sessions)
		}
		t.Logf("%d px: graph labels %q", width, rep.Labels)
	}
}

// outageFixture is the load of an outage hour: 20 sessions (lockctl jobs
// named alike up to the pid, services with short names, one without a
// name, one with a TTL of 24h; TTLs of minutes, so that none expires
// during the test), 10 names in use (a semaphore of 3, read holds, a long
// name) and 8 waiting requests whose wait-for graph has a layout without
// crossings: four trees, one with an edge that skips a column (a waiter
// queued behind another waits for both it and the holder). It returns
// the number of lock rows and sessions the page shows.
func outageFixture(t *testing.T, n *testNode) (locks, sessions int) {
	var ss []string
	for i := range 20 {
		body := map[string]any{"ttl": []string{"5m", "10m", "1h"}[i%3]}
		switch {
		case i == 19:
			body["ttl"] = "24h"
			body["name"] = "nightly-reindex"
		case i == 15:
		case i%2 == 0:
			body["name"] = fmt.Sprintf("lockctl vm-%d pid %d: /opt/pipeline/bin/run --stage %s", i%4, 4100+i, []string{"build", "test", "deploy"}[i%3])
		default:
			body["name"] = fmt.Sprintf("%s-%d", []string{"render", "billing", "ingest", "gc"}[i%4], i)
		}
		ss = append(ss, n.session(body))
	}
	long := "reports/daily/2026-11-28/eu-west-1/summary"
	for _, h := range []struct {
		s          int
		name, mode string
	}{
		{0, "db/orders", "write"}, {1, "jobs/backup/nightly", "write"}, {3, "jobs/render", "write"},
		{3, "cache/warm", "write"}, {4, "deploy/eu-west-1", "write"}, {6, long, "read"}, {7, long, "read"},
		{15, "queue/ingest", "write"}, {16, "leases/gc", "write"}, {17, "config/global", "read"}, {18, "config/global", "read"},
	} {
		n.mustGrant(ss[h.s], h.name, h.mode)
	}
	pool := map[string]any{"name": "pool/workers", "mode": "write", "weight": 1, "limit": 3}
	for _, s := range ss[9:12] {
		n.must(http.StatusOK, "POST", "/v1/acquire", map[string]any{"session": s, "wait": "0s", "locks": []map[string]any{pool}}, nil)
	}
	for i, w := range []struct {
		s    int
		spec map[string]any
	}{
		{1, map[string]any{"name": "db/orders"}}, {2, map[string]any{"name": "db/orders"}},
		{4, map[string]any{"name": "jobs/render"}}, {5, map[string]any{"name": "jobs/backup/nightly"}},
		{8, map[string]any{"name": long}}, {12, pool},
		{13, map[string]any{"name": "cache/warm"}}, {14, map[string]any{"name": "deploy/eu-west-1"}},
	} {
		queued(t, n, "outage-w"+strconv.Itoa(i), ss[w.s], "5m", w.spec)
	}
	return 10, len(ss)
}

// TestUIOutageLayoutInChromium: with the load of an outage hour (20
// sessions, 10 names, 8 waits), at 1280×900 and 1920×1080 the first rows
// of the lock table are visible without scrolling; the wait-for graph
// has no crossing edge and every edge carries its lock's name, no label
// over another or over a node; node and member colours have a legend;
// TTLs and ages stay on one line (a TTL of 24h reads "24h"), and an age's
// tooltip gives the time it counts from: the holder's since. It
// screenshots what the window shows (into LOCKD_SCREENSHOT_DIR/outage
// when set).
func TestUIOutageLayoutInChromium(t *testing.T) {
	chromium := needChromium(t)
	// Waits longer than the test, which loads the page five times.
	n := singleNode(t, nodeOptions{api: func(c *api.Config) { c.MaxWait = 10 * time.Minute }})
	locks, sessions := outageFixture(t, n)
	var edges []wire.WaitEdge
	n.must(http.StatusOK, "GET", "/v1/waitgraph", nil, &edges)
	if len(edges) != 12 { // 8 waiters: one waits for two holders, one for three, one for a holder and a waiter
		t.Fatalf("the fixture's wait-for graph has %d edges, want 12: %v", len(edges), edges)
	}
	var list []wire.Lock
	n.must(http.StatusOK, "GET", "/v1/locks", nil, &list)
	front := layoutFront(t, n.srv)
	dir := screenshotDir(t, "outage")
	for _, size := range [][2]int{{1280, 900}, {1920, 1080}} {
		w, h := size[0], size[1]
		rep := layoutAt(t, chromium, front, w, h, locks, sessions, len(edges), dir, fmt.Sprintf("%d,%d", w, h))
		if rep.Edges != len(edges) || rep.Elabels != len(edges) {
			t.Errorf("%d×%d: %d edges drawn, %d labelled; want all %d of /v1/waitgraph labelled", w, h, rep.Edges, rep.Elabels, len(edges))
		}
		for _, l := range list {
			since := l.Holders[0].Since.Truncate(time.Second)
			title := rep.Ages[l.Name]
			at, err := time.Parse(time.RFC3339, isoIn(title))
			if err != nil || !at.Equal(since) {
				t.Errorf("%d×%d: %s's holder's age tooltip %q, want its since %s", w, h, l.Name, title, since.Format(time.RFC3339))
			}
		}
	}
	dom := runChromium(t, chromium, "--dump-dom", front.URL+"/ui/?live=poll")
	mustHave(t, "the sessions table", between(dom, `<table class="grid" id="sessions">`, `</table>`), []string{`>24h<`}, []string{"24h0m0s<"})
}

// isoIn returns the first ISO 8601 time with a zone (Z or ±hh:mm) in s.
func isoIn(s string) string {
	return regexp.MustCompile(`\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d(Z|[+-]\d\d:\d\d)`).FindString(s)
}

// rewrite serves h, with the JSON answer to path changed by edit.
func rewrite[T any](t *testing.T, h http.Handler, path string, edit func(*T)) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path != path {
			h.ServeHTTP(w, r)
			return
		}
		rec := httptest.NewRecorder()
		h.ServeHTTP(rec, r)
		var v T
		if err := json.Unmarshal(rec.Body.Bytes(), &v); err != nil {
			t.Errorf("%s: %v", path, err)
		}
		edit(&v)
		maps.Copy(w.Header(), rec.Header())
		w.Header().Del("Content-Length")
		w.WriteHeader(rec.Code)
		json.NewEncoder(w).Encode(v)
	})
}

// TestUIClusterStrip: each member's colour says its state (its raft
// role, or down or suspect as this node's gossip sees it), every colour
// has its legend entry, and the header shows the node's own judgement of
// its quorum (the status's quorum and quorum_lost: the voters its raft
// reaches against the majority a leader needs), not a count of its own
// from gossip. The test's front server gives the node's status six
// members, five voters and a non-voter, and the quorum the node judged.
func TestUIClusterStrip(t *testing.T) {
	chromium := needChromium(t)
	f := newOpsFixture(t)
	for _, c := range []struct {
		name      string
		leader    bool
		statuses  []string // n2..n5
		reachable []string // as the node's raft sees them
		kinds     map[string]string
		quorum    string
	}{
		{"with a leader", true, []string{"alive", "alive", "suspect", "dead"}, []string{"n1", "n2", "n3", "n4"},
			map[string]string{"n1": "leader", "n2": "follower", "n3": "follower", "n4": "suspect", "n5": "down", "n6": "non-voter"},
			"4/5 voters reachable"},
		// Gossip still sees n3 alive and n4 unknown: raft's verdict is
		// what the header shows.
		{"quorum lost", false, []string{"dead", "alive", "unknown", "left"}, []string{"n1"},
			map[string]string{"n1": "follower", "n2": "down", "n3": "unknown", "n4": "unknown", "n5": "down", "n6": "non-voter"},
			"1/5 voters reachable — quorum lost"},
	} {
		front := layoutFront(t, rewrite(t, f.n.srv, "/v1/status", func(st *wire.StatusResponse) {
			st.Members = st.Members[:1]
			for i, status := range c.statuses {
				st.Members = append(st.Members, wire.Member{ID: fmt.Sprintf("n%d", i+2), Voter: true, Status: status,
					HTTPAddr: fmt.Sprintf("10.0.0.%d:7001", i+2)})
			}
			st.Members = append(st.Members, wire.Member{ID: "n6", Status: "alive"})
			st.Quorum = wire.Quorum{Voters: 5, Reachable: c.reachable, Needed: 3}
			st.QuorumLost = !c.leader
			if !c.leader {
				st.State, st.Leader = "follower", wire.Leader{}
			}
		}))
		rep := layoutAt(t, chromium, front, 1280, 900, 2, 3, 1, screenshotDir(t, "cluster-"+strings.ReplaceAll(c.name, " ", "-")), "1280,900")
		if !maps.Equal(rep.Members, c.kinds) {
			t.Errorf("%s: member colours %v, want %v", c.name, rep.Members, c.kinds)
		}
		if rep.Quorum != c.quorum {
			t.Errorf("%s: quorum %q, want %q", c.name, rep.Quorum, c.quorum)
		}
	}
}

// TestUIWaitGraphCycle: a cycle in the wait-for graph is drawn apart and
// red: the test's front server adds the reverse of the fixture's one edge
// (a deadlock of two, which lockd itself breaks as it forms), and the
// page shows both edges without a crossing, both sessions as on a cycle,
// and says "deadlock".
func TestUIWaitGraphCycle(t *testing.T) {
	chromium := needChromium(t)
	f := newOpsFixture(t)
	front := layoutFront(t, rewrite(t, f.n.srv, "/v1/waitgraph", func(edges *[]wire.WaitEdge) {
		if len(*edges) != 1 {
			t.Errorf("the fixture's wait-for graph %v, want one edge", *edges)
			return
		}
		*edges = append(*edges, wire.WaitEdge{From: (*edges)[0].To, To: (*edges)[0].From})
	}))
	rep := layoutAt(t, chromium, front, 1280, 900, 2, 3, 2, screenshotDir(t, "cycle"), "1280,900")
	if want := map[string]string{f.s1: "cycle", f.s2: "cycle"}; !maps.Equal(rep.Kinds, want) {
		t.Errorf("graph node colours %v, want %v", rep.Kinds, want)
	}
	if rep.Graph != "2 edges · deadlock" {
		t.Errorf("the graph's count %q, want \"2 edges · deadlock\"", rep.Graph)
	}
}
