package raftnode

import (
	"bytes"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/hashicorp/raft"
	raftboltdb "github.com/hashicorp/raft-boltdb/v2"
	raftwal "github.com/hashicorp/raft-wal"
	"github.com/hashicorp/raft-wal/metadb"
	"go.etcd.io/bbolt"

	"github.com/lockd/lockd/fsm"
	"github.com/lockd/lockd/lockstate"
)

// A cluster with its log in raft-wal commits, keeps its log there (not in
// raft.db) and a restarted node comes back with it.
func TestWALCluster(t *testing.T) {
	c := newTestCluster(t, 3, func(cfg *Config) { cfg.LogStore = LogWAL })
	leader := c.leader()
	s := createSession(t, leader.get(), time.Minute)
	for i := range 20 {
		acquire(t, leader.get(), s, "job/"+string(rune('a'+i)), "job-"+string(rune('a'+i)), 0, 0)
	}
	follower := c.followers(leader)[0]
	index := c.converged()
	follower.stop()
	for _, tn := range c.nodes {
		segments, _ := filepath.Glob(filepath.Join(tn.dir, walDir, "*.wal"))
		if len(segments) == 0 {
			t.Fatalf("%s: no raft-wal segment in %s", tn.id, filepath.Join(tn.dir, walDir))
		}
	}
	follower.start()
	waitFor(t, 10*time.Second, "the restarted node to apply its log", func() bool {
		return follower.get().FSM().AppliedIndex() >= index
	})
	if !hasSession(follower.get(), s) {
		t.Fatal("the restarted node lost the session")
	}
	if last, err := follower.get().bolt.LastIndex(); err != nil || last != 0 {
		t.Fatalf("raft.db holds log entries up to %d (%v); the log belongs in wal/", last, err)
	}
	acquire(t, follower.get(), s, "job/after", "job-after", 0, 0) // still commits, through the restarted follower
}

// A data dir keeps its log store: a new one gets raft-wal unless bolt is
// asked for, one with a raft.db from before (no record, no wal/) keeps
// bolt, the store is recorded in raft.db, and opening a data dir with the
// other store, or an unknown name, is refused and changes nothing.
func TestLogStoreKept(t *testing.T) {
	oldBolt := func(t *testing.T, dir string) { writeRaftDB(t, dir, testDir) }
	made := func(store string) func(t *testing.T, dir string) {
		return func(t *testing.T, dir string) {
			if err := openNodeWith(t, dir, store); err != nil {
				t.Fatalf("make the data dir with %q: %v", store, err)
			}
		}
	}
	tests := []struct {
		name    string
		setup   func(t *testing.T, dir string)
		store   string
		want    string // the store the node opened with, or "" if refused
		refusal string // in the error when refused
	}{
		{"new dir, default", nil, "", LogWAL, ""},
		{"new dir, wal", nil, LogWAL, LogWAL, ""},
		{"new dir, bolt", nil, LogBolt, LogBolt, ""},
		{"old bolt dir, default", oldBolt, "", LogBolt, ""},
		{"old bolt dir, bolt", oldBolt, LogBolt, LogBolt, ""},
		{"old bolt dir, wal", oldBolt, LogWAL, "", "--raft-log bolt"},
		{"bolt dir, default", made(LogBolt), "", LogBolt, ""},
		{"bolt dir, wal", made(LogBolt), LogWAL, "", "--raft-log bolt"},
		{"wal dir, default", made(""), "", LogWAL, ""},
		{"wal dir, bolt", made(""), LogBolt, "", "--raft-log wal"},
		{"wal dir lost its wal/", func(t *testing.T, dir string) {
			made("")(t, dir)
			if err := os.RemoveAll(filepath.Join(dir, walDir)); err != nil {
				t.Fatal(err)
			}
		}, "", "", "which is missing"},
		{"unknown store", nil, "lsm", "", `unknown log store "lsm"`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			dir := t.TempDir()
			if tt.setup != nil {
				tt.setup(t, dir)
			}
			_, walBefore := os.Stat(filepath.Join(dir, walDir))
			err := openNodeWith(t, dir, tt.store)
			_, walAfter := os.Stat(filepath.Join(dir, walDir))
			switch {
			case tt.want == "" && (err == nil || !strings.Contains(err.Error(), tt.refusal)):
				t.Fatalf("opened with %q: %v, want a refusal saying %q", tt.store, err, tt.refusal)
			case tt.want == "" && (walBefore == nil) != (walAfter == nil):
				t.Fatal("the refused open added or removed the wal dir")
			case tt.want != "" && err != nil:
				t.Fatalf("opened with %q: %v", tt.store, err)
			case tt.want != "" && (walAfter == nil) != (tt.want == LogWAL):
				t.Fatalf("opened with %q: wal dir there: %v, want the %s store", tt.store, walAfter == nil, tt.want)
			}
			if tt.want != "" && recordedStore(t, dir) != tt.want {
				t.Fatalf("raft.db records %q, want %q", recordedStore(t, dir), tt.want)
			}
		})
	}
}

