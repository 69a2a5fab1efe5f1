package client

import (
	"context"
	"errors"
	"fmt"
	"net/url"
	"strconv"
	"sync"
	"time"

	"github.com/lockd/lockd/api/wire"
)

// Leader election (docs/api.md, "Leader election"): a name's holder is its
// leader and says where to reach it in its hold's value; the sessions
// queued for the name are its candidates. An Election is the shape
// etcd's concurrency.Election has, over the lock machinery of this
// package: Campaign is an acquire with a value, a Leadership is its Grant,
// Proclaim is POST /v1/proclaim and Leader and Observe read GET
// /v1/elections/{name}.

// ErrElectionNoLeader is Election.Leader's error when nobody leads the
// name (etcd's concurrency.ErrElectionNoLeader).
var ErrElectionNoLeader = errors.New("lockd: election has no leader")

// ErrObserver is Campaign's error on an Election made by Client.Election:
// campaigning needs a session (Session.Election).
var ErrObserver = errors.New("lockd: an observer's election cannot campaign: use Session.Election")

// ElectionLeader is a name's leader: the value its hold carries, its
// fencing token, which is the term of its leadership (a later leader's is
// larger), and since when it leads (zero once the cluster no longer
// knows).
type ElectionLeader = wire.ElectionLeader

// Election is one name used to elect a leader. Made by Session.Election
// it campaigns; made by Client.Election it only observes. It is safe for
// concurrent use.
type Election struct {
	c    *Client
	s    *Session // nil: an observer
	name string
}

// Election returns the election on name in which this session campaigns.
func (s *Session) Election(name string) *Election { return &Election{c: s.c, s: s, name: name} }

// Election returns an observer of the election on name: Leader and
// Observe, without a session (Campaign returns ErrObserver).
func (c *Client) Election(name string) *Election { return &Election{c: c, name: name} }

// Name returns the election's name.
func (e *Election) Name() string { return e.name }

// Campaign queues the session as a candidate for name with value (what the
// leader says about itself, typically where to reach it: UTF-8 text of at
// most 4096 bytes) and blocks until it is elected or ctx ends; an ended
// ctx withdraws the candidacy. It is an exclusive Acquire of name with a
// value, and takes Acquire's options: Wait(d) lets the server end the wait
// after d with ErrTimeout (Wait(0): lead only if nobody does), HoldTTL(d)
// bounds the term. Campaigning again while leading is reentrant, as Lock
// is: the token stays, the value is replaced, and each Leadership is
// resigned on its own.
func (e *Election) Campaign(ctx context.Context, value string, opts ...AcquireOption) (*Leadership, error) {
	if e.s == nil {
		return nil, fmt.Errorf("lockd campaign %s: %w", e.name, ErrObserver)
	}
	g, err := e.s.Acquire(ctx, []LockSpec{{Name: e.name, Mode: Write, Value: value}}, opts...)
	if err != nil {
		return nil, fmt.Errorf("lockd campaign: %w", err)
	}
	return &Leadership{Name: e.name, Token: g.TokenFor(e.name), s: e.s, g: g, value: value}, nil
}

// Leader returns the name's current leader, or ErrElectionNoLeader when
// nobody holds it. The read is linearizable unless Stale() is given.
func (e *Election) Leader(ctx context.Context, opts ...ReadOption) (*ElectionLeader, error) {
	el, err := e.read(ctx, readQuery(opts), false, 0)
	if err != nil {
		return nil, fmt.Errorf("lockd election %s: %w", e.name, err)
	}
	if el.Leader == nil {
		return nil, fmt.Errorf("%w: %s", ErrElectionNoLeader, e.name)
	}
	return el.Leader, nil
}

// observePoll is the server-side wait of one of Observe's blocking reads
// (the server caps it at its own maximum).
const observePoll = 30 * time.Second

// Observe returns a channel of the name's leaders, as etcd's Observe
// does: the current one first (once the name has one), then each change,
// a new leader (a larger token) or a new value proclaimed under the same
// token. Each is delivered once, in token order: never a smaller token
// than one delivered, nor an older value of the same token. "No leader"
// is not delivered: between two leaders the channel is quiet. Changes
// that happen while the receiver is busy are not queued: it gets the
// latest leader next, not every one in between.
//
// Observe follows the name with linearizable blocking reads (GET
// /v1/elections/{name}?index=&wait=) and survives leader elections of the
// cluster and outages: a failed read is retried on the other nodes with
// the client's RetryPolicy and backoff until ctx ends. The channel is
// closed when ctx ends, or when the cluster refuses the read for good
// (unauthorized, forbidden, an invalid name): Leader then returns the
// reason.
func (e *Election) Observe(ctx context.Context) <-chan ElectionLeader {
	ch := make(chan ElectionLeader)
	go e.observe(ctx, ch)
	return ch
}

// observe runs Observe's reads until ctx ends or a read is refused.
func (e *Election) observe(ctx context.Context, ch chan<- ElectionLeader) {
	defer close(ch)
	var (
		index    uint64          // the name's version last read
		last     *ElectionLeader // the leader delivered last
		failures int
	)
	for {
		el, err := e.read(ctx, url.Values{}, true, index)
		switch {
		case ctx.Err() != nil:
			return
		case err != nil && definite(err):
			e.c.log.Warn("lockd client: observe refused", "election", e.name, "err", err)
			return
		case err != nil:
			e.c.log.Info("lockd client: observe failed; retrying", "election", e.name, "err", err)
			if sleep(ctx, e.c.backoff(failures)) != nil {
				return
			}
			failures++
			continue
		}
		failures = 0
		if el.Version < index {
			continue // a node behind what was read (only a stale read could be)
		}
		index = el.Version
		if l := el.Leader; l != nil && supersedes(l, last) {
			select {
			case ch <- *l:
				last = l
			case <-ctx.Done():
				return
			}
		}
	}
}

