package api_test

import (
	"bufio"
	"fmt"
	"io"
	"net"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/lockd/lockd/api"
)

// rawDo sends body with the given Content-Type (and Origin, if not "").
func (n *testNode) rawDo(method, path, contentType, origin, body string) *http.Response {
	n.t.Helper()
	req, err := http.NewRequest(method, n.ts.URL+path, strings.NewReader(body))
	if err != nil {
		n.t.Fatal(err)
	}
	if body == "" {
		req.Body, req.ContentLength = http.NoBody, 0
	}
	if contentType != "" {
		req.Header.Set("Content-Type", contentType)
	}
	if origin != "" {
		req.Header.Set("Origin", origin)
	}
	res, err := http.DefaultClient.Do(req)
	if err != nil {
		n.t.Fatal(err)
	}
	_, _ = io.Copy(io.Discard, res.Body)
	res.Body.Close()
	return res
}

// TestBodiesMustBeJSON: a cross-site text/plain POST (which a browser
// sends without asking) is refused with 415 and releases nothing.
func TestBodiesMustBeJSON(t *testing.T) {
	n := singleNode(t, nodeOptions{})
	s := n.session(nil)
	n.mustGrant(s, "jobs/a", "write")
	before := n.status()
	body := `{"session":"` + s + `","name":"jobs/a"}`
	for _, ct := range []string{"text/plain", "", "application/x-www-form-urlencoded", "multipart/form-data; boundary=x", "application/jsonx"} {
		if res := n.rawDo("POST", "/v1/release", ct, "https://evil.example", body); res.StatusCode != http.StatusUnsupportedMediaType {
			t.Fatalf("Content-Type %q: %d, want 415", ct, res.StatusCode)
		}
	}
	if after := n.status(); after.AppliedIndex != before.AppliedIndex {
		t.Fatalf("a refused body changed the table (index %d -> %d)", before.AppliedIndex, after.AppliedIndex)
	}
	if res := n.rawDo("POST", "/v1/release", "application/json; charset=utf-8", "", body); res.StatusCode != http.StatusOK {
		t.Fatalf("JSON with a charset: %d", res.StatusCode)
	}
	// No body, no Content-Type needed.
	if res := n.rawDo("POST", "/v1/sessions/"+s+"/keepalive", "", "", ""); res.StatusCode != http.StatusOK {
		t.Fatalf("keepalive without a body: %d", res.StatusCode)
	}
}

func TestNoCORSUnlessConfigured(t *testing.T) {
	n := singleNode(t, nodeOptions{})
	for _, m := range []string{"GET", "OPTIONS"} {
		res := n.rawDo(m, "/v1/locks", "", "https://evil.example", "")
		for k := range res.Header {
			if strings.HasPrefix(k, "Access-Control-") {
				t.Fatalf("%s without configured origins answers %s", m, k)
			}
		}
	}

	ok := "https://ops.example"
	c := singleNode(t, nodeOptions{api: func(c *api.Config) { c.AllowedOrigins = []string{ok} }})
	if res := c.rawDo("GET", "/v1/locks", "", ok, ""); res.Header.Get("Access-Control-Allow-Origin") != ok {
		t.Fatalf("allowed origin: %v", res.Header)
	}
	if res := c.rawDo("GET", "/v1/locks", "", "https://evil.example", ""); res.Header.Get("Access-Control-Allow-Origin") != "" {
		t.Fatalf("other origin got %q", res.Header.Get("Access-Control-Allow-Origin"))
	}
	req, _ := http.NewRequest("OPTIONS", c.ts.URL+"/v1/release", nil)
	req.Header.Set("Origin", ok)
	req.Header.Set("Access-Control-Request-Method", "POST")
	res, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	res.Body.Close()
	if res.StatusCode != http.StatusNoContent || !strings.Contains(res.Header.Get("Access-Control-Allow-Headers"), "Authorization") {
		t.Fatalf("preflight: %d %v", res.StatusCode, res.Header)
	}
}

