package client

import (
	"sync"
	"time"

	"github.com/lockd/lockd/api/wire"
)

// Mode is a lock mode: shared (Read) or exclusive (Write); "" means
// Write.
type Mode = wire.Mode

// Lock modes.
const (
	Write = wire.Write
	Read  = wire.Read
)

// Require says how many of an Acquire's locks must be granted,
// atomically; each value is an AcquireOption.
type Require string

// Multi-lock requirements.
const (
	RequireAll      Require = "all"
	RequireAny      Require = "any"
	RequireMajority Require = "majority"
)

// The JSON shapes of the API, under the names this package has always
// given them; package wire defines them, for the server too.
type (
	// LockSpec is one lock named in an acquire.
	LockSpec = wire.LockSpec
	// GrantedLock is one lock of a Grant, with its fencing token.
	GrantedLock = wire.Grant
	// Status is one node's view of the cluster (GET /v1/status).
	Status = wire.StatusResponse
	// Leader names the leader as a node sees it; empty when there is none.
	Leader = wire.Leader
	// Member is one node of the cluster.
	Member = wire.Member
	// LockInfo is one name's queue (GET /v1/locks/{name}).
	LockInfo = wire.Lock
	// Holder is one hold on a lock.
	Holder = wire.Holder
	// Waiter is one queued request on a lock, in arrival order.
	Waiter = wire.Waiter
	// SessionInfo describes a session as the cluster sees it.
	SessionInfo = wire.Session
	// HeldLock is one hold of a session.
	HeldLock = wire.HeldLock
	// Duration is a time.Duration that travels as a Go duration string.
	Duration = wire.Duration
	// Revocation is one hold an operator revoked from a session (POST
	// /v1/revoke), as keepalive answers and GET /v1/sessions/{id} list
	// them.
	Revocation = wire.Revocation
	// RevokedHold is one hold a revoke released.
	RevokedHold = wire.RevokedHold
	// Rule gives Access ("read", "write" or "admin") to the names that
	// start with Prefix.
	Rule = wire.Rule
	// Token is an ACL token; Secret is set only in the answer that made it.
	Token = wire.Token
)

// Grant is a granted acquire: the locks this session now holds through it
// and their fencing tokens. Pass a token to the protected resource, which
// checks it with Client.Check (or compares it with the last one it saw)
// to refuse a holder whose lock has since passed to someone else.
type Grant struct {
	RequestID string        // idempotency key of the acquire
	Session   string        // session holding the locks
	Token     uint64        // the largest token among Locks
	Locks     []GrantedLock // what was granted (for "any"/"majority": the subset)

	deadline time.Time // HoldTTL: see Deadline
	lostOnce sync.Once
	lost     *lostState // see Lost
}

// Deadline returns, for a grant of an Acquire with HoldTTL, the instant
// by this process's clock until which its holds surely last: when the
// acquire was sent plus the hold TTL (the cluster measures the TTL from a
// later instant, with a clock that never runs ahead of real time). Work
// under the grant must end before it. ok is false for holds without a
// TTL.
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

// grantOf is the grant of a granted request.
func grantOf(r *wire.Request) *Grant {
	return &Grant{RequestID: r.RequestID, Session: r.Session, Token: r.Token, Locks: r.Granted}
}
