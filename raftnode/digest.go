package raftnode

import (
	"context"
	"encoding/hex"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"sync/atomic"
	"time"

	"github.com/hashicorp/raft"
)

// Every node applies the same log to the same pure table, so at the same
// applied index every node's table digest is the same. A follower checks
// that periodically against the leader's: a difference means this node's
// state diverged (a corrupt disk, a bug) and an operator must know. The
// check is best effort: it compares only when both stand at the same
// index, which an idle or lightly loaded cluster reaches quickly and a busy
// one now and then.
//
// A difference stops the node as a corrupt entry does (fail-stop): it
// answers nothing from its table any more (Diverged; the API answers 503
// diverged), hands leadership away should it win an election, and writes
// divergedFile into its data dir, so that a restart stays stopped until
// an operator replaces its data (divergedRemedy).

// divergedFile, in the data dir, marks a node whose state diverged; it
// holds what was compared. Open reads it.
const divergedFile = "DIVERGED"

// divergedRemedy tells the operator what to do about a diverged node.
const divergedRemedy = "this node's lock table differs from the leader's at the same applied index: its state has diverged " +
	"and it serves nothing until an operator acts: stop it, remove it from the cluster (lockctl member remove --wait 30s <id>, " +
	"or DELETE /v1/members/<id>, on another node: a node still running is refused), " +
	"move its data dir away (DIVERGED file included) and start it again with an empty one and --join: it is added back " +
	"and receives a snapshot from the leader (\"Restore one node\" in docs/operations.md). Deleting only the DIVERGED file " +
	"brings the diverged state back into service"

// digestChecksPerElection: a follower compares its digest with the
// leader's every 10 election timeouts (10 s at raft's defaults).
const digestChecksPerElection = 10

// DigestChecks counts a node's comparisons of its table digest with the
// leader's.
type DigestChecks struct {
	Compared   uint64 // comparisons at the same applied index
	Mismatches uint64 // of those, how many differed
	// LastMismatchIndex is the applied index of the last mismatch, 0 if
	// none.
	LastMismatchIndex uint64
}

// digestState is what checkDigests records.
type digestState struct {
	compared, mismatches, lastMismatch atomic.Uint64
	// falsify, when set by a test, changes the digest this node reports.
	falsify atomic.Pointer[func(*[32]byte)]
}

// digestOf is appliedDigest as this node reports it.
func (n *Node) digestOf() (uint64, [32]byte) {
	index, digest := n.appliedDigest()
	if f := n.digests.falsify.Load(); f != nil {
		(*f)(&digest)
	}
	return index, digest
}

// appliedDigest returns this node's applied index and the table digest at
// exactly that index.
func (n *Node) appliedDigest() (uint64, [32]byte) { return n.fsm.AppliedDigest() }

// DigestChecks returns the counts of this node's digest comparisons.
func (n *Node) DigestChecks() DigestChecks {
	return DigestChecks{Compared: n.digests.compared.Load(), Mismatches: n.digests.mismatches.Load(),
		LastMismatchIndex: n.digests.lastMismatch.Load()}
}

// checkDigests compares this node's digest with the leader's periodically
// while it is a follower, until shutdown.
func (n *Node) checkDigests() {
	defer n.wg.Done()
	tick := time.NewTicker(digestChecksPerElection * n.timing.election)
	defer tick.Stop()
	for {
		select {
		case <-tick.C:
			n.compareDigestOnce()
		case <-n.shutdownCh:
			return
		}
	}
}

// compareDigestOnce asks the leader for its applied index and digest and
// compares them with this node's when the indexes are equal.
func (n *Node) compareDigestOnce() {
	addr, id := n.raft.LeaderWithID()
	if id == "" || string(id) == n.cfg.ID {
		return
	}
	index, digest := n.digestOf()
	if index == 0 {
		return // nothing applied yet: nothing to compare
	}
	ctx, cancel := context.WithTimeout(context.Background(), 2*n.timing.heartbeat+n.timing.election)
	defer cancel()
	rep, err := n.forward(ctx, string(addr), pathDigest, nil, false)
	if err != nil || rep.Index != index {
		return // not reachable, or not at the same index: next time
	}
	n.digests.compared.Add(1)
	if string(rep.Digest) == string(digest[:]) {
		return
	}
	n.digests.mismatches.Add(1)
	n.digests.lastMismatch.Store(index)
	n.diverge(fmt.Sprintf("at applied index %d this node's table digest is %s, leader %s's is %s",
		index, hex.EncodeToString(digest[:]), id, hex.EncodeToString(rep.Digest)))
}

// diverge stops the node from serving for good: it records why, in
// memory and in divergedFile, and logs it with the remedy.
func (n *Node) diverge(what string) {
	if !n.diverged.CompareAndSwap(nil, &what) {
		return // stopped already
	}
	n.logger.Error(divergedRemedy, "compared", what)
	path := filepath.Join(n.cfg.DataDir, divergedFile)
	if err := os.WriteFile(path, []byte(what+"\n"), 0o640); err != nil {
		n.logger.Error("cannot write the divergence marker; a restart will serve again", "path", path, "error", err)
	}
	n.changes.Notify()
	if n.raft.State() == raft.Leader {
		go n.transferLeadership(context.Background())
	}
}

// Diverged returns, once this node's state has diverged from the
// leader's, what was compared; "" while it has not. A diverged node must
// serve nothing from its table.
func (n *Node) Diverged() string {
	if what := n.diverged.Load(); what != nil {
		return *what
	}
	return ""
}

// loadDiverged reads divergedFile at Open: a node that diverged before
// its restart stays stopped.
func (n *Node) loadDiverged() error {
	b, err := os.ReadFile(filepath.Join(n.cfg.DataDir, divergedFile))
	switch {
	case errors.Is(err, fs.ErrNotExist):
		return nil
	case err != nil:
		return fmt.Errorf("raftnode: read the divergence marker: %w", err)
	}
	what := strings.TrimSpace(string(b))
	if what == "" {
		what = "(the marker names nothing)"
	}
	n.diverged.Store(&what)
	n.logger.Error(divergedRemedy, "compared", what, "marker", divergedFile)
	return nil
}
