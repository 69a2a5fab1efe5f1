package raftnode

import (
	"errors"
	"testing"
	"time"
)

// TestBoundedShutdown guards bug 14 of docs/jepsen.md: a raft Shutdown
// that never returns (hashicorp/raft#612's deadlock) must not keep the
// node up half shut down; the caller gets errRaftHung and exits.
func TestBoundedShutdown(t *testing.T) {
	release := make(chan struct{})
	defer close(release)
	hangs := func() error { <-release; return nil }
	if err := boundedShutdown(10*time.Millisecond, hangs); !errors.Is(err, errRaftHung) {
		t.Errorf("a shutdown that hangs: %v, want errRaftHung", err)
	}
	if err := boundedShutdown(time.Minute, func() error { return nil }); err != nil {
		t.Errorf("a shutdown that returns: %v", err)
	}
	failed := errors.New("boom")
	if err := boundedShutdown(time.Minute, func() error { return failed }); !errors.Is(err, failed) || errors.Is(err, errRaftHung) {
		t.Errorf("a shutdown that fails: %v, want it wrapped", err)
	}
}
