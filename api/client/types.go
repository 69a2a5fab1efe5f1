package client

import (
	"encoding/json"
	"fmt"
	"sync"
	"time"
)

// Mode is a lock mode: shared (Read) or exclusive (Write).
type Mode string

// Lock modes.
const (
	Write Mode = "write"
	Read  Mode = "read"
)

// Require says how many of a multi-lock request's locks must be granted,
// atomically.
type Require string

// Multi-lock requirements.
const (
	RequireAll      Require = "all"
	RequireAny      Require = "any"
	RequireMajority Require = "majority"
)

// LockSpec is one lock named in an acquire.
type LockSpec struct {
	Name   string `json:"name"`
	Mode   Mode   `json:"mode,omitempty"`   // "" means Write
	Weight int    `json:"weight,omitempty"` // permits of a semaphore (write only); 0 means 1
	Limit  int    `json:"limit,omitempty"`  // semaphore size; 0 means "as it is" (1 for a new name)
}

// GrantedLock is one lock of a Grant.
type GrantedLock struct {
	Name   string `json:"name"`
	Mode   Mode   `json:"mode"`
	Weight int    `json:"weight"`
	Token  uint64 `json:"token"` // fencing token of this lock's grant
}

// Grant is a granted acquire: the locks this session now holds through it
// and their fencing tokens. Pass a token to the protected resource, which
// checks it with Client.Check (or compares it with the last one it saw)
// to refuse a holder whose lock has since passed to someone else.
type Grant struct {
	RequestID string        // idempotency key of the acquire
	Session   string        // session holding the locks
	Token     uint64        // the largest token among Locks
	Locks     []GrantedLock // what was granted (for "any"/"majority": the subset)

	deadline time.Time // AcquireWithTTL: see Deadline
	lostOnce sync.Once
	lost     *lostState // see Lost
}

// Deadline returns, for a grant of AcquireWithTTL, the instant by this
// process's clock until which its holds surely last: when the acquire
// was sent plus the hold TTL (the cluster measures the TTL from a later
// instant, with a clock that never runs ahead of real time). Work under
// the grant must end before it. ok is false for holds without a TTL.
func (g *Grant) Deadline() (deadline time.Time, ok bool) { return g.deadline, !g.deadline.IsZero() }

// Names returns the names of the granted locks.
func (g *Grant) Names() []string {
	out := make([]string, len(g.Locks))
	for i, l := range g.Locks {
		out[i] = l.Name
	}
	return out
}

// TokenFor returns the fencing token of the named lock, or 0 when the
// grant does not include it.
func (g *Grant) TokenFor(name string) uint64 {
	for _, l := range g.Locks {
		if l.Name == name {
			return l.Token
		}
	}
	return 0
}

// Status is one node's view of the cluster (GET /v1/status).
type Status struct {
	NodeID       string   `json:"node_id"`
	State        string   `json:"state"` // "leader", "follower" or "candidate"
	Leader       Leader   `json:"leader"`
	Term         uint64   `json:"term"`
	CommitIndex  uint64   `json:"commit_index"`
	AppliedIndex uint64   `json:"applied_index"`
	Digest       string   `json:"digest"`
	Members      []Member `json:"members"`
}

// Leader names the leader as a node sees it; empty when there is none.
type Leader struct {
	ID       string `json:"id"`
	HTTPAddr string `json:"http_addr"`
}

// Member is one node of the cluster.
type Member struct {
	ID       string `json:"id"`
	HTTPAddr string `json:"http_addr"`
	RaftAddr string `json:"raft_addr"`
	Voter    bool   `json:"voter"`
	Status   string `json:"status"`
}

// LockInfo is one name's queue (GET /v1/locks/{name}).
type LockInfo struct {
	Name    string   `json:"name"`
	Version uint64   `json:"version"`
	Limit   int      `json:"limit"`
	Holders []Holder `json:"holders"`
	Waiters []Waiter `json:"waiters"`
}

// Holder is one hold on a lock.
type Holder struct {
	Session string `json:"session"`
	Mode    Mode   `json:"mode"`
	Weight  int    `json:"weight"`
	Count   int    `json:"count"`
	Token   uint64 `json:"token"`
}

// Waiter is one queued request on a lock, in arrival order.
type Waiter struct {
	Session   string `json:"session"`
	RequestID string `json:"request_id"`
	Mode      Mode   `json:"mode"`
	Weight    int    `json:"weight"`
}

// SessionInfo describes a session as the cluster sees it.
type SessionInfo struct {
	ID         string     `json:"id"`
	Name       string     `json:"name"`
	TTL        Duration   `json:"ttl"`
	OnDeadlock string     `json:"on_deadlock"`
	Ordered    bool       `json:"ordered"`
	LockDelay  Duration   `json:"lock_delay"`
	Held       []HeldLock `json:"held"`
	Pending    []string   `json:"pending"`
	// Revoked lists the latest holds an operator revoked from the
	// session, oldest first (at most 16).
	Revoked []Revocation `json:"revoked"`
}

// HeldLock is one hold of a session.
type HeldLock struct {
	Name   string `json:"name"`
	Mode   Mode   `json:"mode"`
	Weight int    `json:"weight"`
	Count  int    `json:"count"`
	Token  uint64 `json:"token"`
}

// Duration is a time.Duration that travels as a Go duration string.
type Duration time.Duration

// MarshalJSON encodes d as "10s".
func (d Duration) MarshalJSON() ([]byte, error) { return json.Marshal(time.Duration(d).String()) }

// UnmarshalJSON decodes a Go duration string.
func (d *Duration) UnmarshalJSON(b []byte) error {
	var s string
	if err := json.Unmarshal(b, &s); err != nil {
		return fmt.Errorf("duration %s: %w", b, err)
	}
	v, err := time.ParseDuration(s)
	if err != nil {
		return err
	}
	*d = Duration(v)
	return nil
}

// Wire shapes that are not part of the public API.

type acquireBody struct {
	Session   string     `json:"session"`
	RequestID string     `json:"request_id"`
	Locks     []LockSpec `json:"locks"`
	Require   Require    `json:"require,omitempty"`
	Wait      Duration   `json:"wait"`
	HoldTTL   Duration   `json:"hold_ttl,omitempty"`
}

// requestState answers POST /v1/acquire (granted) and GET/DELETE
// /v1/requests/{id} (any status).
type requestState struct {
	Status    string        `json:"status"`
	RequestID string        `json:"request_id"`
	Session   string        `json:"session"`
	Token     uint64        `json:"token"`
	Granted   []GrantedLock `json:"granted"`
}

func (r *requestState) grant() *Grant {
	return &Grant{RequestID: r.RequestID, Session: r.Session, Token: r.Token, Locks: r.Granted}
}

type releaseBody struct {
	Session   string `json:"session"`
	Name      string `json:"name,omitempty"`
	RequestID string `json:"request_id,omitempty"`
}

type releaseAnswer struct {
	Released []struct {
		Name string `json:"name"`
	} `json:"released"`
}

type createSessionBody struct {
	TTL        Duration `json:"ttl"`
	Name       string   `json:"name,omitempty"`
	OnDeadlock string   `json:"on_deadlock,omitempty"`
	Ordered    bool     `json:"ordered,omitempty"`
	LockDelay  Duration `json:"lock_delay,omitempty"`
}
