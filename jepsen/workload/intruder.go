package workload

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"math/rand/v2"
	"net/http"
	"net/url"
	"sync"
	"time"

	"github.com/lockd/lockd/jepsen/history"
)

// The intruder checks session ownership under faults: with a token of its
// own (write on every name, not a management token), it tries at a low,
// bounded rate to act through the workers' live sessions — keep one alive,
// release or surrender a lock it holds, close it, acquire through it. The
// Ownership checker requires every attempt to be refused. With the
// management token (the intruder-admin negative control) the attempts
// succeed, and the checker must say so.

// intrudeEvery is the pause between attempts; intrudeMax bounds them.
const (
	intrudeEvery = 300 * time.Millisecond
	intrudeMax   = 2000
)

// targets are the workers' live sessions and what each last got.
type targets struct {
	mu   sync.Mutex
	held map[string][]string // session -> names of its last grant
}

// note follows a worker's events: a grant makes its session a target, its
// close or loss ends it.
func (t *targets) note(e history.Event) {
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.held == nil {
		t.held = map[string][]string{}
	}
	switch {
	case e.Type == history.OK && e.F == history.Acquire:
		names := make([]string, len(e.Granted))
		for i, g := range e.Granted {
			names[i] = g.Name
		}
		t.held[e.Session] = names
	case e.F == history.Close && e.Type != history.Invoke, e.F == history.Lost:
		delete(t.held, e.Session)
	}
}

// pick returns a random target session and one of its names.
func (t *targets) pick(rng *rand.Rand) (session, name string, ok bool) {
	t.mu.Lock()
	defer t.mu.Unlock()
	i, n := 0, rng.IntN(len(t.held)+1)
	for s, names := range t.held {
		if i == n || i == len(t.held)-1 {
			if len(names) == 0 {
				return s, "", true
			}
			return s, names[rng.IntN(len(names))], true
		}
		i++
	}
	return "", "", false
}

// intrude runs the intruder until ctx ends or intrudeMax attempts.
func (e *Env) intrude(ctx context.Context) {
	rng := rand.New(rand.NewPCG(e.Seed, 0x1badd00d))
	hc := &http.Client{Transport: &http.Transport{TLSClientConfig: e.TLS}, Timeout: 5 * time.Second}
	defer hc.CloseIdleConnections()
	scheme := "http://"
	if e.TLS != nil {
		scheme = "https://"
	}
	for n := 0; n < intrudeMax && ctx.Err() == nil; n++ {
		Sleep(ctx, intrudeEvery)
		session, name, ok := e.targets.pick(rng)
		if !ok || ctx.Err() != nil {
			continue
		}
		method, path, body, what := intrusion(rng, session, name)
		base := scheme + e.Endpoints[rng.IntN(len(e.Endpoints))]
		ev := history.Event{Process: history.Intruder, Worker: -1, F: history.Intrude, Session: session, Names: what}
		ev.Type = history.Invoke
		e.Rec.Add(ev)
		ev.Type, ev.Error = e.attempt(ctx, hc, method, base+path, body)
		e.Rec.Add(ev)
	}
}

// intrusion chooses what to try on session.
func intrusion(rng *rand.Rand, session, name string) (method, path string, body any, what []string) {
	sp := "/v1/sessions/" + url.PathEscape(session)
	switch rng.IntN(5) {
	case 0:
		return "POST", sp + "/keepalive", nil, []string{"keepalive"}
	case 1:
		return "POST", "/v1/release", map[string]string{"session": session, "name": name}, []string{"release", name}
	case 2:
		return "POST", "/v1/surrender", map[string]string{"session": session, "name": name}, []string{"surrender", name}
	case 3:
		return "DELETE", sp, nil, []string{"close"}
	}
	return "POST", "/v1/acquire", map[string]any{"session": session, "locks": []map[string]string{{"name": "intruder/x"}}},
		[]string{"acquire", "intruder/x"}
}

// attempt sends one intrusion: OK when it was accepted, Fail with the
// error code when refused, Info when the outcome is unknown.
func (e *Env) attempt(ctx context.Context, hc *http.Client, method, u string, body any) (history.Type, string) {
	var rd io.Reader
	if body != nil {
		b, _ := json.Marshal(body)
		rd = bytes.NewReader(b)
	}
	req, err := http.NewRequestWithContext(ctx, method, u, rd)
	if err != nil {
		return history.Fail, err.Error()
	}
	if body != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	req.Header.Set("Authorization", "Bearer "+e.Intruder)
	resp, err := hc.Do(req)
	if err != nil {
		return history.Info, err.Error()
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(io.LimitReader(resp.Body, 64<<10))
	if resp.StatusCode/100 == 2 {
		return history.OK, ""
	}
	var eb struct {
		Error struct{ Code string } `json:"error"`
	}
	if json.Unmarshal(b, &eb) != nil || eb.Error.Code == "" || eb.Error.Code == "no_leader" {
		return history.Info, string(b)
	}
	return history.Fail, eb.Error.Code
}
