package raftnode

import (
	"bytes"
	"crypto/tls"
	"fmt"
	"os"
	"testing"
	"time"

	"github.com/hashicorp/raft"

	"github.com/lockd/lockd/cmd/lockd/lockdtest"
	"github.com/lockd/lockd/lockstate"
)

// rpcKind names one of raft's RPCs, for the tables below.
type rpcKind string

const (
	rpcAppend   rpcKind = "AppendEntries"
	rpcVote     rpcKind = "RequestVote"
	rpcTimeout  rpcKind = "TimeoutNow"
	rpcSnapshot rpcKind = "InstallSnapshot"
)

// raftCall sends one raft RPC of kind to target at term, as name, over a
// connection that presents conf's certificate. It returns nil if the RPC
// was answered.
func raftCall(target *testNode, conf *tls.Config, name string, kind rpcKind, term uint64, entries []*raft.Log) error {
	trans := raft.NewNetworkTransportWithConfig(&raft.NetworkTransportConfig{
		Stream: &dialOnly{conf: conf, closed: make(chan struct{})}, MaxPool: 1, Timeout: 3 * time.Second})
	defer trans.Close()
	id, addr := raft.ServerID(target.id), raft.ServerAddress(target.raftAddr)
	header := raft.RPCHeader{ProtocolVersion: raft.ProtocolVersionMax, ID: []byte(name), Addr: []byte(name)}
	switch kind {
	case rpcAppend:
		last := target.get().raft.LastIndex()
		return trans.AppendEntries(id, addr, &raft.AppendEntriesRequest{RPCHeader: header, Term: term,
			PrevLogEntry: last, PrevLogTerm: term, Entries: entries, LeaderCommitIndex: last + uint64(len(entries))},
			new(raft.AppendEntriesResponse))
	case rpcVote:
		return trans.RequestVote(id, addr, &raft.RequestVoteRequest{RPCHeader: header, Term: term,
			LastLogIndex: 1 << 40, LastLogTerm: term}, new(raft.RequestVoteResponse))
	case rpcTimeout:
		return trans.TimeoutNow(id, addr, &raft.TimeoutNowRequest{RPCHeader: header}, new(raft.TimeoutNowResponse))
	default:
		return trans.InstallSnapshot(id, addr, &raft.InstallSnapshotRequest{RPCHeader: header,
			SnapshotVersion: raft.SnapshotVersionMax, Term: term, LastLogIndex: 1 << 40, LastLogTerm: term},
			new(raft.InstallSnapshotResponse), bytes.NewReader(nil))
	}
}

// raftView is what a refused RPC must leave alone on a node.
type raftView struct {
	term, last uint64
	leader     string
}

func viewOf(n *Node) raftView {
	_, leader := n.raft.LeaderWithID()
	return raftView{term: n.raft.CurrentTerm(), last: n.raft.LastIndex(), leader: string(leader)}
}

// A node certificate of the cluster's CA for a name that is not a server
// of the configuration (a decommissioned node's, a spare's) speaks raft to
// every node: an empty AppendEntries, then one entry of an unknown
// command type at a later term. Every node refuses both: the stranger
// neither leads nor moves a term to its own, its entry is not in the log,
// and the nodes go on answering with one digest.
func TestNonMemberCertificateCannotSpeakRaft(t *testing.T) {
	pki := newTestPKI(t)
	c := newTestCluster(t, 3, pki.useTLS)
	l := c.leader()
	createSession(t, l.get(), time.Minute)
	c.converged()
	before := map[string]raftView{}
	for _, tn := range c.live() {
		before[tn.id] = viewOf(tn.get())
	}
	stranger := pki.store("n9").PeerClient()
	// The stranger's entry has a term no election of this test reaches:
	// under load the cluster may hold one meanwhile, which moves the
	// term, the leader and the log too.
	strange := func(tn *testNode) uint64 { return before[tn.id].term + 1000 }
	for _, tn := range c.live() {
		if err := raftCall(tn, stranger, "n9", rpcAppend, before[tn.id].term, nil); err == nil {
			t.Errorf("%s answered a non-member's empty AppendEntries", tn.id)
		}
		bad := []*raft.Log{{Index: before[tn.id].last + 1, Term: strange(tn), Type: raft.LogCommand,
			Data: []byte{0x30, 0x92, 0x00, 0x80}}}
		if err := raftCall(tn, stranger, "n9", rpcAppend, strange(tn), bad); err == nil {
			t.Errorf("%s answered a non-member's AppendEntries at a later term", tn.id)
		}
	}
	for _, tn := range c.live() {
		if got := viewOf(tn.get()); got.term >= strange(tn) || got.leader == "n9" {
			t.Errorf("%s: raft went from %+v to %+v", tn.id, before[tn.id], got)
		}
	}
	if t.Failed() {
		return
	}
	createSession(t, c.leader().get(), time.Minute)
	c.converged()
	if got := l.get().RaftRefusals(); got == 0 {
		t.Errorf("the leader counted no refusal")
	}
}

