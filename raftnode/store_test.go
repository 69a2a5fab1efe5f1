package raftnode

import (
	"bytes"
	"context"
	"io"
	"math/rand/v2"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/hashicorp/raft"
	raftboltdb "github.com/hashicorp/raft-boltdb/v2"
	"go.etcd.io/bbolt"

	"github.com/lockd/lockd/fsm"
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

// TestCheckBoltFileHealthy: a missing raft.db is a new node, and a real
// one passes the check, and the node starts on it.
func TestCheckBoltFileHealthy(t *testing.T) {
	dir := t.TempDir()
	if pages, err := checkBoltFile(filepath.Join(dir, boltFile)); pages != 0 || err != nil {
		t.Fatalf("missing file: %d pages, %v", pages, err)
	}
	path := writeRaftDB(t, dir, testDir)
	pages, err := checkBoltFile(path)
	if err != nil {
		t.Fatal(err)
	}
	info, _ := os.Stat(path)
	t.Logf("%d of %d pages read", pages, info.Size()/4096)
	if err := openNode(t, dir); err != nil {
		t.Fatal(err)
	}
	// And on the file the node left behind.
	if _, err := checkBoltFile(path); err != nil {
		t.Fatalf("after the node ran: %v", err)
	}
}

// TestCheckBoltFileFreelist: a raft.db with bolt's freelist written passes,
// and one whose freelist lists a page in use does not (bolt would hand
// that page out again and overwrite live data).
func TestCheckBoltFileFreelist(t *testing.T) {
	d := testDir
	d.syncFreelist = true
	path := writeRaftDB(t, t.TempDir(), d)
	if _, err := checkBoltFile(path); err != nil {
		t.Fatal(err)
	}
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	c := boltCheck{f: bytes.NewReader(b)}
	m, err := c.meta(int64(len(b)))
	if err != nil || m.freelist == boltNoFreelist {
		t.Fatalf("meta %+v, %v: no freelist", m, err)
	}
	fl := int(m.freelist) * int(m.pageSize)
	if ne.Uint16(b[fl+10:]) == 0 {
		t.Fatal("the freelist is empty: compaction freed nothing")
	}
	ne.PutUint64(b[fl+boltPageHeader:], m.root) // the first free page is now the root bucket's
	if err := os.WriteFile(path, b, 0o600); err != nil {
		t.Fatal(err)
	}
	if _, err := checkBoltFile(path); err == nil || !strings.Contains(err.Error(), "the freelist holds page") {
		t.Fatalf("freelist listing the root: %v", err)
	}
}

// boltLayout returns the page size of the bolt file at path and the pages
// its trees use, found with bolt itself: all of them, and the leaves.
func boltLayout(t *testing.T, path string) (pageSize int, used, leaves []int) {
	t.Helper()
	db, err := bbolt.Open(path, 0o600, &bbolt.Options{Timeout: time.Second})
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	err = db.View(func(tx *bbolt.Tx) error {
		for id := 2; ; id++ {
			info, err := tx.Page(id)
			if err != nil || info == nil {
				return err
			}
			if info.Type == "branch" || info.Type == "leaf" {
				used = append(used, id)
			}
			if info.Type == "leaf" {
				leaves = append(leaves, id)
			}
		}
	})
	if err != nil {
		t.Fatal(err)
	}
	return db.Info().PageSize, used, leaves
}

// TestOpenDamagedBoltFile damages a real raft.db in the ways an attacker
// or a failing disk would (bytes changed, the file cut) and more, and starts a node on each copy: every start must
// fail with an error that names the file and the remedy. Without the
// checks, the node starts on the empty file (a new log: its term and vote
// forgotten) and on the one cut inside a page (bolt does not mind, but the
// file was cut), bolt refuses the ones with bad meta pages without naming
// the file, and every other copy kills the process: a fault reading past
// the end of the file, an assertion or consistency panic in bolt, or
// raft's panic on an entry it cannot read.
func TestOpenDamagedBoltFile(t *testing.T) {
	src := writeRaftDB(t, t.TempDir(), testDir)
	good, err := os.ReadFile(src)
	if err != nil {
		t.Fatal(err)
	}
	ps, used, leaves := boltLayout(t, src)
	if len(used) < 20 {
		t.Fatalf("%d pages in use: the test file is too small", len(used))
	}
	r := rand.New(rand.NewPCG(10, 10))
	garbage := func(b []byte, off, n int) []byte {
		for i := range n {
			b[off+i] = byte(r.Uint32())
		}
		return b
	}
	flip := func(b []byte, off int) []byte { b[off] ^= 0xff; return b }
	root, mid, last := used[0], used[len(used)/2], used[len(used)-1]
	meta, ok := parseBoltMeta(good)
	if !ok {
		t.Fatal("meta page 0 is not valid")
	}
	high := meta.high // the file is larger: bolt grows it ahead
	// The last byte of the second key on a leaf of the log: an index.
	leaf := leaves[len(leaves)/2] * ps
	key := leaf + 16 + 16 + int(ne.Uint32(good[leaf+16+16+4:])) + 7
	// The byte before the marked entry's payload: the length msgpack
	// gives it, which raft-boltdb's decoder then trips over.
	length := bytes.Index(good, []byte(marker)) - 1
	cases := map[string][]byte{
		"empty":                 nil,
		"cut to one page":       good[:ps],
		"cut to two pages":      good[:2*ps],
		"cut to half its pages": good[:int(high)/2*ps],
		"cut before its last":   good[:last*ps],
		"cut inside a page":     good[:len(good)-100],
		"meta pages garbage":    garbage(bytes.Clone(good), 0, 2*ps),
		"a page in use garbage": garbage(bytes.Clone(good), mid*ps, ps),
		"first page in use":     garbage(bytes.Clone(good), root*ps, ps),
		"a page's id":           flip(bytes.Clone(good), mid*ps),
		"a page's type":         flip(bytes.Clone(good), mid*ps+8),
		"a page's count":        flip(bytes.Clone(good), mid*ps+11),
		"a page's overflow":     flip(bytes.Clone(good), mid*ps+15),
		"a log index":           flip(bytes.Clone(good), key),
		"a log entry's framing": flip(bytes.Clone(good), length),
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

// TestCheckBoltFileEveryPage damages each page in use in turn, its header
// and then all of it: the check must refuse every copy, and return rather
// than crash.
func TestCheckBoltFileEveryPage(t *testing.T) {
	path := writeRaftDB(t, t.TempDir(), dataDir{entries: 1000, size: 200})
	good, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	ps, used, _ := boltLayout(t, path)
	f, err := os.OpenFile(path, os.O_RDWR, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	r := rand.New(rand.NewPCG(11, 11))
	for _, id := range used {
		page := good[id*ps : (id+1)*ps]
		for _, off := range []int{0, 8, 11, 15, -1} { // id, type, count's high byte, overflow's high byte, all of it
			bad := bytes.Clone(page)
			if off >= 0 {
				bad[off] ^= 0xff
			} else {
				for i := range bad {
					bad[i] = byte(r.Uint32())
				}
			}
			if _, err := f.WriteAt(bad, int64(id*ps)); err != nil {
				t.Fatal(err)
			}
			if _, err := checkBoltFile(path); err == nil || !strings.Contains(err.Error(), "is damaged") {
				t.Fatalf("page %d, byte %d: %v", id, off, err)
			}
		}
		if _, err := f.WriteAt(page, int64(id*ps)); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := checkBoltFile(path); err != nil {
		t.Fatalf("restored file: %v", err)
	}
	t.Logf("%d pages in use, each damaged 5 ways", len(used))
}

// TestCheckBoltFileLocked: a raft.db another process holds is reported as
// locked, not as damaged.
func TestCheckBoltFileLocked(t *testing.T) {
	path := writeRaftDB(t, t.TempDir(), dataDir{entries: 10, size: 10})
	s, err := raftboltdb.New(raftboltdb.Options{Path: path})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	_, err = checkBoltFile(path)
	if err == nil || strings.Contains(err.Error(), "damaged") || !strings.Contains(err.Error(), "another process") {
		t.Fatalf("check of a locked file: %v", err)
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
		n, err := checkBoltFile(path)
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
