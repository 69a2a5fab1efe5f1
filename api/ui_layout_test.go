package api_test

import (
	"bytes"
	"encoding/json"
	"fmt"
	"html"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strconv"
	"testing"
	"time"
)

// layoutHarness loads the dashboard in a same-origin frame as wide as its
// own ?w= (a browser window of that width), waits until the page shows
// its locks, sessions and wait-for graph, and writes into #report what
// does not fit: the page or a panel wider than its box (a horizontal
// scrollbar, or a column cut off), a table, chip or graph wider than its
// panel or cell, a lock name wrapped into lines of fewer than 24
// characters on average (up to 24 characters: wrapped at all), and graph
// nodes labelled alike.
const layoutHarness = `<!doctype html><html><head><link rel="icon" href="data:,">
<style>body { margin: 0; } iframe { border: 0; display: block; }</style></head><body>
<iframe id="f" src="/ui/?live=poll" height="1000"></iframe><pre id="report"></pre>
<script>
"use strict";
const f = document.getElementById("f");
const q = new URLSearchParams(location.search);
f.width = q.get("w");
const until = (cond) => new Promise((resolve) => { const t = setInterval(() => { if (cond()) { clearInterval(t); resolve(); } }, 20); });
const doc = () => f.contentDocument;
const ready = () => doc() && doc().querySelector("#live.ok") && doc().querySelector("#graph svg") &&
  doc().querySelectorAll("#locks tr[data-lock]").length >= Number(q.get("locks")) &&
  doc().querySelectorAll("#sessions tr[data-session-row]").length >= Number(q.get("sessions"));
const name = (e) => (e.id ? "#" + e.id : e.tagName.toLowerCase() + (e.className && e.className.baseVal === undefined ? "." + e.className.split(" ").join(".") : "")) +
  (e.closest("[data-lock]") ? " of " + e.closest("[data-lock]").dataset.lock : "");
function inside(problems, inner, outer, what) {
  const a = inner.getBoundingClientRect(), b = outer.getBoundingClientRect();
  if (a.right > b.right + 1 || a.left < b.left - 1) {
    problems.push(name(inner) + " (" + Math.round(a.left) + "-" + Math.round(a.right) + "px) sticks out of " + what + " (" + Math.round(b.left) + "-" + Math.round(b.right) + "px)");
  }
}
(async () => {
  await until(ready);
  const d = doc(), problems = [];
  const de = d.documentElement;
  if (de.scrollWidth > de.clientWidth) problems.push("the page is " + de.scrollWidth + "px wide in a " + de.clientWidth + "px window");
  for (const p of d.querySelectorAll(".panel")) {
    if (p.hidden) continue;
    if (p.scrollWidth > p.clientWidth + 1) problems.push("#" + p.id + "'s content is " + p.scrollWidth + "px wide in " + p.clientWidth + "px");
    for (const e of p.querySelectorAll("table, svg")) inside(problems, e, p, "#" + p.id);
  }
  for (const c of d.querySelectorAll("td .chip")) inside(problems, c, c.closest("td"), "its cell");
  for (const td of d.querySelectorAll("#locks td.name")) {
    const r = d.createRange();
    r.selectNodeContents(td);
    const lines = new Set([...r.getClientRects()].filter((x) => x.width > 0).map((x) => Math.round(x.top))).size;
    if (lines > Math.ceil(td.textContent.length / 24)) problems.push("lock name " + td.textContent + " wraps over " + lines + " lines");
  }
  const labels = [...d.querySelectorAll("#graph g.node")].map((g) => [...g.querySelectorAll("text")].map((t) => t.textContent).join(" "));
  if (new Set(labels).size !== labels.length) problems.push("graph nodes labelled alike: " + JSON.stringify(labels));
  document.getElementById("report").textContent = JSON.stringify({ labels, problems });
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
		id := "layout-w" + strconv.Itoa(i)
		ch := async(func() resp {
			return n.do("POST", "/v1/acquire", map[string]any{"session": w.s, "wait": "60s", "request_id": id,
				"locks": []map[string]any{w.spec}})
		})
		n.waitPending(id)
		t.Cleanup(func() {
			n.do("DELETE", "/v1/requests/"+id, nil)
			recv(t, ch, 10*time.Second, id)
		})
	}
	return 4, len(ss)
}

// TestUILayoutInChromium: at 1,280 and 1,920 px the dashboard fits its
// window with a busy table: no horizontal scrollbar, no column cut off,
// lock names on one line, and wait-for graph nodes that can be told
// apart (all 7 sessions wait or are waited for). It screenshots both widths (into LOCKD_SCREENSHOT_DIR when set,
// to look at them).
func TestUILayoutInChromium(t *testing.T) {
	chromium := needChromium(t)
	n := singleNode(t, nodeOptions{})
	locks, sessions := layoutFixture(t, n)
	front := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path == "/test-harness" {
			w.Header().Set("Content-Type", "text/html")
			w.Write([]byte(layoutHarness))
			return
		}
		n.srv.ServeHTTP(w, r)
	}))
	t.Cleanup(front.Close)
	dir := os.Getenv("LOCKD_SCREENSHOT_DIR")
	if dir == "" {
		dir = t.TempDir()
	}
	for _, width := range []int{1280, 1920} {
		url := fmt.Sprintf("%s/test-harness?w=%d&locks=%d&sessions=%d", front.URL, width, locks, sessions)
		dom := runChromium(t, chromium, fmt.Sprintf("--window-size=%d,1100", width+40), "--dump-dom", url)
		var rep struct {
			Labels   []string `json:"labels"`
			Problems []string `json:"problems"`
		}
		if err := json.Unmarshal([]byte(html.UnescapeString(between(dom, `<pre id="report">`, "</pre>"))), &rep); err != nil {
			t.Fatalf("%d px: no layout report (%v); DOM:\n%s", width, err, dom)
		}
		for _, p := range rep.Problems {
			t.Errorf("%d px: %s", width, p)
		}
		if len(rep.Labels) != sessions {
			t.Errorf("%d px: graph labels %q, want one for each of the %d sessions", width, rep.Labels, sessions)
		}
		t.Logf("%d px: graph labels %q", width, rep.Labels)

		shot := filepath.Join(dir, fmt.Sprintf("dashboard-%d.png", width))
		runChromium(t, chromium, "--screenshot="+shot, fmt.Sprintf("--window-size=%d,1500", width), front.URL+"/ui/?live=poll")
		if png, err := os.ReadFile(shot); err != nil || !bytes.HasPrefix(png, []byte("\x89PNG")) {
			t.Errorf("%d px: no PNG screenshot at %s: %v", width, shot, err)
		}
		t.Logf("%d px: screenshot %s", width, shot)
	}
}
