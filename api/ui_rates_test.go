package api_test

import (
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

// TestUINodeRates: the dashboard shows handoff, grant and acquire rates
// from the node's /metrics; a release that hands a lock to a waiter while
// the page polls shows as a handoff rate above 0.
func TestUINodeRates(t *testing.T) {
	chromium := needChromium(t)
	n := singleNode(t, nodeOptions{})
	holder, waiter := n.session(map[string]any{"ttl": "60s"}), n.session(map[string]any{"ttl": "60s"})
	n.mustGrant(holder, "jobs/rate", "write")
	w := async(func() resp { return n.acquire(waiter, "jobs/rate", "write", "60s", "rate-w1") })
	n.waitPending("rate-w1")
	t.Cleanup(func() { recv(t, w, 10*time.Second, "the waiter") })
	var scrapes atomic.Int32
	var handoff sync.Once
	front := httptest.NewServer(http.HandlerFunc(func(rw http.ResponseWriter, r *http.Request) {
		if r.URL.Path == "/metrics" && scrapes.Add(1) == 2 {
			handoff.Do(func() { n.must(http.StatusOK, "DELETE", "/v1/locks/jobs/rate?session="+holder, nil, nil) })
		}
		n.srv.ServeHTTP(rw, r)
	}))
	t.Cleanup(front.Close)
	dom := runChromium(t, chromium, "--dump-dom", front.URL+"/ui/?live=poll")
	rates := between(dom, `<p class="rate" id="node-rates">`, `</p>`)
	mustHave(t, "the node's rates", rates, []string{"From this node's /metrics", "grants/s", "acquire requests/s"}, nil)
	v, err := strconv.ParseFloat(strings.TrimSuffix(between(rates, `<strong id="handoff-rate">`, `</strong>`), " handoffs/s"), 64)
	if err != nil || v <= 0 {
		t.Errorf("handoff rate in %q, want above 0 after the release handed the lock on (%d scrapes)", rates, scrapes.Load())
	}
}
