package lockservice_test

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/lockd/lockd/lockstate"
	"github.com/lockd/lockd/raftnode"
	"github.com/lockd/lockd/raftnode/lockservice"
)

func TestAcquireWaitsForTheGrantAndTimesOutNamingTheHolder(t *testing.T) {
	svc, _ := startService(t, raftnode.Config{}, nil)
	a, b := session(t, svc), session(t, svc)
	first := mustAcquire(t, svc, a, "jobs/x", "a-1")

	_, err := acquire(svc, b, "jobs/x", 0, "b-try")
	if code(err) != lockstate.CodeTimeout || !strings.Contains(err.Error(), "jobs/x is held by session") {
		t.Fatalf("try of a held name: %v, want timeout naming the holder", err)
	}

	type answer struct {
		info *lockstate.RequestInfo
		err  error
	}
	waited := make(chan answer, 1)
	go func() {
		info, err := acquire(svc, b, "jobs/x", 10*time.Second, "b-wait")
		waited <- answer{info, err}
	}()
	waitPending(t, svc, "b-wait")
	if _, err := svc.Release(context.Background(), a, &lockstate.Release{Name: "jobs/x"}); err != nil {
		t.Fatal(err)
	}
	got := <-waited
	if second := mustGrant(t, got.info, got.err); second.Token <= first.Token {
		t.Fatalf("token %d after release is not above %d", second.Token, first.Token)
	}
}

