package raftnode

import (
	"context"
	"errors"
	"io"
	"slices"
	"sync"
	"time"

	"github.com/hashicorp/raft"
)

// Quorum is this node's count of the voters it reaches, as its raft sees
// them (contacts): what GET /v1/status, the 503 no_leader answers and
// lockctl status report.
type Quorum struct {
	// Voters is the number of voters in the raft configuration; 0 while
	// this node is in none.
	Voters int
	// Reachable are the voters this node reaches, itself included,
	// sorted.
	Reachable []string
	// Needed is the majority of Voters a leader needs.
	Needed int
	// Lost: fewer than Needed voters are reachable and this node follows
	// no leader that still reaches it, so no leader can be elected on its
	// side. Writes and linearizable reads then fail at once (ErrNoLeader
	// wrapping ErrQuorumLost) instead of waiting for a leader.
	Lost bool
}

// ErrQuorumLost is wrapped, with ErrNoLeader, by a call that gave up
// because this node reaches fewer voters than a majority (Quorum.Lost).
var ErrQuorumLost = errors.New("raftnode: quorum lost")

// contacts is this node's record of raft's own contact with each peer: the
// answers to the RPCs its raft sends (heartbeats, entries, snapshots, vote
// and pre-vote requests), those RPCs that failed or are still unanswered,
// the vote requests it receives, and, on a follower, its leader's last
// contact. From these it decides which voters are reachable now.
//
// Gossip alone is slow to see a node that stopped answering (a frozen
// process, a stopped container: memberlist declares it dead after its
// suspicion timeout, tens of seconds on compose), and raft's own
// FailedHeartbeatObservation comes only when an RPC fails, which for a
// peer whose port accepts and never answers is the transport's 10 s
// timeout. So a peer counts as silent once an RPC sent to it after its
// last answer has failed or gone unanswered for `unanswered` (about an
// election timeout): a leader learns it from its heartbeats within that
// time, a follower once it stands for election (its pre-vote requests).
// Raft's own leader lease is the same rule with a shorter bound
// (Consul's autopilot likewise calls a server unhealthy past its
// LastContactThreshold). A voter raft has had no recent contact with
// either way (a follower does not talk to the other followers) is judged
// by gossip: reachable unless gossip has seen it fail or leave.
//
// contacts has a clock of its own (now), injected by tests; in a node it
// is time.Now, the clock raft's LastContact and AppendFuture.Start read.
type contacts struct {
	now func() time.Time
	// unanswered: a peer that has not answered an RPC for this long is
	// silent. window: evidence older than this says nothing. follow: a
	// follower whose leader was heard within this (the heartbeat
	// timeout) still follows it.
	unanswered, window, follow time.Duration

	mu    sync.Mutex
	peers map[string]*peerContact
	// forgetBefore: a leader was named then; silence that began before
	// says nothing any more (a majority elected it since, and this node
	// no longer asks the others).
	forgetBefore time.Time
	lost         bool
	lostCh       chan struct{} // closed while lost
	seq          uint64        // numbers the RPCs in flight
}

// peerContact is what raft saw of one peer.
type peerContact struct {
	heard time.Time // its last answer, or request to this node
	// failedFrom is the start of the earliest RPC sent after heard that
	// failed, failedAt when the last one failed; zero when none.
	failedFrom, failedAt time.Time
	calls                map[uint64]time.Time // RPCs in flight, by their start
}

// peerVerdict is what raft's evidence says of a peer.
type peerVerdict int

const (
	noEvidence peerVerdict = iota // no recent contact either way: gossip decides
	answered                      // it answered (or asked) recently
	silent                        // an RPC sent after its last answer failed or went unanswered
)

func newContacts(now func() time.Time, t timing) *contacts {
	return &contacts{now: now, unanswered: t.unanswered, window: t.contactWindow, follow: t.heartbeat,
		peers: map[string]*peerContact{}, lostCh: make(chan struct{})}
}

// peer returns id's record, made on first use; c.mu is held.
func (c *contacts) peer(id string) *peerContact {
	p := c.peers[id]
	if p == nil {
		p = &peerContact{calls: map[uint64]time.Time{}}
		c.peers[id] = p
	}
	return p
}

// call records an RPC to id sent now; the returned function records its
// outcome.
func (c *contacts) call(id string) func(error) {
	c.mu.Lock()
	c.seq++
	seq, start := c.seq, c.now()
	c.peer(id).calls[seq] = start
	c.mu.Unlock()
	return func(err error) {
		c.mu.Lock()
		delete(c.peer(id).calls, seq)
		c.mu.Unlock()
		c.answer(id, start, err)
	}
}

// answer records the outcome of an RPC to id sent at start: an answer, or
// a failure.
func (c *contacts) answer(id string, start time.Time, err error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	p, now := c.peer(id), c.now()
	switch {
	case err == nil:
		p.heard = now
		p.failedFrom, p.failedAt = time.Time{}, time.Time{}
	case !start.Before(p.heard):
		if p.failedFrom.IsZero() || start.Before(p.failedFrom) {
			p.failedFrom = start
		}
		p.failedAt = now
	}
}

