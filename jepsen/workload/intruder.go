package workload

import (
	"bytes"
	"cmp"
	"context"
	"encoding/json"
	"io"
	"math/rand/v2"
	"net/http"
	"net/url"
	"slices"
	"sync"
	"time"

	"github.com/lockd/lockd/jepsen/history"
)

// The intruder checks session ownership under faults: with a token of its
// own (write on the workers' prefix "jepsen/", not a management token), it
// tries at a low, bounded rate to act through the workers' live sessions —
// keep one alive, release or surrender a lock it holds, close it, acquire
// through it, cancel one of its pending acquires (found with GET
// /v1/locks/{name}, which lists waiters and their request ids; read with
// the observer's token, since a lock view names only the caller's own
// sessions: the intruder stands for someone who learned the ids
// elsewhere, from a log or a shared screen). The
// Ownership checker requires every attempt to be refused, and no worker
// to lose what an attempt could have taken. With the management token
// (the intruder-admin negative control) the attempts succeed, and the
// checker must say so.

// intrudeEvery is the pause between attempts; intrudeMax bounds them.
const (
	intrudeEvery = 300 * time.Millisecond
	intrudeMax   = 2000
)

// IntruderName is what the intruder acquires through a worker's session:
// inside the tokens' prefix (so that only ownership can refuse it), apart
// from every workload's names.
const IntruderName = "jepsen/intruder/x"

// targets are the workers' live sessions and what each last got.
type targets struct {
	mu    sync.Mutex
	held  map[string][]string // session -> names of its last grant
	names map[string]bool     // every name acquired
}