// supersedes reports whether leader l is news after last: a later term,
// or a new value in the same one.
func supersedes(l, last *ElectionLeader) bool {
	return last == nil || l.Token > last.Token || (l.Token == last.Token && l.Value != last.Value)
}

// definite reports whether err is an answer that asking again does not
// change: a refusal of the cluster, or of a TLS handshake.
func definite(err error) bool {
	code := codeOf(err)
	return (code != "" && !retryable(code)) || isTLSRefusal(err) || errors.Is(err, ErrHTTPSRequired)
}

// read is one GET /v1/elections/{name}; with block, a blocking query
// that answers once the name's version is above index (or observePoll
// has passed).
func (e *Election) read(ctx context.Context, q url.Values, block bool, index uint64) (*wire.Election, error) {
	var wait time.Duration
	if block {
		wait = observePoll
		q.Set("index", strconv.FormatUint(index, 10))
		q.Set("wait", wait.String())
	}
	var el wire.Election
	err := e.c.do(ctx, call{method: "GET", path: "/v1/elections/" + escapeName(e.name), query: q, out: &el, wait: wait})
	if err != nil {
		return nil, err
	}
	return &el, nil
}

// Leadership is a won Campaign: the session holds the name, and its
// fencing token is the term of this leadership. Pass Token to what the
// leader writes, which refuses an older term (Client.Check). Lost is
// closed when the leadership ends without Resign: revoked by an operator,
// the session lost, or the cluster answered a Proclaim that the session no
// longer holds the name with this token.
type Leadership struct {
	Name  string // the election's name
	Token uint64 // the fencing token of the hold: the term

	s *Session
	g *Grant

	mu       sync.Mutex
	value    string
	resigned bool
}

// Value returns the leadership's value: the campaign's, or the last one
// proclaimed.
func (l *Leadership) Value() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.value
}

// Lost returns a channel closed when the leadership is lost without
// Resign (Grant.Lost of its grant); LostErr then says why.
func (l *Leadership) Lost() <-chan struct{} { return l.g.Lost() }

// LostErr is nil until Lost is closed; then why the leadership was lost:
// an error matching ErrRevoked, ErrNotHeld, or the session's error.
func (l *Leadership) LostErr() error { return l.g.LostErr() }

// Grant returns the grant of the campaign (its request id, Deadline with
// HoldTTL).
func (l *Leadership) Grant() *Grant { return l.g }

// Proclaim replaces the leadership's value, keeping the hold and its
// token; observers see the new value under the same token. It names the
// token, so a leadership that ended cannot proclaim, even when the session
// has won the name again since (a new term): that is ErrNotHeld, and Lost
// is closed. A proclaim whose answer is lost is sent again (setting the
// same value twice changes nothing); an error other than ErrNotHeld leaves
// it unknown which value the hold has, and a Proclaim again settles it.
func (l *Leadership) Proclaim(ctx context.Context, value string) error {
	if err := l.ended(); err != nil {
		return fmt.Errorf("lockd proclaim %s: %w", l.Name, err)
	}
	body := wire.ProclaimRequest{Session: wire.SessionID(l.s.id), Name: l.Name, Value: value, Token: l.Token}
	var ans wire.ProclaimResponse
	err := l.s.c.do(ctx, call{method: "POST", path: "/v1/proclaim", body: body, out: &ans})
	if err != nil {
		l.s.noteLost(err)
		if errors.Is(err, ErrNotHeld) {
			l.s.lostHold(l.Name, l.Token, fmt.Errorf("lockd session %s no longer leads %s with token %d: %w",
				l.s.id, l.Name, l.Token, err))
		}
		return fmt.Errorf("lockd proclaim %s: %w", l.Name, err)
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	l.value = ans.Value
	return nil
}

// ended is why the leadership cannot proclaim: resigned (ErrNotHeld) or
// lost; nil while it leads as far as this client knows.
func (l *Leadership) ended() error {
	l.mu.Lock()
	resigned := l.resigned
	l.mu.Unlock()
	if resigned {
		return fmt.Errorf("%w: resigned", ErrNotHeld)
	}
	if err := l.LostErr(); err != nil {
		return fmt.Errorf("leadership lost: %w", err)
	}
	return nil
}

// Resign gives up the leadership (releases the campaign's hold): the next
// candidate is elected. A nil error means this session no longer leads
// under this token: resigned now, or already lost (Lost says so), or
// resigned before. An error means it may still lead (the cluster could
// not be reached); Resign may be called again, or the session closed.
func (l *Leadership) Resign(ctx context.Context) error {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.resigned || l.LostErr() != nil {
		return nil
	}
	err := l.s.Release(ctx, l.g)
	if err != nil && !errors.Is(err, ErrNotHeld) && !errors.Is(err, ErrSessionNotFound) {
		return fmt.Errorf("lockd resign %s: %w", l.Name, err)
	}
	l.resigned = true
	return nil
}