// TestWaitAndStreamLimits: past --max-waits a waiting request is 429
// limit_exceeded; past --max-streams an event stream is; a stream ends
// after --max-stream-duration.
func TestWaitAndStreamLimits(t *testing.T) {
	n := singleNode(t, nodeOptions{api: func(c *api.Config) {
		c.MaxWaits, c.MaxStreams, c.MaxStreamDuration = 1, 1, 300*time.Millisecond
	}})
	a, b := n.session(nil), n.session(nil)
	n.mustGrant(a, "x", "write")
	first := async(func() resp { return n.acquire(b, "x", "write", "5s", "w1") })
	n.waitPending("w1")
	checkErr(t, n.acquire(b, "y", "write", "5s", "w2"), http.StatusTooManyRequests, "limit_exceeded", "second wait")
	n.mustGrant(b, "z", "write") // wait 0 takes no wait slot
	n.must(http.StatusOK, "POST", "/v1/release", map[string]any{"session": a, "name": "x"}, nil)
	if r := recv(t, first, 5*time.Second, "the waiter"); r.status != http.StatusOK {
		t.Fatalf("waiter: %s", r)
	}

	stream, err := http.Get(n.ts.URL + "/v1/events")
	if err != nil {
		t.Fatal(err)
	}
	defer stream.Body.Close()
	checkErr(t, n.do("GET", "/v1/events", nil), http.StatusTooManyRequests, "limit_exceeded", "second stream")
	done := make(chan error, 1)
	go func() {
		_, err := io.Copy(io.Discard, bufio.NewReader(stream.Body))
		done <- err
	}()
	select {
	case err := <-done:
		if err != nil {
			t.Fatalf("stream ended with %v", err)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("the stream outlived its maximum duration")
	}
}

func TestLimitListener(t *testing.T) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	refused := make(chan struct{}, 4)
	ll := api.LimitListener(l, 1, func() { refused <- struct{}{} })
	defer ll.Close()
	accepted := make(chan net.Conn, 4)
	go func() {
		for {
			c, err := ll.Accept()
			if err != nil {
				return
			}
			accepted <- c
		}
	}()
	c1, _ := net.Dial("tcp", l.Addr().String())
	defer c1.Close()
	s1 := <-accepted
	c2, _ := net.Dial("tcp", l.Addr().String())
	defer c2.Close()
	select {
	case <-refused:
	case <-time.After(5 * time.Second):
		t.Fatal("a second connection over the limit was not refused")
	}
	_ = c2.SetReadDeadline(time.Now().Add(5 * time.Second))
	if _, err := c2.Read(make([]byte, 1)); err == nil {
		t.Fatal("the refused connection is open")
	}
	s1.Close() // frees the slot
	c3, _ := net.Dial("tcp", l.Addr().String())
	defer c3.Close()
	select {
	case s3 := <-accepted:
		s3.Close()
	case <-time.After(5 * time.Second):
		t.Fatal("a freed slot was not reused")
	}
}

// TestNamesRefuseHiddenCharacters: names that could hide or reorder what
// is displayed are refused before anything is proposed.
func TestNamesRefuseHiddenCharacters(t *testing.T) {
	n := singleNode(t, nodeOptions{})
	s := n.session(nil)
	before := n.status()
	for _, name := range []string{"jobs/\x00x", "jobs/a\u202eb", "jobs/\u2066x\u2069", "jobs/\u200fx", "jobs/\ufeffx", "jobs/x\u2028", "jobs/\u0085"} {
		msg := checkErr(t, n.acquire(s, name, "write", "0s", ""), http.StatusBadRequest, "invalid_request", fmt.Sprintf("%q", name))
		if !strings.Contains(msg, "U+") {
			t.Errorf("%q: message %q does not name the code point", name, msg)
		}
	}
	checkErr(t, n.do("POST", "/v1/sessions", map[string]any{"name": "job\x00"}), http.StatusBadRequest, "invalid_request", "NUL in a session name")
	checkErr(t, n.do("POST", "/v1/sessions", map[string]any{"name": "\u202etxt.exe"}), http.StatusBadRequest, "invalid_request", "RLO in a session name")
	if after := n.status(); after.AppliedIndex != before.AppliedIndex {
		t.Fatalf("refused names changed the log: %d -> %d", before.AppliedIndex, after.AppliedIndex)
	}
	n.mustGrant(s, "jobs/ünïcode-名前", "write") // other Unicode is fine
}