// note follows a worker's events: an acquire makes its session a target,
// a grant says what it holds, its close or loss ends it.
func (t *targets) note(e history.Event) {
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.held == nil {
		t.held, t.names = map[string][]string{}, map[string]bool{}
	}
	switch {
	case e.Type == history.Invoke && e.F == history.Acquire:
		if _, ok := t.held[e.Session]; !ok {
			t.held[e.Session] = nil
		}
		for _, l := range e.Locks {
			t.names[l.Name] = true
		}
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

// pick returns a random target session and one of its names ("" when it
// was granted nothing yet).
func (t *targets) pick(rng *rand.Rand) (session, name string, ok bool) {
	t.mu.Lock()
	defer t.mu.Unlock()
	if len(t.held) == 0 {
		return "", "", false
	}
	i, n := 0, rng.IntN(len(t.held))
	for s, names := range t.held {
		if i == n {
			if len(names) == 0 {
				return s, "", true
			}
			return s, names[rng.IntN(len(names))], true
		}
		i++
	}
	return "", "", false
}

// live reports whether session is a target.
func (t *targets) live(session string) bool {
	t.mu.Lock()
	defer t.mu.Unlock()
	_, ok := t.held[session]
	return ok
}

// name returns a random name the workers acquire ("": none yet).
func (t *targets) name(rng *rand.Rand) string {
	t.mu.Lock()
	defer t.mu.Unlock()
	all := make([]string, 0, len(t.names))
	for n := range t.names {
		all = append(all, n)
	}
	if len(all) == 0 {
		return ""
	}
	slices.Sort(all)
	return all[rng.IntN(len(all))]
}

// intrusionTry is one attempt: the request and what the history says.
type intrusionTry struct {
	method, url string
	body        any
	session     string
	what        []string
}

// intrude runs the intruder until ctx ends or intrudeMax attempts.
func (e *Env) intrude(ctx context.Context) {
	rng := rand.New(rand.NewPCG(e.Seed, 0x1badd00d))
	hc := &http.Client{Transport: &http.Transport{TLSClientConfig: e.TLS}, Timeout: 5 * time.Second}
	defer hc.CloseIdleConnections()
	for n := 0; n < intrudeMax && ctx.Err() == nil; n++ {
		Sleep(ctx, intrudeEvery)
		try, ok := e.nextIntrusion(ctx, hc, rng)
		if !ok || ctx.Err() != nil {
			continue
		}
		ev := history.Event{Process: history.Intruder, Worker: -1, F: history.Intrude, Session: try.session, Names: try.what}
		ev.Type = history.Invoke
		e.Rec.Add(ev)
		ev.Type, ev.Error = e.attempt(ctx, hc, try.method, try.url, try.body)
		e.Rec.Add(ev)
	}
}

// base is the URL of a random node.
func (e *Env) base(rng *rand.Rand) string {
	scheme := "http://"
	if e.TLS != nil {
		scheme = "https://"
	}
	return scheme + e.Endpoints[rng.IntN(len(e.Endpoints))]
}

// nextIntrusion chooses what to try, on which session, at which node.
func (e *Env) nextIntrusion(ctx context.Context, hc *http.Client, rng *rand.Rand) (intrusionTry, bool) {
	base := e.base(rng)
	kind := rng.IntN(6)
	if kind == 5 {
		if session, id, ok := e.pendingRequest(ctx, hc, base, rng); ok {
			u := base + "/v1/requests/" + url.PathEscape(id)
			if rng.IntN(2) == 0 {
				u += "?session=" + url.QueryEscape(session)
			}
			return intrusionTry{method: "DELETE", url: u, session: session, what: []string{"cancel", id}}, true
		}
	}
	session, name, ok := e.targets.pick(rng)
	if !ok {
		return intrusionTry{}, false
	}
	if name == "" && (kind == 1 || kind == 2) || kind == 5 {
		kind = 0 // nothing held to release, or no request pending: keep it alive
	}
	sp := base + "/v1/sessions/" + url.PathEscape(session)
	t := intrusionTry{session: session}
	switch kind {
	case 0:
		t.method, t.url, t.what = "POST", sp+"/keepalive", []string{"keepalive"}
	case 1:
		t.method, t.url, t.what = "POST", base+"/v1/release", []string{"release", name}
		t.body = map[string]string{"session": session, "name": name}
	case 2:
		t.method, t.url, t.what = "POST", base+"/v1/surrender", []string{"surrender", name}
		t.body = map[string]string{"session": session, "name": name}
	case 3:
		t.method, t.url, t.what = "DELETE", sp, []string{"close"}
	default:
		t.method, t.url, t.what = "POST", base+"/v1/acquire", []string{"acquire", IntruderName}
		t.body = map[string]any{"session": session, "locks": []map[string]string{{"name": IntruderName}}}
	}
	return t, true
}

// pendingRequest reads a workload name's waiters (GET /v1/locks/{name},
// with the observer's token, or the intruder's without one) and returns
// one of a worker's pending requests.
func (e *Env) pendingRequest(ctx context.Context, hc *http.Client, base string, rng *rand.Rand) (session, id string, ok bool) {
	name := e.targets.name(rng)
	if name == "" {
		return "", "", false
	}
	req, err := http.NewRequestWithContext(ctx, "GET", base+"/v1/locks/"+name, nil)
	if err != nil {
		return "", "", false
	}
	req.Header.Set("Authorization", "Bearer "+cmp.Or(e.Observer, e.Intruder))
	resp, err := hc.Do(req)
	if err != nil {
		return "", "", false
	}
	defer resp.Body.Close()
	var lock struct {
		Waiters []struct {
			Session   string `json:"session"`
			RequestID string `json:"request_id"`
		} `json:"waiters"`
	}
	if resp.StatusCode != http.StatusOK || json.NewDecoder(io.LimitReader(resp.Body, 1<<20)).Decode(&lock) != nil {
		return "", "", false
	}
	var mine []int
	for i, w := range lock.Waiters {
		if w.RequestID != "" && e.targets.live(w.Session) {
			mine = append(mine, i)
		}
	}
	if len(mine) == 0 {
		return "", "", false
	}
	w := lock.Waiters[mine[rng.IntN(len(mine))]]
	return w.Session, w.RequestID, true
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
