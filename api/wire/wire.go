// Package wire holds the JSON shapes of lockd's HTTP API (docs/api.md):
// the request and response bodies, the encodings of their ids, durations
// and modes, and the error codes with the HTTP status of each
// (ErrorCodes). The server's handlers (package api) and the Go client
// (package api/client) both use them, so that the two ends cannot drift
// apart; nothing else lives here, and it imports nothing of lockd.
//
// Session ids travel as strings (a bare JSON number is accepted on input,
// for clients of sessions made before keys), durations as Go duration
// strings and modes as "read" or "write", so that JavaScript clients never
// round a 64-bit id and a human can read every field.
package wire

import (
	"encoding/json"
	"fmt"
	"strconv"
	"time"
)

// SessionID is a session's public id: an opaque string (the random key the
// leader drew; a session made before keys has its number in decimal). A
// bare JSON number is accepted on input too, for clients of old sessions.
type SessionID string

// UnmarshalJSON accepts a string, or a number for an old session.
func (id *SessionID) UnmarshalJSON(b []byte) error {
	if len(b) > 0 && b[0] == '"' {
		var s string
		if err := json.Unmarshal(b, &s); err != nil {
			return err
		}
		*id = SessionID(s)
		return nil
	}
	var n uint64
	if err := json.Unmarshal(b, &n); err != nil {
		return fmt.Errorf("session %s is not a string", b)
	}
	*id = SessionID(strconv.FormatUint(n, 10))
	return nil
}

// Duration is a time.Duration encoded as a Go duration string ("10s").
type Duration time.Duration

// MarshalJSON encodes the duration as a string such as "1m30s".
func (d Duration) MarshalJSON() ([]byte, error) {
	return strconv.AppendQuote(nil, time.Duration(d).String()), nil
}

// UnmarshalJSON accepts only a string that time.ParseDuration accepts: a
// bare number would be ambiguous (seconds? nanoseconds?).
func (d *Duration) UnmarshalJSON(b []byte) error {
	if len(b) == 0 || b[0] != '"' {
		return fmt.Errorf("duration %s is not a Go duration string such as \"10s\"", b)
	}
	var s string
	if err := json.Unmarshal(b, &s); err != nil {
		return err
	}
	v, err := time.ParseDuration(s)
	if err != nil {
		return fmt.Errorf("bad duration %q (want a Go duration such as \"10s\")", s)
	}
	*d = Duration(v)
	return nil
}

// Mode is a lock mode: "read" (shared) or "write" (exclusive); absent
// (empty) means write.
type Mode string

// Lock modes.
const (
	Write Mode = "write"
	Read  Mode = "read"
)

// UnmarshalJSON accepts "read", "write" or "" (write).
func (m *Mode) UnmarshalJSON(b []byte) error {
	var s string
	if err := json.Unmarshal(b, &s); err != nil {
		return fmt.Errorf("mode %s is not a string", b)
	}
	switch Mode(s) {
	case "", Read, Write:
		*m = Mode(s)
		return nil
	}
	return fmt.Errorf("unknown mode %q (want read or write)", s)
}

// ErrorBody is every error answer: {"error":{"code":"...","message":"..."}}.
type ErrorBody struct {
	Error ErrorDetail `json:"error"`
}

// ErrorDetail is the code and human-readable message of an error.
type ErrorDetail struct {
	Code    string `json:"code"`
	Message string `json:"message"`
	// NotApplied, on a 503, says the node did nothing with the request
	// (no leader took it: it found none, or is shutting down), so even a
	// release or surrender may be sent again. Absent: the outcome may be
	// unknown.
	NotApplied bool `json:"not_applied,omitempty"`
	// QuorumLost, on a 503 no_leader, says the node reaches fewer voters
	// than a majority (as its raft sees them, StatusResponse.Quorum; the
	// message's "1 of 3 voters reachable"): no leader can be elected on its side, so waiting on
	// this node helps only once enough nodes are back. Absent: a leader
	// may be found or elected soon.
	QuorumLost bool `json:"quorum_lost,omitempty"`
}

