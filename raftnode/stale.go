//go:build lockd_faults

package raftnode

import (
	"bytes"
	"fmt"
	"sync"

	"github.com/hashicorp/raft"
)

// staleFSM is the snapshot negative control (UnsafeStaleSnapshot):
// every snapshot raft takes holds the state of the one taken before it,
// labelled with the new index. A node restored from it — a follower
// catching up through InstallSnapshot, any node at restart — misses the
// entries between the two and diverges silently, the class of bug that
// snapshots during faults exist to expose.
type staleFSM struct {
	clockedFSM
	mu   sync.Mutex
	prev []byte // the last snapshot taken, encoded
}

// Snapshot takes a snapshot and hands raft the previous one instead (the
// first time, the one it took).
func (f *staleFSM) Snapshot() (raft.FSMSnapshot, error) {
	snap, err := f.clockedFSM.Snapshot()
	if err != nil {
		return nil, err
	}
	var sink memorySink
	err = snap.Persist(&sink)
	snap.Release()
	if err != nil {
		return nil, fmt.Errorf("raftnode: stale snapshot: %w", err)
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	stale := f.prev
	if stale == nil {
		stale = sink.Bytes()
	}
	f.prev = sink.Bytes()
	return encodedSnapshot(stale), nil
}

// memorySink is a raft.SnapshotSink that keeps what is written in memory.
type memorySink struct{ bytes.Buffer }

func (*memorySink) ID() string    { return "memory" }
func (*memorySink) Cancel() error { return nil }
func (*memorySink) Close() error  { return nil }

// encodedSnapshot is a snapshot already encoded.
type encodedSnapshot []byte

// Persist writes the snapshot to sink.
func (s encodedSnapshot) Persist(sink raft.SnapshotSink) error {
	if _, err := sink.Write(s); err != nil {
		_ = sink.Cancel()
		return err
	}
	return sink.Close()
}

// Release does nothing: the bytes are the garbage collector's.
func (encodedSnapshot) Release() {}