// heard records that id spoke to this node at (a vote request it sent; its
// leader's contact).
func (c *contacts) heard(id string, at time.Time) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if p := c.peer(id); at.After(p.heard) {
		p.heard = at
		if !p.failedFrom.After(at) {
			p.failedFrom, p.failedAt = time.Time{}, time.Time{}
		}
	}
}

// leaderNamed records that this node learned of a leader now.
func (c *contacts) leaderNamed() {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.forgetBefore = c.now()
}

// forget drops a peer removed from the configuration.
func (c *contacts) forget(id string) {
	c.mu.Lock()
	defer c.mu.Unlock()
	delete(c.peers, id)
}

// verdict is what the evidence says of p at now; c.mu is held.
func (c *contacts) verdict(p *peerContact, now time.Time) peerVerdict {
	var onset time.Time // since when p has not answered what it was asked
	earlier := func(t time.Time) {
		if !t.Before(p.heard) && !t.Before(c.forgetBefore) && (onset.IsZero() || t.Before(onset)) {
			onset = t
		}
	}
	for _, start := range p.calls {
		earlier(start)
	}
	if !p.failedFrom.IsZero() && now.Sub(p.failedAt) < c.window {
		earlier(p.failedFrom)
	}
	switch {
	case !onset.IsZero() && now.Sub(onset) >= c.unanswered:
		return silent
	case !p.heard.IsZero() && now.Sub(p.heard) < c.window:
		return answered
	}
	return noEvidence
}

// quorumFacts is what raft says of this node when its quorum is judged.
type quorumFacts struct {
	self   string
	voters []string // the configuration's voters
	// leader is the leader a follower knows ("" for none, and on a
	// leader or candidate); leaderContact its last contact (raft's
	// LastContact).
	leader        string
	leaderContact time.Time
	// gone reports whether gossip has seen a node fail or leave; nil:
	// no gossip (a --dev node, tests).
	gone func(id string) bool
}

// judge counts the reachable voters and decides whether the quorum is
// lost, and records the decision (lostSignal). changed reports whether it
// differs from the one before.
func (c *contacts) judge(f quorumFacts) (q Quorum, changed bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	now := c.now()
	following := false
	if f.leader != "" && f.leader != f.self {
		if p := c.peer(f.leader); f.leaderContact.After(p.heard) {
			p.heard = f.leaderContact
		}
		following = now.Sub(f.leaderContact) < c.follow
	}
	q.Voters = len(f.voters)
	q.Needed = q.Voters/2 + 1
	for _, id := range f.voters {
		reachable := id == f.self
		if !reachable {
			switch c.verdict(c.peer(id), now) {
			case answered:
				reachable = true
			case noEvidence:
				reachable = f.gone == nil || !f.gone(id)
			}
		}
		if reachable {
			q.Reachable = append(q.Reachable, id)
		}
	}
	slices.Sort(q.Reachable)
	q.Lost = q.Voters > 0 && len(q.Reachable) < q.Needed && !following
	if q.Lost == c.lost {
		return q, false
	}
	c.lost = q.Lost
	if q.Lost {
		close(c.lostCh)
	} else {
		c.lostCh = make(chan struct{})
	}
	return q, true
}

// isLost reports the last decision of judge.
func (c *contacts) isLost() bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.lost
}

// lostSignal returns a channel closed once judge decides the quorum is
// lost (already closed while it is).
func (c *contacts) lostSignal() <-chan struct{} {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.lostCh
}

// untilLost returns ctx, cancelled with cause ErrQuorumLost as soon as the
// quorum is judged lost, and the function that releases it.
func (c *contacts) untilLost(ctx context.Context) (context.Context, context.CancelFunc) {
	ctx, cancel := context.WithCancelCause(ctx)
	lost := c.lostSignal()
	go func() {
		select {
		case <-lost:
			cancel(ErrQuorumLost)
		case <-ctx.Done():
		}
	}()
	return ctx, func() { cancel(nil) }
}

// contactTransport records every RPC raft sends, and its answer, in
// contacts; the answers to pipelined entries come through
// pipelineTransport.answered.
type contactTransport struct {
	pipelineTransport
	c *contacts
}

func newContactTransport(trans *raft.NetworkTransport, c *contacts) contactTransport {
	return contactTransport{pipelineTransport{trans, func(id raft.ServerID, f raft.AppendFuture) {
		c.answer(string(id), f.Start(), f.Error())
	}}, c}
}

// AppendEntries sends a heartbeat or entries, recording the contact.
func (t contactTransport) AppendEntries(id raft.ServerID, target raft.ServerAddress, args *raft.AppendEntriesRequest, resp *raft.AppendEntriesResponse) error {
	done := t.c.call(string(id))
	err := t.pipelineTransport.AppendEntries(id, target, args, resp)
	done(err)
	return err
}

