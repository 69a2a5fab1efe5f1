package workload

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"strings"
	"time"

	"github.com/lockd/lockd/api/client"
	"github.com/lockd/lockd/api/wire"
	"github.com/lockd/lockd/jepsen/history"
)

// election: leader election on one name (docs/api.md, "Leader
// election"). Workers 2, 5, 8, ... observe: each follows the name's
// leader with blocking election reads. The others are candidates: each
// campaigns (an acquire that gives its hold a value of its own), and
// while it leads writes to the fenced resource with its token, as a
// mutex holder does, and proclaims a new value after each write; one
// term in deposeEvery, with a hold TTL, it forgets its deadline and
// proclaims past it, as a deposed leader that does not know it. Values are unique
// in the run ("c<process>-<n>"), so a value tells who set it.
type election struct{}

const electionName = "jepsen/election"

func (election) Name() string { return "election" }
func (election) Limit() int   { return 0 }

// observes reports whether p's worker follows the leader rather than
// campaigning.
func observes(p *Proc) bool { return p.Worker()%3 == 2 }

func (e election) Cycle(ctx context.Context, p *Proc) {
	if observes(p) {
		p.Follow(ctx, electionName)
		return
	}
	p.maybeObserve(ctx, electionName)
	g := p.Campaign(ctx, electionName, p.env().Wait)
	if g == nil {
		return
	}
	for i := range 1 + p.rng.IntN(3) {
		if i > 0 {
			Sleep(ctx, jitter(p.rng, p.env().Hold))
		}
		if !e.serve(ctx, p, g.Token) {
			break
		}
	}
	if p.env().HoldTTL > 0 && p.rng.IntN(deposeEvery) == 0 {
		// Deposed by its hold TTL without knowing it, it proclaims once
		// the TTL has run out: refused, or before the table ended the
		// hold (a leader change stops table time) under its own token. A
		// lockd that lets it proclaim shows its value under the token of
		// the candidate that took over.
		Sleep(ctx, time.Until(p.granted.Add(p.env().HoldTTL+deposedLag)))
		p.Proclaim(ctx, electionName, g.Token, p.nextValue())
	}
	p.Release(ctx, g)
}

// deposeEvery: with a hold TTL, one term in deposeEvery ends with a
// proclaim deposedLag past the hold's TTL.
const (
	deposeEvery = 4
	deposedLag  = 100 * time.Millisecond
)

// serve is one round of a leader's work: a write to the resource with
// its token, then a new value. It reports whether the leader still
// leads as far as it knows.
func (election) serve(ctx context.Context, p *Proc, token uint64) bool {
	p.ResAdd(electionName, token)
	if _, ok := p.inTime(); !ok {
		return false
	}
	return p.Proclaim(ctx, electionName, token, p.nextValue())
}

func (e election) Final(ctx context.Context, p *Proc, wait time.Duration) {
	if g := p.Campaign(ctx, electionName, wait); g != nil {
		e.serve(ctx, p, g.Token)
		p.Release(ctx, g)
	}
}

// nextValue returns a value nobody else in the run gives: the process's
// id and a count.
func (p *Proc) nextValue() string {
	p.values++
	return fmt.Sprintf("c%d-%d", p.ID, p.values)
}

// Campaign records an acquire of name, exclusive, that gives the hold a
// new value of the process's, waiting at most wait on the server.
func (p *Proc) Campaign(ctx context.Context, name string, wait time.Duration) *client.Grant {
	return p.Acquire(ctx, []history.Lock{{Name: name, Mode: "write", Value: p.nextValue()}}, "", wait)
}

// Proclaim records a proclaim of value on the process's hold of name
// under token. An attempt of unknown outcome is sent again (with the
// token it can only reach the same hold, and the same value again
// changes nothing) until an answer or opTimeout; a refusal after an
// unknown attempt is unknown too. A proclaim is sent whether or not the
// client still knows its session alive: a deposed leader does not know.
// It reports whether it was acknowledged.
func (p *Proc) Proclaim(ctx context.Context, name string, token uint64, value string) bool {
	if p.retired {
		return false
	}
	names := []string{name}
	p.record(history.Event{Type: history.Invoke, F: history.Proclaim, Names: names, Token: token, Text: value})
	body, _ := json.Marshal(wire.ProclaimRequest{Session: wire.SessionID(p.s.ID()), Name: name, Value: value, Token: token}) // strings and a number
	pctx, cancel := context.WithTimeout(ctx, opTimeout)
	defer cancel()
	var unknown error // the last attempt of unknown outcome
	for try := 0; ; try++ {
		a := p.w.electionCall(pctx, http.MethodPost, "/v1/proclaim", body, try)
		switch {
		case a.status == http.StatusOK:
			var r wire.ProclaimResponse
			if err := json.Unmarshal(a.body, &r); err != nil {
				unknown = fmt.Errorf("proclaim answer: %w", err)
				break
			}
			p.record(history.Event{Type: history.OK, F: history.Proclaim, Names: names, Token: r.Token, Text: r.Value})
			return true
		case a.refused() && unknown != nil:
			p.record(history.Event{Type: history.Info, F: history.Proclaim, Names: names,
				Error: fmt.Sprintf("%s after an attempt of unknown outcome (%v)", a.code(), unknown)})
			p.retired = true
			return false
		case a.refused():
			p.record(history.Event{Type: history.Fail, F: history.Proclaim, Names: names, Error: a.code()})
			if a.code() == wire.CodeSessionNotFound {
				p.lost(errors.New("proclaim: " + a.code()))
			}
			return false
		case a.unknown():
			unknown = a.err()
		}
		if pctx.Err() != nil {
			if unknown == nil {
				unknown = a.err()
			}
			p.record(history.Event{Type: history.Info, F: history.Proclaim, Names: names, Error: unknown.Error()})
			p.retired = true
			return false
		}
		Sleep(pctx, electionRetry)
	}
}

