package raftnode

import (
	"fmt"
	"path/filepath"

	"github.com/hashicorp/go-hclog"
	"github.com/hashicorp/raft"
)

// snapshotsDir is where raft's FileSnapshotStore keeps the snapshots of a
// data dir, one directory each.
const snapshotsDir = "snapshots"

// durableSnapshots is raft's FileSnapshotStore whose snapshots are
// durable, names and all, when their sink's Close returns, before raft
// compacts the log up to them. Raft fsyncs a snapshot's files and, once
// it renamed their directory <id>.tmp to <id>, the snapshots directory;
// never <id> itself, which holds the files' names (fsync(2): an fsync of
// a file does not make its entry in the directory durable). A power loss
// could leave an empty <id>, which raft skips, and a log that no longer
// starts where a snapshot ends: the node could not start.
type durableSnapshots struct {
	*raft.FileSnapshotStore
	dir string // the snapshots directory
}

// openSnapshots opens the snapshot store of dataDir, keeping retain
// snapshots.
func openSnapshots(dataDir string, retain int, logger hclog.Logger) (*durableSnapshots, error) {
	store, err := raft.NewFileSnapshotStoreWithLogger(dataDir, retain, logger)
	if err != nil {
		return nil, err
	}
	return &durableSnapshots{FileSnapshotStore: store, dir: filepath.Join(dataDir, snapshotsDir)}, nil
}

// Create starts a snapshot whose Close makes it durable.
func (s *durableSnapshots) Create(version raft.SnapshotVersion, index, term uint64, configuration raft.Configuration,
	configurationIndex uint64, trans raft.Transport) (raft.SnapshotSink, error) {
	sink, err := s.FileSnapshotStore.Create(version, index, term, configuration, configurationIndex, trans)
	if err != nil {
		return nil, err
	}
	return &durableSink{SnapshotSink: sink, dir: filepath.Join(s.dir, sink.ID())}, nil
}

// durableSink is a snapshot being written, in dir once closed.
type durableSink struct {
	raft.SnapshotSink
	dir string
}

// Close finishes the snapshot as raft does, then fsyncs its directory.
func (s *durableSink) Close() error {
	if err := s.SnapshotSink.Close(); err != nil {
		return err
	}
	if err := syncDir(s.dir); err != nil {
		return fmt.Errorf("raftnode: snapshot %s: %w", s.ID(), err)
	}
	return nil
}