// RequestVote asks for a vote, recording the contact.
func (t contactTransport) RequestVote(id raft.ServerID, target raft.ServerAddress, args *raft.RequestVoteRequest, resp *raft.RequestVoteResponse) error {
	done := t.c.call(string(id))
	err := t.pipelineTransport.RequestVote(id, target, args, resp)
	done(err)
	return err
}

// RequestPreVote asks for a pre-vote, recording the contact.
func (t contactTransport) RequestPreVote(id raft.ServerID, target raft.ServerAddress, args *raft.RequestPreVoteRequest, resp *raft.RequestPreVoteResponse) error {
	done := t.c.call(string(id))
	err := t.pipelineTransport.RequestPreVote(id, target, args, resp)
	done(err)
	return err
}

// InstallSnapshot sends a snapshot, recording the contact.
func (t contactTransport) InstallSnapshot(id raft.ServerID, target raft.ServerAddress, args *raft.InstallSnapshotRequest, resp *raft.InstallSnapshotResponse, data io.Reader) error {
	done := t.c.call(string(id))
	err := t.pipelineTransport.InstallSnapshot(id, target, args, resp, data)
	done(err)
	return err
}

// TimeoutNow starts a leadership transfer, recording the contact.
func (t contactTransport) TimeoutNow(id raft.ServerID, target raft.ServerAddress, args *raft.TimeoutNowRequest, resp *raft.TimeoutNowResponse) error {
	done := t.c.call(string(id))
	err := t.pipelineTransport.TimeoutNow(id, target, args, resp)
	done(err)
	return err
}

// contactObservation picks the raft observations contacts needs.
func contactObservation(o *raft.Observation) bool {
	switch o.Data.(type) {
	case raft.RequestVoteRequest, raft.RequestPreVoteRequest, raft.LeaderObservation, raft.PeerObservation:
		return true
	}
	return false
}

// observe records what an observation says of raft's contact: a vote or
// pre-vote request came from its candidate; a leader was named; a peer
// left the configuration.
func (c *contacts) observe(o raft.Observation) {
	var from []byte
	switch d := o.Data.(type) {
	case raft.RequestVoteRequest:
		from = d.ID
	case raft.RequestPreVoteRequest:
		from = d.ID
	case raft.LeaderObservation:
		if d.LeaderID != "" {
			c.leaderNamed()
		}
	case raft.PeerObservation:
		if d.Removed {
			c.forget(string(d.Peer.ID))
		}
	}
	if len(from) > 0 {
		c.heard(string(from), c.now())
	}
}

// SetGossipGone sets how the quorum judges a voter raft has had no recent
// contact with: gone reports whether gossip has seen it fail or leave.
// nil (the default): such a voter counts as reachable.
func (n *Node) SetGossipGone(gone func(id string) bool) {
	if gone == nil {
		n.gone.Store(nil)
		return
	}
	n.gone.Store(&gone)
}

// Quorum judges, now, which voters this node reaches and whether its
// quorum is lost (contacts). A change of that verdict is logged, and wakes
// the calls waiting for a leader.
func (n *Node) Quorum() Quorum {
	facts := quorumFacts{self: n.cfg.ID}
	if gone := n.gone.Load(); gone != nil {
		facts.gone = *gone
	}
	if future := n.raft.GetConfiguration(); future.Error() == nil {
		for _, s := range future.Configuration().Servers {
			if s.Suffrage == raft.Voter {
				facts.voters = append(facts.voters, string(s.ID))
			}
		}
	}
	if n.raft.State() == raft.Follower {
		if _, id := n.raft.LeaderWithID(); id != "" {
			facts.leader, facts.leaderContact = string(id), n.raft.LastContact()
		}
	}
	q, changed := n.contacts.judge(facts)
	if changed && !n.stopping.Load() { // a node shutting down loses its peers by itself
		if q.Lost {
			n.logger.Warn("quorum lost: too few voters answer raft", "reachable", q.Reachable,
				"voters", q.Voters, "needed", q.Needed)
		} else {
			n.logger.Info("quorum reachable again", "reachable", q.Reachable, "voters", q.Voters, "needed", q.Needed)
		}
		n.changes.Notify()
	}
	return q
}

// watchQuorum judges the quorum again every quorumTick, so that a peer
// falling silent is noticed without anyone asking, and feeds contacts the
// observations it needs.
func (n *Node) watchQuorum() {
	defer n.wg.Done()
	tick := time.NewTicker(n.timing.quorumTick)
	defer tick.Stop()
	for {
		select {
		case o := <-n.contactObs:
			n.contacts.observe(o)
			n.Quorum() // a leader named ends a lost quorum at once
		case <-tick.C:
			n.Quorum()
		case <-n.shutdownCh:
			return
		}
	}
}
