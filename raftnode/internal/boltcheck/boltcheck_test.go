package boltcheck

import (
	"bytes"
	"errors"
	"math/rand/v2"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/hashicorp/raft"
	raftboltdb "github.com/hashicorp/raft-boltdb/v2"
	"go.etcd.io/bbolt"
)

// logFile describes the raft.db writeRaftDB writes.
type logFile struct {
	entries   int // log entries 1 to entries
	size      int // bytes of each entry's payload
	compacted int // entries 1 to compacted deleted, as raft does after a snapshot
	// syncFreelist writes bolt's freelist, as lockd does not: a raft.db
	// written by another tool, or by an older lockd.
	syncFreelist bool
}

// testLog is the raft.db most tests use: a log of 1001 to 3000, in a file
// with free pages from the compaction.
var testLog = logFile{entries: 3000, size: 200, compacted: 1000}

// writeRaftDB writes a raft.db in dir with a real raft-boltdb store, as a
// node that has run leaves it: l's log and the stable store's term and
// vote. It returns the file's path.
func writeRaftDB(t *testing.T, dir string, l logFile) string {
	t.Helper()
	path := filepath.Join(dir, "raft.db")
	s, err := raftboltdb.New(raftboltdb.Options{Path: path, BoltOptions: &bbolt.Options{NoFreelistSync: !l.syncFreelist}})
	if err != nil {
		t.Fatal(err)
	}
	data := bytes.Repeat([]byte("lockd"), l.size/5+1)[:l.size]
	batch := make([]*raft.Log, 0, 256)
	for i := 1; i <= l.entries; i++ {
		batch = append(batch, &raft.Log{Index: uint64(i), Term: 3, Type: raft.LogCommand, Data: data, AppendedAt: time.Unix(0, 0)})
		if len(batch) == cap(batch) || i == l.entries {
			if err := s.StoreLogs(batch); err != nil {
				t.Fatal(err)
			}
			batch = batch[:0]
		}
	}
	if l.compacted > 0 {
		if err := s.DeleteRange(1, uint64(l.compacted)); err != nil {
			t.Fatal(err)
		}
	}
	if err := errors.Join(s.SetUint64([]byte("CurrentTerm"), 3), s.Set([]byte("LastVoteCand"), []byte("n2")), s.Close()); err != nil {
		t.Fatal(err)
	}
	return path
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

// TestCheckHealthy: a missing raft.db is a new node, and a real one
// passes, read page by page.
func TestCheckHealthy(t *testing.T) {
	dir := t.TempDir()
	if pages, err := Check(filepath.Join(dir, "raft.db")); pages != 0 || err != nil {
		t.Fatalf("missing file: %d pages, %v", pages, err)
	}
	path := writeRaftDB(t, dir, testLog)
	pages, err := Check(path)
	if err != nil {
		t.Fatal(err)
	}
	_, used, _ := boltLayout(t, path)
	if pages < len(used) {
		t.Fatalf("%d pages read, the trees use %d", pages, len(used))
	}
	info, _ := os.Stat(path)
	t.Logf("%d of %d pages read", pages, info.Size()/4096)
}

// TestCheckFreelist: a raft.db with bolt's freelist written passes, and
// one whose freelist lists a page in use does not (bolt would hand that
// page out again and overwrite live data).
func TestCheckFreelist(t *testing.T) {
	l := testLog
	l.syncFreelist = true
	path := writeRaftDB(t, t.TempDir(), l)
	if _, err := Check(path); err != nil {
		t.Fatal(err)
	}
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	c := checker{f: bytes.NewReader(b)}
	m, err := c.meta(int64(len(b)))
	if err != nil || m.freelist == noFreelist {
		t.Fatalf("meta %+v, %v: no freelist", m, err)
	}
	fl := int(m.freelist) * int(m.pageSize)
	if ne.Uint16(b[fl+10:]) == 0 {
		t.Fatal("the freelist is empty: compaction freed nothing")
	}
	ne.PutUint64(b[fl+pageHeader:], m.root) // the first free page is now the root bucket's
	if err := os.WriteFile(path, b, 0o600); err != nil {
		t.Fatal(err)
	}
	if _, err := Check(path); err == nil || !strings.Contains(err.Error(), "the freelist holds page") {
		t.Fatalf("freelist listing the root: %v", err)
	}
}

// damagedCopies returns copies of the raft.db good (laid out as
// boltLayout says) damaged in the ways an attacker or a failing disk would
// (bytes changed, the file cut) and more, by name.
func damagedCopies(t *testing.T, good []byte, ps int, used, leaves []int) map[string][]byte {
	t.Helper()
	r := rand.New(rand.NewPCG(10, 10))
	garbage := func(b []byte, off, n int) []byte {
		for i := range n {
			b[off+i] = byte(r.Uint32())
		}
		return b
	}
	flip := func(b []byte, off int) []byte { b[off] ^= 0xff; return b }
	root, mid, last := used[0], used[len(used)/2], used[len(used)-1]
	meta, ok := parseMeta(good)
	if !ok {
		t.Fatal("meta page 0 is not valid")
	}
	high := meta.high // the file is larger: bolt grows it ahead
	// The last byte of the second key on a leaf of the log: an index.
	leaf := leaves[len(leaves)/2] * ps
	key := leaf + 16 + 16 + int(ne.Uint32(good[leaf+16+16+4:])) + 7
	return map[string][]byte{
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
	}
}

// TestCheckDamaged checks damaged copies of a real raft.db: each must be
// reported as damaged, naming the file. Without the check, bolt opens the
// empty file (a new log: the node's term and vote forgotten) and the one
// cut inside a page (bolt does not mind, but the file was cut), refuses
// the ones with bad meta pages, and every other copy kills the process: a
// fault reading past the end of the file, an assertion or consistency
// panic in bolt, or raft's panic on an entry it cannot read.
func TestCheckDamaged(t *testing.T) {
	src := writeRaftDB(t, t.TempDir(), testLog)
	good, err := os.ReadFile(src)
	if err != nil {
		t.Fatal(err)
	}
	ps, used, leaves := boltLayout(t, src)
	if len(used) < 20 {
		t.Fatalf("%d pages in use: the test file is too small", len(used))
	}
	for name, b := range damagedCopies(t, good, ps, used, leaves) {
		t.Run(name, func(t *testing.T) {
			path := filepath.Join(t.TempDir(), "raft.db")
			if err := os.WriteFile(path, b, 0o600); err != nil {
				t.Fatal(err)
			}
			_, err := Check(path)
			var d *DamagedError
			if !errors.As(err, &d) || d.Path != path || !strings.HasPrefix(err.Error(), path+" is damaged: ") {
				t.Fatalf("want %s reported damaged, got %v", path, err)
			}
		})
	}
}

// TestCheckEveryPage damages each page in use in turn, its header and
// then all of it: the check must refuse every copy, and return rather
// than crash.
func TestCheckEveryPage(t *testing.T) {
	path := writeRaftDB(t, t.TempDir(), logFile{entries: 1000, size: 200})
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
			if _, err := Check(path); err == nil || !strings.Contains(err.Error(), "is damaged") {
				t.Fatalf("page %d, byte %d: %v", id, off, err)
			}
		}
		if _, err := f.WriteAt(page, int64(id*ps)); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := Check(path); err != nil {
		t.Fatalf("restored file: %v", err)
	}
	t.Logf("%d pages in use, each damaged 5 ways", len(used))
}

// TestCheckLocked: a raft.db another process holds is reported as
// locked, not as damaged.
func TestCheckLocked(t *testing.T) {
	path := writeRaftDB(t, t.TempDir(), logFile{entries: 10, size: 10})
	s, err := raftboltdb.New(raftboltdb.Options{Path: path})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	_, err = Check(path)
	var d *DamagedError
	if err == nil || errors.As(err, &d) || !strings.Contains(err.Error(), "another process") {
		t.Fatalf("check of a locked file: %v", err)
	}
}
