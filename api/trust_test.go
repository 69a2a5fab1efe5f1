package api_test

import (
	"io"
	"net/http"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/lockd/lockd/api"
)

// More checks of client trust: the edges of 415, CORS and the node-local
// limits, and every place a name enters.

func TestBodyContentTypeEdges(t *testing.T) {
	n := singleNode(t, nodeOptions{})
	for _, ct := range []string{"Application/JSON", "application/json;charset=UTF-8", "APPLICATION/JSON; charset=utf-8"} {
		if res := n.rawDo("POST", "/v1/sessions", ct, "", `{"ttl":"30s"}`); res.StatusCode != http.StatusCreated {
			t.Errorf("Content-Type %q: %d, want 201", ct, res.StatusCode)
		}
	}
	// A chunked body (no Content-Length) is a body too.
	req, _ := http.NewRequest("POST", n.ts.URL+"/v1/sessions", io.NopCloser(strings.NewReader(`{"ttl":"30s"}`)))
	req.Header.Set("Content-Type", "text/plain")
	req.TransferEncoding = []string{"chunked"}
	res, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	b, _ := io.ReadAll(res.Body)
	res.Body.Close()
	checkErr(t, resp{status: res.StatusCode, body: b}, http.StatusUnsupportedMediaType, "invalid_request", "chunked text/plain")
	// Requests without a body need no Content-Type.
	s := n.session(nil)
	n.mustGrant(s, "jobs/a", "write")
	if res := n.rawDo("DELETE", "/v1/locks/jobs/a?session="+s, "", "", ""); res.StatusCode != http.StatusOK {
		t.Fatalf("DELETE without a body: %d", res.StatusCode)
	}
	if res := n.rawDo("DELETE", "/v1/sessions/"+s, "", "", ""); res.StatusCode != http.StatusOK {
		t.Fatalf("DELETE session without a body: %d", res.StatusCode)
	}
}

func TestCORSForConfiguredOrigins(t *testing.T) {
	ok := "https://ops.example"
	n := singleNode(t, nodeOptions{api: func(c *api.Config) { c.AllowedOrigins = []string{ok, "http://localhost:3000"} }})
	res := n.rawDo("GET", "/v1/locks", "", "https://evil.example", "")
	if res.Header.Get("Access-Control-Allow-Origin") != "" || res.Header.Get("Vary") != "Origin" {
		t.Fatalf("other origin: %v", res.Header)
	}
	for _, origin := range []string{ok, "http://localhost:3000"} {
		req, _ := http.NewRequest("OPTIONS", n.ts.URL+"/v1/locks/jobs/a", nil)
		req.Header.Set("Origin", origin)
		req.Header.Set("Access-Control-Request-Method", "PUT")
		req.Header.Set("Access-Control-Request-Headers", "authorization, content-type")
		res, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		res.Body.Close()
		h := res.Header
		if h.Get("Access-Control-Allow-Origin") != origin || h.Get("Vary") != "Origin" {
			t.Fatalf("preflight from %s: %v", origin, h)
		}
		for _, m := range []string{"GET", "POST", "PUT", "DELETE"} {
			if !strings.Contains(h.Get("Access-Control-Allow-Methods"), m) {
				t.Errorf("preflight allows %q, not %s", h.Get("Access-Control-Allow-Methods"), m)
			}
		}
		if h.Get("Access-Control-Allow-Headers") != "Authorization, Content-Type" {
			t.Errorf("preflight allows headers %q", h.Get("Access-Control-Allow-Headers"))
		}
	}
	// An allowed origin still needs JSON bodies.
	if res := n.rawDo("POST", "/v1/sessions", "text/plain", ok, `{"ttl":"30s"}`); res.StatusCode != http.StatusUnsupportedMediaType {
		t.Fatalf("text/plain from an allowed origin: %d", res.StatusCode)
	}
}

func TestParseOrigins(t *testing.T) {
	got, err := api.ParseOrigins(" https://a.example , http://localhost:3000,")
	if err != nil || len(got) != 2 || got[0] != "https://a.example" || got[1] != "http://localhost:3000" {
		t.Fatalf("ParseOrigins: %q, %v", got, err)
	}
	for _, bad := range []string{"*", "https://*.example", "a.example", "https://a.example/", "ftp://a.example", "https://"} {
		if _, err := api.ParseOrigins(bad); err == nil {
			t.Errorf("ParseOrigins(%q) accepted", bad)
		}
	}
}