// CreateSessionRequest is the body of POST /v1/sessions.
type CreateSessionRequest struct {
	TTL        *Duration `json:"ttl,omitempty"` // absent: DefaultSessionTTL
	Name       string    `json:"name,omitempty"`
	OnDeadlock string    `json:"on_deadlock,omitempty"` // "abort" (default) or "surrender"
	Ordered    bool      `json:"ordered,omitempty"`
	LockDelay  Duration  `json:"lock_delay,omitempty"`
}

// Session describes a session (POST /v1/sessions, GET /v1/sessions[/{id}]).
type Session struct {
	ID         string     `json:"id"`
	Name       string     `json:"name"`
	TTL        Duration   `json:"ttl"`
	OnDeadlock string     `json:"on_deadlock"`
	Ordered    bool       `json:"ordered"`
	LockDelay  Duration   `json:"lock_delay"`
	Held       []HeldLock `json:"held"`
	Pending    []string   `json:"pending"`        // request ids in arrival order
	Since      time.Time  `json:"since,omitzero"` // when it was created (Since)
	// Revoked lists the latest holds an operator revoked (POST
	// /v1/revoke), oldest first: how a holder learns it lost a lock.
	Revoked []Revocation `json:"revoked"`
}

// Revocation is one hold revoked from a session.
type Revocation struct {
	Name  string `json:"name"`
	Token uint64 `json:"token"` // the fencing token that stopped being valid
	Index uint64 `json:"index"` // log index of the revoke
}

// HeldLock is one hold of a session.
type HeldLock struct {
	Name    string    `json:"name"`
	Mode    Mode      `json:"mode"`
	Weight  int       `json:"weight"`
	Count   int       `json:"count"`
	Token   uint64    `json:"token"`
	Expires time.Time `json:"expires,omitzero"` // hold_ttl end, on the leader's clock
	Since   time.Time `json:"since,omitzero"`   // when it was granted (see Holder)
	Value   string    `json:"value"`            // the hold's value ("" for none)
}

// KeepAliveResponse answers POST /v1/sessions/{id}/keepalive.
type KeepAliveResponse struct {
	ID      string       `json:"id"`
	TTL     Duration     `json:"ttl"`
	Revoked []Revocation `json:"revoked"` // as in Session
}

// KeepAlivesRequest is the body of POST /v1/sessions/keepalive: the
// sessions to keep alive (1–1000), by id.
type KeepAlivesRequest struct {
	Sessions []string `json:"sessions"`
}

// KeepAlivesResponse answers POST /v1/sessions/keepalive: one entry per
// session named, in the request's order.
type KeepAlivesResponse struct {
	Sessions []KeptSession `json:"sessions"`
}

// KeptSession is one session's part of a batched keepalive: its TTL and
// revocations as POST /v1/sessions/{id}/keepalive gives them, or, with
// Error set, the error and HTTP status that call would have answered for
// it alone (session_not_found, forbidden, invalid_request).
type KeptSession struct {
	ID      string       `json:"id"`
	TTL     Duration     `json:"ttl,omitempty"`
	Revoked []Revocation `json:"revoked,omitempty"`
	Error   *ErrorDetail `json:"error,omitempty"`
	Status  int          `json:"status,omitempty"`
}

// CloseSessionResponse answers DELETE /v1/sessions/{id}.
type CloseSessionResponse struct {
	ID        string         `json:"id"`
	Released  []ReleasedLock `json:"released"`
	Cancelled []string       `json:"cancelled"` // request ids
}

// LockSpec is one lock named in an acquire.
type LockSpec struct {
	Name   string `json:"name"`
	Mode   Mode   `json:"mode,omitempty"`
	Weight int    `json:"weight,omitempty"` // write permits on a semaphore; absent means 1
	Limit  int    `json:"limit,omitempty"`  // semaphore size; absent means "as it is" (1 for a new name)
	// Value is what the hold says about its holder, such as a leader's
	// address (UTF-8 text, at most 4 KiB: the server's rule). A new hold
	// takes it; a reentrant acquire or an upgrade keeps the hold's value
	// unless it gives one.
	Value string `json:"value,omitempty"`
}

