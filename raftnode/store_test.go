package raftnode

import (
	"bytes"
	"context"
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/hashicorp/raft"
	raftboltdb "github.com/hashicorp/raft-boltdb/v2"
	"go.etcd.io/bbolt"

	"github.com/lockd/lockd/fsm"
	"github.com/lockd/lockd/raftnode/internal/boltcheck"
)

// marked is the entry writeRaftDB gives a payload of its own, so that a
// test can find it in the file.
const (
	marked = 2500
	marker = "the marked entry"
)

// dataDir describes the data dir writeRaftDB writes.
type dataDir struct {
	entries   int    // log entries 1 to entries
	size      int    // bytes of each entry's payload
	snapshot  uint64 // a snapshot at this index, if not 0
	compacted int    // entries 1 to compacted deleted, as raft does after a snapshot
	// syncFreelist writes bolt's freelist, as openStores does not: a
	// raft.db written by another tool, or by an older lockd.
	syncFreelist bool
}

// the data dir most tests use: the log holds 1001 to 3000, the snapshot
// is at 2000.
var testDir = dataDir{entries: 3000, size: 200, snapshot: 2000, compacted: 1000}

// writeRaftDB writes the data dir of a node that has run: a raft.db
// written by a real raft-boltdb store, opened as openStores opens it,
// with d's log (compaction leaves free pages in the file) and the stable
// store's term and vote, and d's snapshot. It returns the raft.db's path.
func writeRaftDB(t testing.TB, dir string, d dataDir) string {
	t.Helper()
	path := filepath.Join(dir, boltFile)
	s, err := raftboltdb.New(raftboltdb.Options{Path: path, BoltOptions: &bbolt.Options{NoFreelistSync: !d.syncFreelist}})
	if err != nil {
		t.Fatal(err)
	}
	data := bytes.Repeat([]byte("lockd"), d.size/5+1)[:d.size]
	batch := make([]*raft.Log, 0, 256)
	for i := 1; i <= d.entries; i++ {
		l := &raft.Log{Index: uint64(i), Term: 3, Type: raft.LogCommand, Data: data, AppendedAt: time.Unix(0, 0)}
		if i == marked {
			l.Data = []byte(marker)
		}
		if batch = append(batch, l); len(batch) == cap(batch) || i == d.entries {
			if err := s.StoreLogs(batch); err != nil {
				t.Fatal(err)
			}
			batch = batch[:0]
		}
	}
	if d.snapshot > 0 {
		writeSnapshot(t, dir, d.snapshot)
	}
	if d.compacted > 0 {
		if err := s.DeleteRange(1, uint64(d.compacted)); err != nil {
			t.Fatal(err)
		}
	}
	for k, v := range map[string]uint64{"CurrentTerm": 3, "LastVoteTerm": 3} {
		if err := s.SetUint64([]byte(k), v); err != nil {
			t.Fatal(err)
		}
	}
	if err := s.Set([]byte("LastVoteCand"), []byte("n2")); err != nil {
		t.Fatal(err)
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	return path
}

// writeSnapshot stores a snapshot of an empty table at index in dir's
// snapshot store, as raft does.
func writeSnapshot(t testing.TB, dir string, index uint64) {
	t.Helper()
	store, err := raft.NewFileSnapshotStore(dir, snapshotsRetain, io.Discard)
	if err != nil {
		t.Fatal(err)
	}
	sink, err := store.Create(raft.SnapshotVersionMax, index, 3, raft.Configuration{}, 1, nil)
	if err != nil {
		t.Fatal(err)
	}
	snap, err := fsm.New(fsm.Config{}).Snapshot()
	if err != nil {
		t.Fatal(err)
	}
	if err := snap.Persist(sink); err != nil {
		t.Fatal(err)
	}
}

// openNode starts a node on dir as lockd does, and stops it again.
func openNode(t *testing.T, dir string) error {
	t.Helper()
	return openNodeWith(t, dir, "")
}

// openNodeWith is openNode with the log in store (Config.LogStore).
func openNodeWith(t *testing.T, dir, store string) error {
	t.Helper()
	n, err := Open(Config{ID: "n1", DataDir: dir, RaftBind: "127.0.0.1:0", Timing: testTiming, Logger: testLogger(t, "n1"), LogStore: store})
	if err != nil {
		return err
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if err := n.Shutdown(ctx); err != nil {
		t.Fatalf("shutdown: %v", err)
	}
	return nil
}

// TestOpenHealthyBoltFile: a node starts on a real raft.db, and the file
// it leaves behind passes the check.
func TestOpenHealthyBoltFile(t *testing.T) {
	dir := t.TempDir()
	path := writeRaftDB(t, dir, testDir)
	if err := openNode(t, dir); err != nil {
		t.Fatal(err)
	}
	if _, err := boltcheck.Check(path); err != nil {
		t.Fatalf("after the node ran: %v", err)
	}
}

// TestOpenDamagedBoltFile starts a node on damaged copies of a real
// raft.db, one for each check that reads it at startup: every start must
// fail with an error that names the file and the remedy. (boltcheck's
// tests damage the file in many more ways.) Without the checks, the node
// starts on the empty file (a new log: its term and vote forgotten) and on
// the one cut inside a page, and raft panics on the entry it cannot
// decode.
func TestOpenDamagedBoltFile(t *testing.T) {
	src := writeRaftDB(t, t.TempDir(), testDir)
	good, err := os.ReadFile(src)
	if err != nil {
		t.Fatal(err)
	}
	// The byte before the marked entry's payload: the length msgpack
	// gives it, which raft-boltdb's decoder then trips over.
	length := bytes.Index(good, []byte(marker)) - 1
	cases := map[string][]byte{
		"empty":                 nil,                  // boltcheck
		"cut inside a page":     good[:len(good)-100], // boltcheck
		"a log entry's framing": flip(good, length),   // checkLog
	}
	for name, b := range cases {
		t.Run(name, func(t *testing.T) {
			dir := t.TempDir()
			writeSnapshot(t, dir, testDir.snapshot)
			path := filepath.Join(dir, boltFile)
			if err := os.WriteFile(path, b, 0o600); err != nil {
				t.Fatal(err)
			}
			err := openNode(t, dir)
			if err == nil {
				t.Fatal("the node started")
			}
			for _, want := range []string{path + " is damaged", "DELETE /v1/members/n1", "move its data dir away"} {
				if !strings.Contains(err.Error(), want) {
					t.Fatalf("error lacks %q:\n%v", want, err)
				}
			}
		})
	}
}

// flip returns a copy of b with the byte at off inverted.
func flip(b []byte, off int) []byte {
	b = bytes.Clone(b)
	b[off] ^= 0xff
	return b
}

// TestOpenLogMissingEntries: a log compacted past the newest snapshot (here
// the snapshot is gone) lacks entries raft reads at startup; the node must
// say so instead of raft panicking with "log not found".
func TestOpenLogMissingEntries(t *testing.T) {
	dir := t.TempDir()
	writeRaftDB(t, dir, testDir)
	if err := os.RemoveAll(filepath.Join(dir, "snapshots")); err != nil {
		t.Fatal(err)
	}
	err := openNode(t, dir)
	if err == nil || !strings.Contains(err.Error(), "raft log entry 1, which raft reads at startup (the log holds 1001 to 3000): log not found") ||
		!strings.Contains(err.Error(), "DELETE /v1/members/n1") {
		t.Fatalf("start: %v", err)
	}
}

// BenchmarkStartupChecks measures the startup checks on the data dir of
// a node with raft's defaults and 200-byte entries (an acquire with a
// short name is about 80): the newest snapshot 8192 entries back, 10240
// entries kept before it, in a file that grew much larger before
// compaction. It reports each check beside what it duplicates: bolt's own
// open, which walks the same pages to rebuild its freelist, and the
// entries raft.NewRaft reads.
func BenchmarkStartupChecks(b *testing.B) {
	dir := b.TempDir()
	const entries = 200_000
	path := writeRaftDB(b, dir, dataDir{entries: entries, size: 200, snapshot: entries - 8192, compacted: entries - 8192 - 10240})
	info, _ := os.Stat(path)
	snaps, err := raft.NewFileSnapshotStore(dir, snapshotsRetain, io.Discard)
	if err != nil {
		b.Fatal(err)
	}
	var pages int
	var check, open, log time.Duration
	for b.Loop() {
		t0 := time.Now()
		n, err := boltcheck.Check(path)
		if err != nil {
			b.Fatal(err)
		}
		t1 := time.Now()
		s, err := raftboltdb.New(raftboltdb.Options{Path: path, BoltOptions: &bbolt.Options{NoFreelistSync: true}})
		if err != nil {
			b.Fatal(err)
		}
		t2 := time.Now()
		if _, err := checkLog(s, snaps); err != nil {
			b.Fatal(err)
		}
		t3 := time.Now()
		s.Close()
		pages = n
		check, open, log = check+t1.Sub(t0), open+t2.Sub(t1), log+t3.Sub(t2)
	}
	ms := func(d time.Duration) float64 { return d.Seconds() * 1e3 / float64(b.N) }
	b.ReportMetric(float64(info.Size())/1e6, "file-MB")
	b.ReportMetric(float64(pages), "pages-read")
	b.ReportMetric(ms(check), "check-file-ms")
	b.ReportMetric(ms(open), "bolt-open-ms")
	b.ReportMetric(ms(log), "check-log-ms")
}