// TestEveryWaitTakesASlot: request long-polls and blocking queries count
// against --max-waits like acquires, reads without a wait do not, and
// every refusal is counted in /metrics by limit.
func TestEveryWaitTakesASlot(t *testing.T) {
	n := singleNode(t, nodeOptions{api: func(c *api.Config) { c.MaxWaits, c.MaxStreams = 1, 1 }})
	a, b := n.session(nil), n.session(nil)
	n.mustGrant(a, "x", "write")
	first := async(func() resp { return n.acquire(b, "x", "write", "10s", "w1") })
	n.waitPending("w1")
	checkErr(t, n.do("GET", "/v1/requests/w1?wait=5s", nil), http.StatusTooManyRequests, "limit_exceeded", "long-poll")
	checkErr(t, n.do("GET", "/v1/locks/x?index=1&wait=5s", nil), http.StatusTooManyRequests, "limit_exceeded", "blocking query")
	checkErr(t, n.do("PUT", "/v1/locks/y?session="+b+"&wait=5s", nil), http.StatusTooManyRequests, "limit_exceeded", "PUT with a wait")
	n.must(http.StatusOK, "GET", "/v1/requests/w1", nil, nil)
	n.must(http.StatusOK, "GET", "/v1/locks/x", nil, nil)
	n.must(http.StatusOK, "POST", "/v1/release", map[string]any{"session": a, "name": "x"}, nil)
	if r := recv(t, first, 10*time.Second, "the waiter"); r.status != http.StatusOK {
		t.Fatalf("waiter: %s", r)
	}
	n.must(http.StatusOK, "GET", "/v1/requests/w1?wait=1ms", nil, nil) // the slot is free again

	stream, err := http.Get(n.ts.URL + "/v1/events")
	if err != nil {
		t.Fatal(err)
	}
	defer stream.Body.Close()
	checkErr(t, n.do("GET", "/v1/events", nil), http.StatusTooManyRequests, "limit_exceeded", "second stream")
	metrics := string(n.must(http.StatusOK, "GET", "/metrics", nil, nil).body)
	for _, want := range []string{`lockd_limit_refusals_total{limit="waits"} 3`, `lockd_limit_refusals_total{limit="streams"} 1`,
		`lockd_limit_refusals_total{limit="conns"} 0`} {
		if !strings.Contains(metrics, want) {
			t.Errorf("/metrics lacks %s", want)
		}
	}
}

// TestEveryNameIsChecked: a hidden character is refused wherever a name
// enters, before anything is proposed, naming the code point.
func TestEveryNameIsChecked(t *testing.T) {
	n := singleNode(t, nodeOptions{})
	s := n.session(nil)
	before := n.status().AppliedIndex
	rlo := "jobs/a\u202eb"
	for _, c := range []struct {
		method, path string
		body         any
	}{
		{"PUT", "/v1/locks/" + url.PathEscape(rlo) + "?session=" + s, nil},
		{"PUT", "/v1/locks/jobs/%00x?session=" + s, nil},
		{"DELETE", "/v1/locks/" + url.PathEscape(rlo) + "?session=" + s, nil},
		{"POST", "/v1/release", map[string]any{"session": s, "name": rlo}},
		{"POST", "/v1/surrender", map[string]any{"session": s, "name": "jobs/\x7f"}},
		{"POST", "/v1/acquire", map[string]any{"session": s, "locks": []map[string]any{{"name": "ok"}, {"name": "jobs/\u2029"}}}},
		{"GET", "/v1/check?token=1&name=" + url.QueryEscape(rlo), nil},
		{"POST", "/v1/sessions", map[string]any{"ttl": "30s", "name": "night\u061cly"}},
	} {
		msg := checkErr(t, n.do(c.method, c.path, c.body), http.StatusBadRequest, "invalid_request", c.method+" "+c.path)
		if !strings.Contains(msg, "U+") {
			t.Errorf("%s %s: message %q does not name the code point", c.method, c.path, msg)
		}
	}
	if after := n.status().AppliedIndex; after != before {
		t.Fatalf("refused names changed the log: %d -> %d", before, after)
	}
	n.must(http.StatusOK, "GET", "/v1/check?token=1&name=jobs/a", nil, nil)
	n.must(http.StatusOK, "GET", "/v1/locks?prefix="+url.QueryEscape("jobs/\u202e"), nil, nil) // filters stay lenient
}
