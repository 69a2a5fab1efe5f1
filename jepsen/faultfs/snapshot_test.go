package faultfs_test

import (
	"bytes"
	"fmt"
	"io"
	"path/filepath"
	"slices"
	"testing"

	"github.com/hashicorp/raft"

	"github.com/lockd/lockd/jepsen/faultfs/faultfstest"
)

// snapshots runs hashicorp/raft's FileSnapshotStore on a mirror, keeping
// one snapshot, as a node writes them: mkdir <id>.tmp, meta.json and
// state.bin written and fsynced there, the directory renamed <id>, its
// parent fsynced, older snapshots removed (os.RemoveAll).
type snapshots struct {
	t     *testing.T
	dir   string
	store *raft.FileSnapshotStore
	ids   map[string]int // snapshot number by raft's id
}

// newSnapshots opens the store in dir and fsyncs dir, as lockd does
// with its data dir: the store's snapshots/ is durable.
func newSnapshots(t *testing.T, dir string) *snapshots {
	s := &snapshots{t: t, dir: dir, ids: map[string]int{}}
	s.store = s.open()
	syncDir(t, dir)
	return s
}

func (s *snapshots) open() *raft.FileSnapshotStore {
	s.t.Helper()
	store, err := raft.NewFileSnapshotStore(s.dir, 1, io.Discard)
	if err != nil {
		s.t.Fatal(err)
	}
	return store
}

// data is snapshot i's state, over three pages.
func data(i int) []byte { return bytes.Repeat([]byte(fmt.Sprintf("snapshot %d;", i)), 1500) }

// create starts snapshot i and writes its state, not closed.
func (s *snapshots) create(i int) raft.SnapshotSink {
	s.t.Helper()
	sink, err := s.store.Create(raft.SnapshotVersionMax, uint64(10*i), 1, raft.Configuration{}, 1, nil)
	if err != nil {
		s.t.Fatal(err)
	}
	s.ids[sink.ID()] = i
	if _, err := sink.Write(data(i)); err != nil {
		s.t.Fatal(err)
	}
	return sink
}

// take writes snapshot i whole: raft's Close renames it into place,
// fsyncs the parent and reaps the older ones.
func (s *snapshots) take(i int) {
	s.t.Helper()
	if err := s.create(i).Close(); err != nil {
		s.t.Fatal(err)
	}
}

// sync fsyncs snapshot i's own directory, which raft does not.
func (s *snapshots) sync(i int) {
	for id, n := range s.ids {
		if n == i {
			syncDir(s.t, filepath.Join(s.dir, "snapshots", id))
		}
	}
}

// listed opens the store again, as a node restarting, and returns the
// snapshots it lists; each must open with every byte written.
func (s *snapshots) listed() []int {
	s.t.Helper()
	store := s.open()
	metas, err := store.List()
	if err != nil {
		s.t.Fatalf("list after the power loss: %v", err)
	}
	var got []int
	for _, m := range metas {
		i := s.ids[m.ID]
		got = append(got, i)
		_, rc, err := store.Open(m.ID)
		if err != nil {
			s.t.Errorf("snapshot %d is listed, but: %v", i, err)
			continue
		}
		b, err := io.ReadAll(rc)
		rc.Close()
		if err != nil || !bytes.Equal(b, data(i)) {
			s.t.Errorf("snapshot %d opened with %d bytes (%v), not the %d written", i, len(b), err, len(data(i)))
		}
	}
	return got
}

// TestRaftSnapshotAcrossPowerLoss loses power at each step of raft's
// snapshot: the power loss applies in full, and the store lists only
// snapshots whose every byte, and name, was durable. Raft fsyncs each
// file and the parent after the rename, never the snapshot's own
// directory: its files' names are durable only once that is fsynced too
// (fsync(2): "an explicit fsync() on a file descriptor for the directory
// is also needed"), which lockd's raftnode does after each Close.
func TestRaftSnapshotAcrossPowerLoss(t *testing.T) {
	tests := []struct {
		name  string
		steps func(s *snapshots)
		want  []int
	}{
		{"before the rename", func(s *snapshots) {
			sink := s.create(1)
			s.t.Cleanup(func() { _ = sink.Cancel() }) // before the unmount: it holds state.bin open
		}, nil},
		{"after the rename and the parent's fsync", func(s *snapshots) { s.take(1) }, nil},
		{"after the snapshot's directory fsynced", func(s *snapshots) { s.take(1); s.sync(1) }, []int{1}},
		{"after reaping an older snapshot", func(s *snapshots) { s.take(1); s.sync(1); s.take(2) }, []int{1}},
		{"after reaping, the new snapshot's directory fsynced", func(s *snapshots) {
			s.take(1)
			s.sync(1)
			s.take(2)
			s.sync(2)
		}, []int{2}},
		{"after reaping, the reap made durable", func(s *snapshots) {
			s.take(1)
			s.sync(1)
			s.take(2)
			s.sync(2)
			syncDir(s.t, filepath.Join(s.dir, "snapshots"))
		}, []int{2}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			f, dir := faultfstest.MountTemp(t)
			s := newSnapshots(t, dir)
			tt.steps(s)
			powerLoss(t, f)
			if got := s.listed(); !slices.Equal(got, tt.want) {
				t.Errorf("snapshots listed after the power loss: %v, want %v", got, tt.want)
			}
		})
	}
}