// followWait is how long an election read blocks on the server.
const followWait = 2 * time.Second

// Follow records one linearizable election read of name, blocking until
// the name's version passes the last one the worker saw (or followWait).
func (p *Proc) Follow(ctx context.Context, name string) {
	if !p.alive() {
		return
	}
	names := []string{name}
	p.record(history.Event{Type: history.Invoke, F: history.Leader, Names: names})
	segs := strings.Split(name, "/")
	for i, s := range segs {
		segs[i] = url.PathEscape(s)
	}
	path := fmt.Sprintf("/v1/elections/%s?index=%d&wait=%s", strings.Join(segs, "/"), p.w.electionIndex, followWait)
	fctx, cancel := context.WithTimeout(ctx, followWait+opTimeout)
	defer cancel()
	for try := 0; ; try++ {
		a := p.w.electionCall(fctx, http.MethodGet, path, nil, try)
		var e wire.Election
		switch {
		case a.status == http.StatusOK && json.Unmarshal(a.body, &e) == nil:
			ev := history.Event{Type: history.OK, F: history.Leader, Names: names}
			if e.Leader != nil {
				ev.Token, ev.Text = e.Leader.Token, e.Leader.Value
			}
			p.record(ev)
			p.w.electionIndex = e.Version
			return
		case a.refused():
			p.record(history.Event{Type: history.Fail, F: history.Leader, Names: names, Error: a.code()})
			return
		case fctx.Err() != nil:
			p.record(history.Event{Type: history.Fail, F: history.Leader, Names: names, Error: a.err().Error()})
			return
		}
		Sleep(fctx, electionRetry)
	}
}

// electionRetry is the pause before an election call's next attempt.
const electionRetry = 100 * time.Millisecond

// electionAttempt bounds one attempt of an election call beyond the
// server-side wait of a read.
const electionAttempt = 5 * time.Second

// electionCall sends attempt try of an election call (POST /v1/proclaim,
// GET /v1/elections/...), which the Go client has no methods for yet:
// plain HTTP through the worker's transport (TLS, client pauses) with
// its token, to the node the client follows as leader on the first
// attempt and to each node it knows in turn after that. Any node
// forwards a proclaim to the leader and serves a linearizable read.
func (w *worker) electionCall(ctx context.Context, method, path string, body []byte, try int) attempt {
	bases := w.c.Endpoints()
	base := bases[try%len(bases)]
	if l := w.c.Leader(); try == 0 && l != "" {
		base = l
	}
	actx, cancel := context.WithTimeout(ctx, followWait+electionAttempt)
	defer cancel()
	req, err := http.NewRequestWithContext(actx, method, base+path, bytes.NewReader(body))
	if err != nil {
		return attempt{transport: err}
	}
	if body != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	if w.token != "" {
		req.Header.Set("Authorization", "Bearer "+w.token)
	}
	resp, err := w.hc.Do(req)
	if err != nil {
		return attempt{transport: err}
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		return attempt{transport: err}
	}
	return attempt{status: resp.StatusCode, body: b}
}

// attempt is what one attempt of an election call got: an answer
// (status and body) or a transport error.
type attempt struct {
	status    int
	body      []byte
	transport error
}

// errorBody is the API error of a non-2xx answer (zero if none).
func (a attempt) errorBody() wire.ErrorDetail {
	var eb wire.ErrorBody
	_ = json.Unmarshal(a.body, &eb)
	return eb.Error
}

// code is the API error code of the answer, or its status.
func (a attempt) code() string {
	if c := a.errorBody().Code; c != "" {
		return c
	}
	return fmt.Sprintf("HTTP %d", a.status)
}

// refused: the cluster's definite answer that it did nothing (a 4xx).
func (a attempt) refused() bool {
	return a.transport == nil && a.status >= 400 && a.status < 500
}

// unknown: the request may have been applied — an answer lost in
// transit, or a 5xx that does not say not_applied. A connection that was
// never made sent nothing.
func (a attempt) unknown() bool {
	var op *net.OpError
	switch {
	case a.transport != nil:
		return !(errors.As(a.transport, &op) && op.Op == "dial")
	case a.status >= 500:
		return !a.errorBody().NotApplied
	}
	return false
}

// err describes the attempt as an error.
func (a attempt) err() error {
	if a.transport != nil {
		return a.transport
	}
	return fmt.Errorf("HTTP %d %s", a.status, a.code())
}