// waitPending waits until request id is pending in the table.
func waitPending(t *testing.T, svc *lockservice.Service, id string) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for {
		info, err := svc.Request(context.Background(), lockservice.Stale, "", id, 0)
		if err == nil && info.Status == lockstate.Pending {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("request %s never pending: %+v, %v", id, info, err)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

func TestInvalidCommandIsRefusedBeforeProposing(t *testing.T) {
	svc, _ := startService(t, raftnode.Config{}, nil)
	s := session(t, svc)
	before := svc.Applied()
	ctx := context.Background()
	locks := func(spec lockstate.LockSpec) *lockstate.Acquire {
		return &lockstate.Acquire{Locks: []lockstate.LockSpec{spec}}
	}
	bad := []struct {
		name string
		call func() error
	}{
		{"acquire a//b", func() error {
			_, err := svc.Acquire(ctx, s, locks(lockstate.LockSpec{Name: "a//b", Mode: lockstate.Write}))
			return err
		}},
		{"acquire read weight 2", func() error {
			_, err := svc.Acquire(ctx, s, locks(lockstate.LockSpec{Name: "a", Mode: lockstate.Read, Weight: 2}))
			return err
		}},
		{"session ttl 1ms", func() error {
			_, _, err := svc.CreateSession(ctx, &lockstate.CreateSession{TTL: time.Millisecond})
			return err
		}},
		{"release nothing", func() error { _, err := svc.Release(ctx, s, &lockstate.Release{}); return err }},
		{"surrender no name", func() error { _, err := svc.Surrender(ctx, s, &lockstate.Surrender{Name: ""}); return err }},
	}
	for _, b := range bad {
		if err := b.call(); code(err) != lockstate.CodeInvalid {
			t.Errorf("%s: %v, want invalid_request", b.name, err)
		}
	}
	if after := svc.Applied(); after != before {
		t.Fatalf("refused commands moved the table: %+v -> %+v", before, after)
	}
}

// When no leader tick ends a wait (the leader's clock stands still), the
// node cancels the request after wait+grace and the committed cancel
// decides. When that cancel's answer is lost and the retry finds the
// request already cancelled, the answer is still "not granted in time",
// not "cancelled by someone".
func TestCommittedCancelDecidesWhenItsAnswerWasLost(t *testing.T) {
	frozen := time.Now()
	svc, _ := startService(t, raftnode.Config{Now: func() time.Time { return frozen }},
		func(n *raftnode.Node) lockservice.Node { return &losesFirstAnswer[*lockstate.Cancel]{Node: n} })
	a, b := session(t, svc), session(t, svc)
	mustAcquire(t, svc, a, "c/x", "")
	_, err := acquire(svc, b, "c/x", 200*time.Millisecond, "b-wait")
	if code(err) != lockstate.CodeTimeout {
		t.Fatalf("acquire ended by this node's cancel: %v, want timeout", err)
	}
}

// A release whose outcome is unknown is not repeated: a second one would
// drop a reentrant hold once too often.
func TestReleaseIsNotRepeatedAfterAnUnknownOutcome(t *testing.T) {
	svc, _ := startService(t, raftnode.Config{},
		func(n *raftnode.Node) lockservice.Node { return &losesFirstAnswer[*lockstate.Release]{Node: n} })
	a := session(t, svc)
	mustAcquire(t, svc, a, "re/x", "") // outer
	mustAcquire(t, svc, a, "re/x", "") // nested: count 2
	_, err := svc.Release(context.Background(), a, &lockstate.Release{Name: "re/x"})
	if !errors.Is(err, raftnode.ErrUnknownOutcome) {
		t.Fatalf("release with a lost answer: %v, want an unknown outcome", err)
	}
	info, err := svc.Session(context.Background(), lockservice.Linearizable, a)
	if err != nil {
		t.Fatal(err)
	}
	if len(info.Held) != 1 || info.Held[0].Count != 1 {
		t.Fatalf("after one release of two holds, session holds %+v, want re/x once", info.Held)
	}
}

// A close whose answer was lost is repeated; the repeat that finds no
// session means the first one closed it.
func TestCloseSessionIsRepeatedAfterAnUnknownOutcome(t *testing.T) {
	svc, _ := startService(t, raftnode.Config{},
		func(n *raftnode.Node) lockservice.Node { return &losesFirstAnswer[*lockstate.CloseSession]{Node: n} })
	a := session(t, svc)
	if _, err := svc.CloseSession(context.Background(), a); err != nil {
		t.Fatalf("close with a lost answer: %v", err)
	}
	if _, err := svc.Session(context.Background(), lockservice.Linearizable, a); code(err) != lockstate.CodeNoSession {
		t.Fatalf("session after close: %v, want session_not_found", err)
	}
}

func TestCloseEndsWaitsWithARetryError(t *testing.T) {
	svc, _ := startService(t, raftnode.Config{}, nil)
	a, b := session(t, svc), session(t, svc)
	mustAcquire(t, svc, a, "x", "")
	done := make(chan error, 1)
	go func() {
		_, err := acquire(svc, b, "x", 30*time.Second, "b-closing")
		done <- err
	}()
	waitPending(t, svc, "b-closing")
	svc.Close()
	select {
	case err := <-done:
		var retry *lockservice.RetryError
		if !errors.As(err, &retry) || !retry.Pending || retry.RequestID != "b-closing" {
			t.Fatalf("wait ended by Close: %v, want a pending RetryError for b-closing", err)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("Close did not end the wait")
	}
}

func TestRequestLongPollAnswersOnGrant(t *testing.T) {
	svc, _ := startService(t, raftnode.Config{}, nil)
	a, b := session(t, svc), session(t, svc)
	mustAcquire(t, svc, a, "lp", "")
	go func() { _, _ = acquire(svc, b, "lp", 10*time.Second, "b-lp") }()
	waitPending(t, svc, "b-lp")

	info, err := svc.Request(context.Background(), lockservice.Linearizable, "", "b-lp", 100*time.Millisecond)
	if err != nil || info.Status != lockstate.Pending {
		t.Fatalf("long-poll that ran out: %+v, %v, want pending", info, err)
	}
	polled := make(chan *lockstate.RequestInfo, 1)
	go func() {
		info, _ := svc.Request(context.Background(), lockservice.Linearizable, "", "b-lp", 10*time.Second)
		polled <- info
	}()
	if _, err := svc.Release(context.Background(), a, &lockstate.Release{Name: "lp"}); err != nil {
		t.Fatal(err)
	}
	if info := <-polled; info == nil || info.Status != lockstate.Granted {
		t.Fatalf("long-poll after release: %+v, want granted", info)
	}
	if _, err := svc.Request(context.Background(), lockservice.Stale, "", "nobody", 0); code(err) != lockstate.CodeNoRequest {
		t.Fatalf("unknown request: %v, want request_not_found", err)
	}
}

func TestBlockingLockQueryAnswersOnChange(t *testing.T) {
	svc, _ := startService(t, raftnode.Config{}, nil)
	a := session(t, svc)
	view, err := svc.Lock(context.Background(), lockservice.Linearizable, lockservice.LockQuery{Name: "bq"})
	if err != nil || view.Found {
		t.Fatalf("free name: %+v, %v", view, err)
	}
	changed := make(chan lockservice.LockView, 1)
	go func() {
		v, _ := svc.Lock(context.Background(), lockservice.Linearizable,
			lockservice.LockQuery{Name: "bq", Block: true, Index: view.Version, Wait: 10 * time.Second})
		changed <- v
	}()
	granted := mustAcquire(t, svc, a, "bq", "")
	select {
	case v := <-changed:
		if !v.Found || v.Version <= view.Version || v.Lock.Holders[0].Token != granted.Token {
			t.Fatalf("blocking query after a grant: %+v", v)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("blocking query did not answer the change")
	}
}

// unknownThenNoLeader applies the first command of type T and loses its
// answer; later ones of type T find no leader and do nothing.
type unknownThenNoLeader[T lockstate.Command] struct {
	losesFirstAnswer[T]
	calls atomic.Int32
}

func (u *unknownThenNoLeader[T]) Propose(ctx context.Context, cmd lockstate.Command) (*lockstate.Result, uint64, error) {
	if _, ok := cmd.(T); ok && u.calls.Add(1) > 1 {
		return nil, 0, fmt.Errorf("test: %w", raftnode.ErrNoLeader)
	}
	return u.losesFirstAnswer.Propose(ctx, cmd)
}

// The table answers "no session" to a close of another token's session,
// as to one of a session that is gone. When a close's answer was lost,
// that answer to the repeat means an earlier attempt closed it only if
// the session is gone: another token's close is refused, and the session
// lives on (found by api TestACLAcceptance under elections: another
// token was answered 200, nothing released, for a session it may not
// close).
func TestAnotherTokensCloseIsRefusedAfterAnUnknownOutcome(t *testing.T) {
	svc, _ := startService(t, raftnode.Config{},
		func(n *raftnode.Node) lockservice.Node { return &losesFirstAnswer[*lockstate.CloseSession]{Node: n} })
	ctx := context.Background()
	root, err := svc.Bootstrap(ctx)
	if err != nil {
		t.Fatal(err)
	}
	as := func(tok lockservice.NewToken) context.Context {
		return lockservice.WithCaller(ctx, lockservice.Caller{TokenID: tok.ID})
	}
	write := []lockstate.Rule{{Prefix: "", Access: lockstate.AccessWrite}}
	owner, err := svc.CreateToken(as(root), "owner", write, nil)
	if err != nil {
		t.Fatal(err)
	}
	other, err := svc.CreateToken(as(root), "other", write, nil)
	if err != nil {
		t.Fatal(err)
	}
	_, key, err := svc.CreateSession(as(owner), &lockstate.CreateSession{TTL: 30 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	if closed, err := svc.CloseSession(as(other), key); code(err) != lockstate.CodeNoSession {
		t.Fatalf("another token's close after a lost answer: %+v, %v; want the no-session refusal", closed, err)
	}
	if _, err := svc.Session(as(owner), lockservice.Linearizable, key); err != nil {
		t.Fatalf("the session after another token's close: %v", err)
	}
}

// Another token's close whose answer was lost, repeated once the owner
// closed the session meanwhile, is refused: the session is gone, but no
// attempt of that token could have closed it (found by the power matrix,
// bolt, semaphore, 5 nodes: the intruder's close was accepted).
func TestAnotherTokensCloseIsRefusedWhenTheOwnerClosedMeanwhile(t *testing.T) {
	var svc *lockservice.Service
	var ownerCloses func()
	svc, _ = startService(t, raftnode.Config{}, func(n *raftnode.Node) lockservice.Node {
		return &unknownFirst[*lockstate.CloseSession]{Node: n, between: func() { ownerCloses() }}
	})
	ctx := context.Background()
	root, err := svc.Bootstrap(ctx)
	if err != nil {
		t.Fatal(err)
	}
	as := func(tok lockservice.NewToken) context.Context {
		return lockservice.WithCaller(ctx, lockservice.Caller{TokenID: tok.ID})
	}
	write := []lockstate.Rule{{Prefix: "", Access: lockstate.AccessWrite}}
	owner, err := svc.CreateToken(as(root), "owner", write, nil)
	if err != nil {
		t.Fatal(err)
	}
	other, err := svc.CreateToken(as(root), "other", write, nil)
	if err != nil {
		t.Fatal(err)
	}
	_, key, err := svc.CreateSession(as(owner), &lockstate.CreateSession{TTL: 30 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	ownerCloses = func() {
		if _, err := svc.CloseSession(as(owner), key); err != nil {
			t.Errorf("the owner's close: %v", err)
		}
	}
	if closed, err := svc.CloseSession(as(other), key); code(err) != lockstate.CodeNoSession {
		t.Fatalf("another token's close, repeated after the owner's: %+v, %v; want the no-session refusal", closed, err)
	}
}

// A close whose first attempt may have applied stays an unknown outcome
// when the repeats find no leader: the API must not answer "not applied"
// (found by review).
func TestCloseSessionStaysUnknownWhenTheRepeatFindsNoLeader(t *testing.T) {
	svc, _ := startService(t, raftnode.Config{}, func(n *raftnode.Node) lockservice.Node {
		return &unknownThenNoLeader[*lockstate.CloseSession]{losesFirstAnswer: losesFirstAnswer[*lockstate.CloseSession]{Node: n}}
	})
	a := session(t, svc)
	_, err := svc.CloseSession(context.Background(), a)
	if !errors.Is(err, raftnode.ErrUnknownOutcome) {
		t.Fatalf("close applied, answer lost, repeats found no leader: %v, want an unknown outcome", err)
	}
}

// leaderless is a node that reaches no leader for a read-index.
type leaderless struct{ lockservice.Node }

func (leaderless) ReadIndex(context.Context) error {
	return fmt.Errorf("read index: %w", lockservice.ErrNoLeader)
}

// A session key this node does not know yet cannot be looked up without a
// leader. Nothing was proposed: an acquire whose client chose its request
// id is a RetryError for that id (the client repeats it), one without an
// id is the no-leader error itself.
func TestAcquireOfAKeyLookedUpWithoutLeaderIsARetry(t *testing.T) {
	svc, _ := startService(t, raftnode.Config{}, func(n *raftnode.Node) lockservice.Node { return leaderless{n} })
	ctx, spec := context.Background(), []lockstate.LockSpec{{Name: "jobs/x", Mode: lockstate.Write}}
	const key = "kNotKnownOnThisNode_0001"
	_, err := svc.Acquire(ctx, key, &lockstate.Acquire{RequestID: "r-1", Locks: spec})
	var retry *lockservice.RetryError
	if !errors.As(err, &retry) || retry.RequestID != "r-1" || !errors.Is(err, lockservice.ErrNoLeader) {
		t.Fatalf("with a request id: %v, want a RetryError for r-1 wrapping ErrNoLeader", err)
	}
	_, err = svc.Acquire(ctx, key, &lockstate.Acquire{Locks: spec})
	if errors.As(err, &retry) || !errors.Is(err, lockservice.ErrNoLeader) {
		t.Fatalf("without a request id: %v, want ErrNoLeader and no RetryError", err)
	}
}