// recordedStore is the log store raft.db records for dir.
func recordedStore(t *testing.T, dir string) string {
	t.Helper()
	b, err := raftboltdb.New(raftboltdb.Options{Path: filepath.Join(dir, boltFile)})
	if err != nil {
		t.Fatal(err)
	}
	defer b.Close()
	v, err := b.Get([]byte(logStoreKey))
	if err != nil {
		t.Fatalf("read the record: %v", err)
	}
	return string(v)
}

// walMarker is in the name of the session writeWALDir's marked entry
// creates, so that a test can find the entry in a segment file.
const walMarker = "the-marked-session"

// writeWALDir writes the data dir of a raft-wal node that has run: raft.db
// with the term, vote and store record, and a raft-wal log of entries
// real commands (each in its CRC-32C envelope) in segments of segSize
// bytes, so that all but the last are sealed. Entry marked creates a
// session named walMarker.
func writeWALDir(t *testing.T, dir string, entries, marked, segSize int) {
	t.Helper()
	b, err := raftboltdb.New(raftboltdb.Options{Path: filepath.Join(dir, boltFile)})
	if err != nil {
		t.Fatal(err)
	}
	for k, v := range map[string]uint64{"CurrentTerm": 3, "LastVoteTerm": 3} {
		if err := b.SetUint64([]byte(k), v); err != nil {
			t.Fatal(err)
		}
	}
	if err := errors.Join(b.Set([]byte("LastVoteCand"), []byte("n2")), b.Set([]byte(logStoreKey), []byte(LogWAL)), b.Close()); err != nil {
		t.Fatal(err)
	}
	if err := os.Mkdir(filepath.Join(dir, walDir), 0o750); err != nil {
		t.Fatal(err)
	}
	meta := &metadb.BoltMetaDB{}
	w, err := raftwal.Open(filepath.Join(dir, walDir), raftwal.WithMetaStore(meta), raftwal.WithSegmentSize(segSize))
	if err != nil {
		t.Fatal(err)
	}
	for i := 1; i <= entries; i++ {
		name := fmt.Sprintf("session-%d", i)
		if i == marked {
			name = walMarker
		}
		data, err := fsm.Encode(int64(i), &lockstate.CreateSession{Name: name, TTL: time.Minute})
		if err != nil {
			t.Fatal(err)
		}
		// One entry a batch: raft-wal's commit frame and CRC per entry.
		if err := w.StoreLog(&raft.Log{Index: uint64(i), Term: 3, Type: raft.LogCommand, Data: data}); err != nil {
			t.Fatal(err)
		}
	}
	if err := errors.Join(w.Close(), meta.Close()); err != nil {
		t.Fatal(err)
	}
}

// walSegments returns the segment files of dir's raft-wal log, oldest
// first (their names sort so).
func walSegments(t *testing.T, dir string) []string {
	t.Helper()
	segs, err := filepath.Glob(filepath.Join(dir, walDir, "*.wal"))
	if err != nil || len(segs) < 3 {
		t.Fatalf("%d segments (%v): the test needs sealed ones", len(segs), err)
	}
	return segs
}

// TestOpenDamagedWAL damages a raft-wal log in the ways a disk or an
// operator can, and starts a node on each: every start must fail with an
// error that names the wal dir, says what it found and gives the remedy,
// never panic. raft-wal checks a CRC only on the batches it recovers at
// the tail; a changed byte in a sealed segment is found by the CRC-32C of
// lockd's own envelope.
func TestOpenDamagedWAL(t *testing.T) {
	const entries, marked, segSize = 300, 40, 8 << 10
	tests := []struct {
		name   string
		damage func(t *testing.T, dir string)
		found  string // what the error must say it found
	}{
		{"a changed byte in a sealed segment", func(t *testing.T, dir string) {
			for _, seg := range walSegments(t, dir) {
				b, err := os.ReadFile(seg)
				if err != nil {
					t.Fatal(err)
				}
				if i := bytes.Index(b, []byte(walMarker)); i >= 0 {
					b[i] ^= 0x20
					if err := os.WriteFile(seg, b, 0o600); err != nil {
						t.Fatal(err)
					}
					return
				}
			}
			t.Fatal("no segment holds the marked entry")
		}, "CRC-32C"},
		{"a sealed segment cut short", func(t *testing.T, dir string) {
			seg := walSegments(t, dir)[1]
			info, err := os.Stat(seg)
			if err != nil {
				t.Fatal(err)
			}
			if err := os.Truncate(seg, info.Size()/2); err != nil {
				t.Fatal(err)
			}
		}, "segment index"},
		{"a sealed segment missing", func(t *testing.T, dir string) {
			if err := os.Remove(walSegments(t, dir)[1]); err != nil {
				t.Fatal(err)
			}
		}, "raft-wal"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			dir := t.TempDir()
			writeWALDir(t, dir, entries, marked, segSize)
			tt.damage(t, dir)
			err := openNode(t, dir)
			if err == nil {
				t.Fatal("the node started")
			}
			for _, want := range []string{filepath.Join(dir, walDir) + " is damaged", tt.found, "DELETE /v1/members/n1", "move its data dir away"} {
				if !strings.Contains(err.Error(), want) {
					t.Fatalf("error lacks %q:\n%v", want, err)
				}
			}
		})
	}
}

