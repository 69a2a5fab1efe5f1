//go:build lockd_faults

package raftnode

import (
	"fmt"
	"sync"

	"github.com/hashicorp/raft"
)

// noFsyncEvery is how many log writes UnsafeNoFsync lets pass between
// two fsyncs.
const noFsyncEvery = 64

// rareSync is a log store opened without fsync that is fsynced only at
// every every-th write (UnsafeNoFsync): what it acknowledged
// since may be gone after a power loss.
type rareSync struct {
	raft.LogStore
	sync   func() error
	every  int
	mu     sync.Mutex
	writes int
}

// StoreLog stores l, fsyncing now and then.
func (r *rareSync) StoreLog(l *raft.Log) error { return r.StoreLogs([]*raft.Log{l}) }

// StoreLogs stores logs, fsyncing now and then.
func (r *rareSync) StoreLogs(logs []*raft.Log) error {
	if err := r.LogStore.StoreLogs(logs); err != nil {
		return err
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	r.writes++
	if r.writes%r.every != 0 {
		return nil
	}
	if err := r.sync(); err != nil {
		return fmt.Errorf("fsync the log store: %w", err)
	}
	return nil
}