// AcquireRequest is the body of POST /v1/acquire.
type AcquireRequest struct {
	Session   SessionID  `json:"session"`
	RequestID string     `json:"request_id,omitempty"`
	Locks     []LockSpec `json:"locks"`
	Require   string     `json:"require,omitempty"` // "all" (default), "any", "majority"
	Wait      Duration   `json:"wait,omitempty"`
	HoldTTL   Duration   `json:"hold_ttl,omitempty"`
}

// Grant is one lock a request was granted.
type Grant struct {
	Name   string `json:"name"`
	Mode   Mode   `json:"mode"`
	Weight int    `json:"weight"`
	Token  uint64 `json:"token"`
}

// AcquireResponse answers a granted acquire (200).
type AcquireResponse struct {
	Status    string  `json:"status"` // always "granted"
	RequestID string  `json:"request_id"`
	Session   string  `json:"session"`
	Token     uint64  `json:"token"` // the largest token among Granted
	Granted   []Grant `json:"granted"`
}

// Request is the state of an acquire request (GET/DELETE /v1/requests/{id}).
type Request struct {
	RequestID string     `json:"request_id"`
	Session   string     `json:"session"`
	Status    string     `json:"status"` // pending, granted, timeout, deadlock, cancelled
	Token     uint64     `json:"token,omitempty"`
	Granted   []Grant    `json:"granted"`
	Locks     []LockSpec `json:"locks"`
	Created   uint64     `json:"created"`         // log index of the acquire
	Ended     uint64     `json:"ended,omitempty"` // log index at which it stopped pending
	Deadline  time.Time  `json:"deadline,omitzero"`
}

// ReleaseRequest is the body of POST /v1/release: a name or a request id.
type ReleaseRequest struct {
	Session   SessionID `json:"session"`
	Name      string    `json:"name,omitempty"`
	RequestID string    `json:"request_id,omitempty"`
}

// ReleasedLock names a lock one hold of which was released.
type ReleasedLock struct {
	Name string `json:"name"`
}

// ReleaseResponse answers POST /v1/release and DELETE /v1/locks/{name}.
type ReleaseResponse struct {
	Released []ReleasedLock `json:"released"`
}

// SurrenderRequest is the body of POST /v1/surrender.
type SurrenderRequest struct {
	Session SessionID `json:"session"`
	Name    string    `json:"name"`
}

// SurrenderResponse answers POST /v1/surrender.
type SurrenderResponse struct {
	Status string `json:"status"` // "surrendered" or "kept" (nobody was waiting)
	Name   string `json:"name"`
}

// Lock is one name's queue (GET /v1/locks, GET /v1/locks/{name}).
type Lock struct {
	Name         string    `json:"name"`
	Version      uint64    `json:"version"`
	Limit        int       `json:"limit"`
	Holders      []Holder  `json:"holders"`
	Waiters      []Waiter  `json:"waiters"`
	DelayedUntil time.Time `json:"delayed_until,omitzero"` // lock-delay after an expired holder
}

// Holder is one hold on a lock.
type Holder struct {
	Session string    `json:"session"` // "": another token's session (ACLs)
	Mode    Mode      `json:"mode"`
	Weight  int       `json:"weight"`
	Count   int       `json:"count"`
	Token   uint64    `json:"token"`
	Expires time.Time `json:"expires,omitzero"`
	Since   time.Time `json:"since,omitzero"` // when it was granted (Since)
	// Value is the hold's value ("" for none), shown to every token that
	// may read the name, also where Session is not.
	Value string `json:"value"`
}

// ProclaimRequest is the body of POST /v1/proclaim: the session's hold on
// Name takes Value. With Token, only a hold with that fencing token does.
type ProclaimRequest struct {
	Session SessionID `json:"session"`
	Name    string    `json:"name"`
	Value   string    `json:"value"`
	Token   uint64    `json:"token,omitempty"`
}