// Every raft RPC is answered with a member's certificate and refused
// (term and log unchanged) with a non-member's and with a removed
// member's, once the removal is in the target's configuration.
func TestRaftRPCsOnlyFromTheConfiguration(t *testing.T) {
	pki := newTestPKI(t)
	c := newTestCluster(t, 4, pki.useTLS)
	l := c.leader()
	fs := c.followers(l)
	target, removed := fs[0], fs[1]
	c.remove(removed.id)
	waitFor(t, 10*time.Second, "the target's configuration without "+removed.id, func() bool {
		return !target.get().isServer(removed.id)
	})
	removed.stop() // its own elections would only be refused too; keep the terms still
	callers := []struct {
		name   string
		member bool
	}{{"n9", false}, {removed.id, false}, {l.id, true}}
	kinds := []rpcKind{rpcAppend, rpcVote, rpcSnapshot, rpcTimeout} // TimeoutNow last: answered, it starts an election
	for _, caller := range callers {
		conf := pki.store(caller.name).PeerClient()
		for _, kind := range kinds {
			tn := target.get()
			view := viewOf(tn)
			// A non-member asks at a term no election of this test
			// reaches: under load the members may hold one meanwhile,
			// which moves the target's term, leader and log too.
			term := view.term + 1000
			if caller.member {
				term = 0 // stale: answered and refused by raft itself, changing nothing
			}
			err := raftCall(target, conf, caller.name, kind, term, nil)
			switch got := viewOf(tn); {
			case caller.member && err != nil:
				t.Errorf("%s from member %s: %v", kind, caller.name, err)
			case !caller.member && err == nil:
				t.Errorf("%s from %s was answered", kind, caller.name)
			case !caller.member && (got.term >= term || got.leader == caller.name || got.last >= 1<<40):
				t.Errorf("%s from %s moved %s's raft from %+v to %+v", kind, caller.name, target.id, view, got)
			}
		}
	}
	// An election meanwhile may cut the proposal's answer (unknown
	// outcome, no leader), which createSession settles.
	createSession(t, target.get(), time.Minute)
}

// A member's open raft connection is refused at its first RPC after its
// removal reached the node: the check runs on every RPC, not only when
// the connection was accepted.
func TestRemovedMemberOpenConnectionIsRefused(t *testing.T) {
	pki := newTestPKI(t)
	c := newTestCluster(t, 4, pki.useTLS)
	l := c.leader()
	fs := c.followers(l)
	target, removed := fs[0], fs[1]
	trans := raft.NewNetworkTransportWithConfig(&raft.NetworkTransportConfig{
		Stream: &dialOnly{conf: pki.store(removed.id).PeerClient(), closed: make(chan struct{})}, MaxPool: 1, Timeout: 3 * time.Second})
	defer trans.Close()
	header := raft.RPCHeader{ProtocolVersion: raft.ProtocolVersionMax, ID: []byte(removed.id), Addr: []byte(removed.id)}
	stale := func() error { // term 0: raft answers and changes nothing
		return trans.AppendEntries(raft.ServerID(target.id), raft.ServerAddress(target.raftAddr),
			&raft.AppendEntriesRequest{RPCHeader: header}, new(raft.AppendEntriesResponse))
	}
	if err := stale(); err != nil {
		t.Fatalf("a member's RPC: %v", err)
	}
	c.remove(removed.id)
	waitFor(t, 10*time.Second, "the target's configuration without "+removed.id, func() bool {
		return !target.get().isServer(removed.id)
	})
	removed.stop() // a member that knows no leader would hear it by the join rule while it runs
	refused := target.get().RaftRefusals()
	if err := stale(); err == nil {
		t.Fatal("the removed member's open connection was still answered")
	}
	if got := target.get().RaftRefusals(); got <= refused {
		t.Fatalf("refusals went from %d to %d", refused, got)
	}
}

// remove takes server id out of the configuration through whichever node
// leads (elections may move the leader on a loaded machine).
func (c *testCluster) remove(id string) {
	c.t.Helper()
	var err error
	waitFor(c.t, 20*time.Second, "the removal of "+id, func() bool {
		l := c.readyLeader()
		if l == nil || l.id == id {
			return false
		}
		err = l.get().RemoveServer(id)
		return err == nil
	})
}

// A member replaced under its own id replays the log from its start, and
// for a while holds a configuration without the leader it catches up
// from (a node added later): it must go on hearing that leader, whom it
// follows, until it reaches the entry that adds it (jepsen, 2026-12-05:
// the replacement refused the leader and stayed at the first batch).
func TestReplacementHearsALeaderItsReplayedConfigurationLacks(t *testing.T) {
	pki := newTestPKI(t)
	c := newTestCluster(t, 3, pki.useTLS)
	// More entries than one AppendEntries carries (raft's MaxAppendEntries,
	// 64) before the leader-to-be joins.
	for range 100 {
		proposeSettled(t, c.leader().get(), &lockstate.Tick{})
	}
	late := c.addNode("n4")
	waitFor(t, 30*time.Second, "n4 to lead", func() bool {
		if l := c.readyLeader(); l != nil && l.id != late.id {
			_ = l.get().raft.LeadershipTransferToServer(raft.ServerID(late.id), raft.ServerAddress(late.raftAddr)).Error()
		}
		return c.readyLeader() == late
	})
	replaced := c.followers(late)[0]
	replaced.stop()
	if err := os.RemoveAll(replaced.dir); err != nil {
		t.Fatal(err)
	}
	replaced.dir = t.TempDir()
	replaced.start()
	want := c.leader().get().FSM().AppliedIndex()
	waitFor(t, 30*time.Second, replaced.id+" to catch up from "+late.id, func() bool {
		return replaced.get().FSM().AppliedIndex() >= want
	})
}

// addNode starts a fresh node id and adds it as a voter through whichever
// node leads.
func (c *testCluster) addNode(id string) *testNode {
	c.t.Helper()
	tn := &testNode{c: c, id: id, dir: c.t.TempDir(), raftAddr: fmt.Sprintf("127.0.0.1:%d", lockdtest.FreePorts(c.t, 1)[0])}
	c.mu.Lock()
	c.nodes = append(c.nodes, tn)
	c.mu.Unlock()
	tn.start()
	waitFor(c.t, 30*time.Second, "the addition of "+id, func() bool {
		l := c.readyLeader()
		return l != nil && l.get().AddVoter(id, tn.raftAddr) == nil
	})
	return tn
}
