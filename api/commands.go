package api

import (
	"time"

	"github.com/lockd/lockd/api/wire"
	"github.com/lockd/lockd/lockstate"
	"github.com/lockd/lockd/quorum"
)

// JSON requests become table commands here, as they are: whether their
// content is acceptable is decided by the command's own Validate, which
// lockservice runs before proposing and the table runs again on apply.

// createSessionCmd is a session request with the API's default TTL.
func createSessionCmd(req wire.CreateSessionRequest) *lockstate.CreateSession {
	ttl := DefaultSessionTTL
	if req.TTL != nil {
		ttl = time.Duration(*req.TTL)
	}
	return &lockstate.CreateSession{Name: req.Name, TTL: ttl, OnDeadlock: lockstate.OnDeadlock(req.OnDeadlock),
		Ordered: req.Ordered, LockDelay: time.Duration(req.LockDelay)}
}

// acquireCmd is an acquire request with the client's wait, uncapped
// (lockservice.Acquire sets its session from the request's key).
func acquireCmd(req wire.AcquireRequest) *lockstate.Acquire {
	specs := make([]lockstate.LockSpec, len(req.Locks))
	for i, l := range req.Locks {
		specs[i] = lockstate.LockSpec{Name: l.Name, Mode: modeOf(l.Mode), Weight: l.Weight, Limit: l.Limit, Value: l.Value}
	}
	return &lockstate.Acquire{RequestID: req.RequestID, Locks: specs,
		Require: quorum.Requirement(req.Require), Wait: time.Duration(req.Wait), HoldTTL: time.Duration(req.HoldTTL)}
}
