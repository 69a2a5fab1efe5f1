package lockservice_test

import (
	"context"
	"testing"
	"time"

	"github.com/lockd/lockd/lockstate"
	"github.com/lockd/lockd/raftnode"
	"github.com/lockd/lockd/raftnode/lockservice"
)

// campaign takes name for s at once with value, or fails the test.
func campaign(t *testing.T, svc *lockservice.Service, s, name, value string) *lockstate.RequestInfo {
	t.Helper()
	info, err := svc.Acquire(context.Background(), s, &lockstate.Acquire{
		Locks: []lockstate.LockSpec{{Name: name, Mode: lockstate.Write, Value: value}}})
	return mustGrant(t, info, err)
}

// election reads name as an election, failing the test on an error.
func election(t *testing.T, svc *lockservice.Service, q lockservice.LockQuery) lockservice.ElectionView {
	t.Helper()
	e, err := svc.Election(context.Background(), lockservice.Linearizable, q)
	if err != nil {
		t.Fatalf("election %s: %v", q.Name, err)
	}
	return e
}

// A proclaim whose answer was lost is sent again; the repeat finds the
// value set and changes nothing more: the name moved once.
func TestProclaimIsRepeatedAfterAnUnknownOutcome(t *testing.T) {
	svc, node := startService(t, raftnode.Config{},
		func(n *raftnode.Node) lockservice.Node { return &losesFirstAnswer[*lockstate.Proclaim]{Node: n} })
	a := session(t, svc)
	granted := campaign(t, svc, a, "svc/x", "old")
	sub := node.FSM().Subscribe(0)
	defer sub.Close()
	p, err := svc.Proclaim(context.Background(), a, &lockstate.Proclaim{Name: "svc/x", Value: "new"})
	if err != nil {
		t.Fatalf("proclaim with a lost answer: %v", err)
	}
	after := election(t, svc, lockservice.LockQuery{Name: "svc/x"})
	switch {
	case p.Token != granted.Token || p.Value != "new" || p.Version != after.Version:
		t.Fatalf("proclaim answered %+v; the name is at version %d, its token %d", p, after.Version, granted.Token)
	case after.Leader == nil || after.Leader.Value != "new" || after.Leader.Token != granted.Token:
		t.Fatalf("leader after the proclaim: %+v", after.Leader)
	}
	// Every batch up to a later grant's: the proclaims among them.
	mark := campaign(t, svc, a, "svc/mark", "")
	var proclaimed []uint64
	for b := range sub.C() {
		for _, ev := range b.Events {
			if ev.Kind == lockstate.EvProclaimed {
				proclaimed = append(proclaimed, b.Index)
			}
		}
		if b.Index >= mark.Created {
			break
		}
	}
	if len(proclaimed) != 1 || proclaimed[0] != after.Version {
		t.Fatalf("the proclaim and its repeat changed the value at %v, want once, at the name's version %d", proclaimed, after.Version)
	}
}

// A repeated proclaim that names its token never reaches a hold the
// session won again meanwhile.
func TestProclaimRepeatKeepsToItsToken(t *testing.T) {
	var svc *lockservice.Service
	var a string
	var regained *lockstate.RequestInfo
	svc, _ = startService(t, raftnode.Config{}, func(n *raftnode.Node) lockservice.Node {
		return &unknownFirst[*lockstate.Proclaim]{Node: n, between: func() {
			if _, err := svc.Release(context.Background(), a, &lockstate.Release{Name: "svc/x"}); err != nil {
				t.Error(err)
			}
			regained = campaign(t, svc, a, "svc/x", "won again")
		}}
	})
	a = session(t, svc)
	granted := campaign(t, svc, a, "svc/x", "old")
	_, err := svc.Proclaim(context.Background(), a, &lockstate.Proclaim{Name: "svc/x", Value: "new", Token: granted.Token})
	if code(err) != lockstate.CodeNotHeld {
		t.Fatalf("the repeat after the hold was won again: %v, want not_held", err)
	}
	e := election(t, svc, lockservice.LockQuery{Name: "svc/x"})
	if e.Leader == nil || e.Leader.Token != regained.Token || e.Leader.Value != "won again" {
		t.Fatalf("leader %+v, want the hold won again (token %d) with its own value", e.Leader, regained.Token)
	}
}

// An election of a name nobody holds answers no leader, and a blocking
// one wakes on the grant, on a proclaim (same token, new value) and on
// the leader's end (the candidate, with its larger token).
func TestBlockingElection(t *testing.T) {
	svc, _ := startService(t, raftnode.Config{}, nil)
	a, b := session(t, svc), session(t, svc)
	e := election(t, svc, lockservice.LockQuery{Name: "svc/x"})
	if e.Leader != nil || e.Candidates != 0 || e.Name != "svc/x" {
		t.Fatalf("a free name: %+v", e)
	}
	observe := func(after lockservice.ElectionView) <-chan lockservice.ElectionView {
		ch := make(chan lockservice.ElectionView, 1)
		go func() {
			v, err := svc.Election(context.Background(), lockservice.Linearizable,
				lockservice.LockQuery{Name: "svc/x", Block: true, Index: after.Version, Wait: 20 * time.Second})
			if err != nil {
				t.Error(err)
			}
			ch <- v
		}()
		return ch
	}
	next := func(ch <-chan lockservice.ElectionView, what string) lockservice.ElectionView {
		t.Helper()
		select {
		case v := <-ch:
			return v
		case <-time.After(20 * time.Second):
			t.Fatalf("the blocking election did not answer %s", what)
		}
		return lockservice.ElectionView{}
	}

	ch := observe(e)
	first := campaign(t, svc, a, "svc/x", "10.0.0.1:80")
	e = next(ch, "the grant")
	if e.Leader == nil || e.Leader.Token != first.Token || e.Leader.Value != "10.0.0.1:80" {
		t.Fatalf("after the grant: %+v", e)
	}

	waiting := make(chan *lockstate.RequestInfo, 1)
	go func() {
		info, err := svc.Acquire(context.Background(), b, &lockstate.Acquire{RequestID: "b-campaign", Wait: 30 * time.Second,
			Locks: []lockstate.LockSpec{{Name: "svc/x", Mode: lockstate.Write, Value: "10.0.0.2:80"}}})
		if err != nil {
			t.Error(err)
		}
		waiting <- info
	}()
	waitPending(t, svc, "b-campaign")
	if e = election(t, svc, lockservice.LockQuery{Name: "svc/x"}); e.Candidates != 1 {
		t.Fatalf("with one candidate queued: %+v", e)
	}

	ch = observe(e)
	if _, err := svc.Proclaim(context.Background(), a, &lockstate.Proclaim{Name: "svc/x", Value: "10.0.0.1:90"}); err != nil {
		t.Fatal(err)
	}
	e = next(ch, "the proclaim")
	if e.Leader == nil || e.Leader.Token != first.Token || e.Leader.Value != "10.0.0.1:90" {
		t.Fatalf("after the proclaim: %+v", e)
	}

	ch = observe(e)
	if _, err := svc.CloseSession(context.Background(), a); err != nil {
		t.Fatal(err)
	}
	e = next(ch, "the leader's end")
	second := <-waiting
	if e.Leader == nil || second == nil || e.Leader.Token != second.Token || e.Leader.Token <= first.Token ||
		e.Leader.Value != "10.0.0.2:80" || e.Candidates != 0 {
		t.Fatalf("after the leader's session closed: %+v (the candidate's grant %+v)", e, second)
	}
}
