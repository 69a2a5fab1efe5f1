package lockservice

import (
	"context"
	"sync/atomic"
	"time"

	"github.com/lockd/lockd/lockstate"
	"github.com/lockd/lockd/raftnode"
)

// leaderWaiter is the optional side of Node that waits on the leader for
// a follower (*raftnode.Node has it): a follower learns of a commit only
// with the next AppendEntries, the leader as soon as it applies it, so a
// waiter on a follower hears of its grant sooner from the leader.
type leaderWaiter interface {
	SetAwaiter(raftnode.Awaiter)
	AwaitOnLeader(ctx context.Context, req *lockstate.RequestInfo, wait time.Duration) (lockstate.RequestInfo, bool, error)
}

// answerAwait waits on this node's table for another node's waiter (a
// raftnode.Awaiter). It answers only for session's request id created at
// index created, once it has applied that entry, and not at all while
// the service closes: a pending answer then would only be asked again.
func (s *Service) answerAwait(ctx context.Context, id string, session lockstate.SessionID, created uint64, wait time.Duration) (lockstate.RequestInfo, bool) {
	ctx, cancel := s.waitContext(ctx)
	defer cancel()
	until := time.Now().Add(wait)
	applied, stop := context.WithDeadline(ctx, until)
	err := s.fsm.WaitApplied(applied, created)
	stop()
	if err != nil {
		return lockstate.RequestInfo{}, false
	}
	st, end := s.awaitRequest(ctx, id, session, until)
	same := st.found && st.info.Created == created // the session's id may be reused once the first is forgotten
	return st.info, same && end != waitAborted
}

// askLeader waits on the leader for a pending request beside the local
// wait. It returns the context for the local wait, which ends as soon as
// the leader gave a final answer, and a function that stops asking and
// returns that answer (nil when there was none). Any failure on the way
// to the leader leaves the local wait to decide.
func (s *Service) askLeader(ctx context.Context, info *lockstate.RequestInfo, wait time.Duration) (context.Context, func() *lockstate.RequestInfo) {
	lw, ok := s.node.(leaderWaiter)
	if !ok {
		return ctx, func() *lockstate.RequestInfo { return nil }
	}
	local, stop := context.WithCancel(ctx)
	var answer atomic.Pointer[lockstate.RequestInfo]
	done := make(chan struct{})
	go func() {
		defer close(done)
		got, final, err := lw.AwaitOnLeader(local, info, wait)
		if err == nil && final {
			answer.Store(&got)
			stop()
		}
	}()
	return local, func() *lockstate.RequestInfo {
		stop()
		<-done
		return answer.Load()
	}
}