// A follower's log loses its last entries (raft clears a follower's log
// suffix when the leader's log differs, or a candidate's), and the node
// restarts, twice: it starts every time, with the log up to the cut.
// hashicorp/raft-wal#31: raft-wal before v0.4.1 marked the cut segment
// sealed without writing its index block, and every start after it
// panicked "sealed segment has no index block".
func TestWALTailTruncationRestart(t *testing.T) {
	const entries, segSize = 300, 8 << 10
	for _, cut := range []uint64{entries, entries - 2} { // in the open tail segment
		t.Run(fmt.Sprint(cut), func(t *testing.T) { walTailTruncation(t, entries, cut, segSize) })
	}
}

func walTailTruncation(t *testing.T, entries int, cut uint64, segSize int) {
	dir := t.TempDir()
	writeWALDir(t, dir, entries, 0, segSize)
	walSegments(t, dir)
	lastIndex := func(truncate bool) uint64 {
		meta := &metadb.BoltMetaDB{}
		w, err := raftwal.Open(filepath.Join(dir, walDir), raftwal.WithMetaStore(meta), raftwal.WithSegmentSize(segSize))
		if err != nil {
			t.Fatal(err)
		}
		if truncate {
			err = w.DeleteRange(cut, uint64(entries))
		}
		last, lerr := w.LastIndex()
		if err := errors.Join(err, lerr, w.Close(), meta.Close()); err != nil {
			t.Fatal(err)
		}
		return last
	}
	lastIndex(true)
	for i := range 2 {
		if err := openNode(t, dir); err != nil {
			t.Fatalf("start %d after the truncation: %v", i+1, err)
		}
	}
	if last := lastIndex(false); last != cut-1 {
		t.Fatalf("the log ends at %d after the restarts, want %d", last, cut-1)
	}
}

// TestOpenHealthyWAL: writeWALDir's data dir, undamaged, starts.
func TestOpenHealthyWAL(t *testing.T) {
	dir := t.TempDir()
	writeWALDir(t, dir, 300, 40, 8<<10)
	walSegments(t, dir)
	if err := openNode(t, dir); err != nil {
		t.Fatal(err)
	}
}

// A cluster made with bolt by a build from before the store was recorded
// (its raft.db holds no record, and no wal/ is there) restarts, every node
// at once, on this build with no --raft-log: each keeps its log in bolt,
// records it, and the cluster comes back with its table and commits.
func TestUpgradeFromBoltCluster(t *testing.T) {
	store := LogBolt
	c := newTestCluster(t, 3, func(cfg *Config) { cfg.LogStore = store })
	leader := c.leader()
	s := createSession(t, leader.get(), time.Minute)
	for i := range 10 { // request ids: a proposal that meets an election is retried
		acquire(t, leader.get(), s, fmt.Sprintf("job/%d", i), fmt.Sprintf("r%d", i), 0, 0)
	}
	c.converged()
	for _, tn := range c.nodes {
		tn.stop()
		b, err := bbolt.Open(filepath.Join(tn.dir, boltFile), 0o600, &bbolt.Options{Timeout: time.Second})
		if err != nil {
			t.Fatal(err)
		}
		// The older build's raft.db: the log and the stable store, no record.
		err = b.Update(func(tx *bbolt.Tx) error { return tx.Bucket([]byte("conf")).Delete([]byte(logStoreKey)) })
		if err := errors.Join(err, b.Close()); err != nil {
			t.Fatal(err)
		}
	}
	store = ""
	for _, tn := range c.nodes {
		tn.start()
	}
	c.converged()
	leader = c.leader()
	acquire(t, leader.get(), s, "job/after", "after", 0, 0)
	c.converged()
	for _, tn := range c.nodes {
		if !hasSession(tn.get(), s) {
			t.Fatalf("%s lost the session", tn.id)
		}
		if tn.get().wal != nil {
			t.Fatalf("%s opened raft-wal on a bolt data dir", tn.id)
		}
		if last, err := tn.get().bolt.LastIndex(); err != nil || last == 0 {
			t.Fatalf("%s: raft.db holds no log (%d, %v)", tn.id, last, err)
		}
		if v, err := tn.get().bolt.Get([]byte(logStoreKey)); err != nil || string(v) != LogBolt {
			t.Fatalf("%s records %q (%v), want bolt", tn.id, v, err)
		}
	}
}