// ProclaimResponse answers POST /v1/proclaim: the hold now (its token
// unchanged) and the name's version.
type ProclaimResponse struct {
	Name    string `json:"name"`
	Token   uint64 `json:"token"`
	Value   string `json:"value"`
	Version uint64 `json:"version"`
}

// Election is one name as an election (GET /v1/elections/{name}).
type Election struct {
	Name    string          `json:"name"`
	Version uint64          `json:"version"` // as the lock's; X-Lock-Index carries it too
	Leader  *ElectionLeader `json:"leader"`  // null: nobody holds the name
	// Candidates is how many requests queue on the name.
	Candidates int `json:"candidates"`
}

// ElectionLeader is a name's leader: of its holders, the one with the
// smallest fencing token (the only one of a lock held exclusively).
type ElectionLeader struct {
	Value string    `json:"value"`
	Token uint64    `json:"token"`
	Since time.Time `json:"since,omitzero"` // when its hold was granted (Since)
}

// Waiter is one queued request on a lock, in arrival order.
type Waiter struct {
	Session   string    `json:"session"` // "": another token's session (ACLs)
	RequestID string    `json:"request_id"`
	Mode      Mode      `json:"mode"`
	Weight    int       `json:"weight"`
	Since     time.Time `json:"since,omitzero"` // when it was queued (Since)
	// Value is what the request gives the hold once granted: in an
	// election, what this candidate will say about itself as leader.
	Value string `json:"value"`
}

// Since fields say when a hold was granted, a request queued or a session
// created: the table time the leader stamped on that log entry (its clock,
// standing still while the cluster is down); the answer's X-Table-Time
// header is the table time now. They are left out once the node's log no
// longer holds the entry (a snapshot compacted it).

// CheckResponse answers GET /v1/check.
type CheckResponse struct {
	Valid bool   `json:"valid"`
	Token uint64 `json:"token"` // the current token on the name (0: not held)
}

// StatusResponse answers GET /v1/status.
type StatusResponse struct {
	NodeID       string `json:"node_id"`
	State        string `json:"state"`
	Leader       Leader `json:"leader"`
	Term         uint64 `json:"term"`
	CommitIndex  uint64 `json:"commit_index"`
	AppliedIndex uint64 `json:"applied_index"`
	Digest       string `json:"digest"` // hex SHA-256 of the table at applied_index
	// LogStore is where this node keeps raft's log: "wal" (raft-wal, the
	// default for a new data dir) or "bolt" (raft-boltdb); a data dir
	// keeps the store it was made with.
	LogStore string   `json:"log_store"`
	Members  []Member `json:"members"`
	// DigestChecks counts this node's comparisons of its digest with the
	// leader's at the same applied index; a mismatch means its state
	// diverged (docs/operations.md).
	DigestChecks DigestChecks `json:"digest_checks"`
	// Diverged, once this node's state diverged from the leader's, says
	// what was compared: the node then answers 503 diverged to every
	// request but this one, /metrics and the dashboard.
	Diverged string `json:"diverged,omitempty"`
	// QuorumLost: this node reaches fewer voters than a majority and
	// follows no leader, so no leader can be elected on its side; writes
	// and linearizable reads on it answer 503 no_leader with quorum_lost.
	QuorumLost bool `json:"quorum_lost"`
	// Quorum counts the voters this node reaches.
	Quorum Quorum `json:"quorum"`
}

// Quorum is a node's count of the voters it reaches: those its raft had
// contact with lately (an answer to a heartbeat or a vote request, its
// leader's heartbeats), and those raft has not asked lately unless
// gossip saw them fail or leave. A voter that let a raft request go
// unanswered for about an election timeout (1 s at --raft-timing 1) is
// not reachable.
type Quorum struct {
	// Voters is the number of voters in the raft configuration.
	Voters int `json:"voters"`
	// Reachable are the voters this node reaches, itself included.
	Reachable []string `json:"reachable"`
	// Needed is the majority of voters a leader needs.
	Needed int `json:"needed"`
}

// DigestChecks is a follower's record of comparing its table with the
// leader's.
type DigestChecks struct {
	Compared          uint64 `json:"compared"`
	Mismatches        uint64 `json:"mismatches"`
	LastMismatchIndex uint64 `json:"last_mismatch_index,omitempty"`
}

// Leader names the leader as this node sees it; empty when there is none.
type Leader struct {
	ID       string `json:"id"`
	HTTPAddr string `json:"http_addr"`
}

// Member is one node of the cluster: gossip membership merged with the
// raft configuration.
type Member struct {
	ID         string `json:"id"`
	HTTPAddr   string `json:"http_addr"`
	RaftAddr   string `json:"raft_addr"`
	GossipAddr string `json:"gossip_addr,omitempty"`
	Voter      bool   `json:"voter"`
	Status     string `json:"status"` // gossip status ("alive", "suspect", "dead", "left"), "unknown" when gossip has not seen it
}

// RemoveMemberResponse answers DELETE /v1/members/{id}: the id removed
// and the members afterwards.
type RemoveMemberResponse struct {
	Removed string   `json:"removed"`
	Members []Member `json:"members"`
}

// LeaveResponse answers POST /v1/agent/leave: the node that is leaving.
type LeaveResponse struct {
	NodeID  string `json:"node_id"`
	Leaving bool   `json:"leaving"`
}

// Rule is one prefix rule of a token.
type Rule struct {
	Prefix string `json:"prefix"`
	Access string `json:"access"` // read, write or admin
}

// Token describes a token; Secret only in the answer that created it.
type Token struct {
	ID     string `json:"id"`
	Secret string `json:"secret,omitempty"`
	Name   string `json:"name"`
	Rules  []Rule `json:"rules"`
	// Limits are the token's own per-token limits, if it has any.
	Limits *TokenLimits `json:"limits,omitempty"`
}

// TokenLimits override the cluster's per-token limits
// (--max-sessions-per-token, --max-waiters-per-token) for one token: 0
// keeps the cluster's, -1 lifts it, a positive value replaces it.
type TokenLimits struct {
	Sessions int `json:"sessions,omitempty"` // live sessions it owns
	Waiters  int `json:"waiters,omitempty"`  // requests its sessions have queued
}

// CreateTokenRequest is the body of POST /v1/acl/tokens.
type CreateTokenRequest struct {
	Name   string       `json:"name"`
	Rules  []Rule       `json:"rules"`
	Limits *TokenLimits `json:"limits,omitempty"`
}

// DenyCertRequest is the body of POST /v1/certs/denied: a certificate
// serial in hex (colons between bytes, as openssl prints it, are
// allowed) and why it is denied.
type DenyCertRequest struct {
	Serial string `json:"serial"`
	Reason string `json:"reason,omitempty"`
}

// DenyCertResponse answers POST /v1/certs/denied: the serial as the deny
// list keeps it (lowercase hex without leading zeros).
type DenyCertResponse struct {
	Denied string `json:"denied"`
}

// DeniedCert is one serial of the deny list (GET /v1/certs/denied).
type DeniedCert struct {
	Serial string `json:"serial"`
	Reason string `json:"reason"`
	Index  uint64 `json:"index"` // the raft index of the denial
}

// RevokeRequest is the body of POST /v1/revoke.
type RevokeRequest struct {
	Name string `json:"name"`
}

// RevokedHold is one hold a revoke released.
type RevokedHold struct {
	Session string `json:"session"` // "": another token's session (ACLs)
	Name    string `json:"name"`
	Token   uint64 `json:"token"`
}

// RevokeResponse answers POST /v1/revoke.
type RevokeResponse struct {
	Revoked []RevokedHold `json:"revoked"`
}

// WaitEdge is one edge of the wait-for graph: session From waits for a
// lock that session To holds.
type WaitEdge struct {
	From string `json:"from"`
	To   string `json:"to"`
}
