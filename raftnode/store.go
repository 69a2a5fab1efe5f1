package raftnode

import (
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"hash/fnv"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"time"

	"github.com/hashicorp/go-hclog"
	"github.com/hashicorp/raft"
	raftboltdb "github.com/hashicorp/raft-boltdb/v2"
	raftwal "github.com/hashicorp/raft-wal"
	"github.com/hashicorp/raft-wal/metadb"
	"github.com/lockd/lockd/fsm"
	"go.etcd.io/bbolt"
)

// Log stores (Config.LogStore).
const (
	// LogBolt keeps raft's log in raft.db with the stable store: data dirs
	// made before raft-wal became the default, and those made with it.
	LogBolt = "bolt"
	// LogWAL keeps raft's log in raft-wal segment files under wal/ (one
	// fsync per batch of entries, bolt takes two); raft.db keeps only the
	// stable store (term and vote). The default for new data dirs.
	LogWAL = "wal"
)

const (
	walDir          = "wal"
	boltFile        = "raft.db"
	snapshotsRetain = 2
	logCacheSize    = 512
)

// timing is raft's timeouts scaled by Config.Timing, and the waits derived
// from them.
type timing struct {
	heartbeat, election, lease, commit time.Duration
	// leaderWait bounds how long a call waits for a leader to be found,
	// elected or ready before it gives up with ErrNoLeader.
	leaderWait time.Duration
	// retryMin and retryMax bound the backoff between such attempts.
	retryMin, retryMax time.Duration
}

func newTiming(scale float64) timing {
	if scale <= 0 {
		scale = 1
	}
	def := raft.DefaultConfig()
	scaled := func(d, floor time.Duration) time.Duration {
		return max(time.Duration(float64(d)*scale), floor)
	}
	t := timing{
		// raft refuses timeouts under 5ms; scaling keeps
		// lease <= heartbeat <= election as the defaults have it.
		heartbeat: scaled(def.HeartbeatTimeout, 5*time.Millisecond),
		election:  scaled(def.ElectionTimeout, 5*time.Millisecond),
		lease:     scaled(def.LeaderLeaseTimeout, 5*time.Millisecond),
		commit:    scaled(def.CommitTimeout, time.Millisecond),
	}
	// A few election rounds: long enough to ride out a failover, short
	// enough that a cluster without quorum answers no_leader promptly.
	t.leaderWait = 3 * (t.heartbeat + t.election)
	t.retryMin = max(t.commit/5, time.Millisecond)
	t.retryMax = max(t.heartbeat/10, 10*time.Millisecond)
	return t
}

// openStores opens bolt (log + stable store), the snapshot store and the
// transport (transport.go). On error the caller closes whatever was opened.
func (n *Node) openStores() error {
	if err := os.MkdirAll(n.cfg.DataDir, 0o750); err != nil {
		return fmt.Errorf("raftnode: data dir: %w", err)
	}
	path := filepath.Join(n.cfg.DataDir, boltFile)
	_, statErr := os.Stat(path)
	start := time.Now()
	pages, err := checkBoltFile(path)
	if err != nil {
		return n.storeError(err)
	}
	opts := boltOptions(path)
	if flaw := n.cfg.flaws.bolt; flaw != nil {
		flaw(&opts)
	}
	bolt, err := raftboltdb.New(opts)
	if err != nil {
		return fmt.Errorf("raftnode: open %s: %w", path, err)
	}
	n.bolt = bolt
	logs, err := n.openLogStore(bolt, statErr == nil)
	if err != nil {
		return n.storeError(err)
	}
	if n.cfg.wrapLogs != nil {
		logs = n.cfg.wrapLogs(logs)
	}
	if flaw := n.cfg.flaws.logs; flaw != nil {
		if logs, err = flaw(n, logs); err != nil {
			return err
		}
	}
	logs = &watchedLogs{LogStore: logs, failed: n.logStoreFailed}
	n.uncached = logs
	if n.logs, err = raft.NewLogCache(logCacheSize, logs); err != nil {
		return fmt.Errorf("raftnode: log cache: %w", err)
	}
	if n.snaps, err = openSnapshots(n.cfg.DataDir, snapshotsRetain, n.logger.Named("snapshot")); err != nil {
		return fmt.Errorf("raftnode: snapshot store: %w", err)
	}
	// The stores' names (raft.db, wal/, snapshots/) are durable only once
	// the data dir is fsynced, which neither bolt nor raft's snapshot
	// store does: a power loss could take a node's log and vote with them.
	if err := syncDir(n.cfg.DataDir); err != nil {
		return fmt.Errorf("raftnode: %w", err)
	}
	logPath := path
	if n.wal != nil {
		logPath = filepath.Join(n.cfg.DataDir, walDir)
	}
	entries, err := checkLog(logs, n.snaps)
	if err != nil {
		return n.storeError(&damagedError{path: logPath, err: err})
	}
	if pages > 0 {
		n.logger.Info("checked the raft stores", "log", logPath, "entries", entries, "bolt", path, "pages", pages, "took", time.Since(start))
	}
	return n.openTransport()
}

// damagedError reports a raft.db that cannot be trusted.
type damagedError struct {
	path string
	err  error
}

func (e *damagedError) Error() string { return e.path + " is damaged: " + e.err.Error() }
func (e *damagedError) Unwrap() error { return e.err }

// storeError is err from opening the stores, with what to do if the
// raft.db is damaged.
func (n *Node) storeError(err error) error {
	if d := (*damagedError)(nil); errors.As(err, &d) {
		return fmt.Errorf("raftnode: %w; %s", err, boltRemedy(n.cfg.ID))
	}
	return fmt.Errorf("raftnode: %w", err)
}

// logStoreKey is the key in raft.db's stable store that records which
// store holds the data dir's log: LogBolt or LogWAL.
const logStoreKey = "lockd_log_store"

// openLogStore returns the store of raft's log for the data dir: the one
// it was made with, recorded in raft.db (dirs made before the record: wal/
// is raft-wal, a raft.db without it is bolt), or for a new data dir the
// one Config.LogStore names, LogWAL if none. A data dir keeps its store:
// the other one would start with an empty log, and the node would come
// back without its entries (and vote on them) as if it were new.
func (n *Node) openLogStore(bolt *raftboltdb.BoltStore, boltExisted bool) (raft.LogStore, error) {
	dir := filepath.Join(n.cfg.DataDir, walDir)
	kind, err := dataDirStore(bolt, dir, boltExisted)
	if err != nil {
		return nil, err
	}
	want := n.cfg.LogStore
	if want != "" && want != LogBolt && want != LogWAL {
		return nil, fmt.Errorf("unknown log store %q (%s or %s)", want, LogBolt, LogWAL)
	}
	switch {
	case kind == "" && want == "":
		kind = LogWAL
	case kind == "":
		kind = want
	case want != "" && want != kind:
		where := boltFile
		if kind == LogWAL {
			where = walDir
		}
		return nil, fmt.Errorf("the raft log of %s is in %s (%s), not %s: start it with --raft-log %s, or without --raft-log "+
			"(moving a node to the other store: \"Change a node's log store\" in docs/operations.md)", n.cfg.DataDir, where, kind, want, kind)
	}
	if kind == LogBolt {
		return bolt, n.recordStore(bolt, kind)
	}
	if last, err := bolt.LastIndex(); err != nil || last > 0 {
		return nil, errors.Join(err, fmt.Errorf("%s holds raft log entries up to %d, and the raft log of %s is in %s (raft-wal): "+
			"move the one not in use away", boltFile, last, n.cfg.DataDir, walDir))
	}
	w, err := n.openWAL(dir)
	if err != nil {
		return nil, err
	}
	return walLogs{w}, n.recordStore(bolt, kind)
}

// walLogs is raft-wal as raft's log store. raft-wal drops entries from
// the head of its open segment by moving the segment's first index, and
// still reads them back from the segment; raft reads only
// raft.ErrLogNotFound as "compacted away, send a snapshot", and a read
// below the first index must say so.
type walLogs struct{ *raftwal.WAL }

// GetLog is raftwal.WAL.GetLog, and raft.ErrLogNotFound below the first
// index.
func (w walLogs) GetLog(index uint64, l *raft.Log) error {
	first, err := w.FirstIndex()
	if err != nil {
		return err
	}
	if index < first {
		return raft.ErrLogNotFound
	}
	return w.WAL.GetLog(index, l)
}

// dataDirStore returns the log store the data dir was made with, or ""
// for a new one. boltExisted tells whether raft.db was there before this
// start opened it.
func dataDirStore(bolt *raftboltdb.BoltStore, dir string, boltExisted bool) (string, error) {
	_, err := os.Stat(dir)
	if err != nil && !errors.Is(err, fs.ErrNotExist) {
		return "", fmt.Errorf("wal dir: %w", err)
	}
	walUsed := err == nil
	recorded, err := bolt.Get([]byte(logStoreKey))
	switch {
	case err != nil && !errors.Is(err, raftboltdb.ErrKeyNotFound):
		return "", fmt.Errorf("read %s: %w", boltFile, err)
	case string(recorded) == LogWAL && !walUsed:
		return "", &damagedError{path: dir, err: fmt.Errorf("%s records the raft log in %s, which is missing", boltFile, dir)}
	case string(recorded) == LogBolt && walUsed:
		return "", fmt.Errorf("%s records the raft log in %s, and %s is there too: move the one not in use away", boltFile, boltFile, dir)
	case len(recorded) > 0:
		return string(recorded), nil
	case walUsed:
		return LogWAL, nil
	case boltExisted:
		return LogBolt, nil
	}
	return "", nil
}

// recordStore records kind in raft.db, once.
func (n *Node) recordStore(bolt *raftboltdb.BoltStore, kind string) error {
	if v, err := bolt.Get([]byte(logStoreKey)); err == nil && string(v) == kind {
		return nil
	}
	if err := bolt.Set([]byte(logStoreKey), []byte(kind)); err != nil {
		return fmt.Errorf("record the log store in %s: %w", boltFile, err)
	}
	return nil
}

// openWAL opens (or makes) the raft-wal log in dir.
func (n *Node) openWAL(dir string) (*raftwal.WAL, error) {
	_, statErr := os.Stat(dir)
	made := errors.Is(statErr, fs.ErrNotExist)
	if err := os.MkdirAll(dir, 0o750); err != nil {
		return nil, fmt.Errorf("wal dir: %w", err)
	}
	// Our own meta store: WAL.Close leaves the default one open, and its
	// file lock would keep the node from opening again.
	n.walMeta = &metadb.BoltMetaDB{}
	w, err := openWALSafely(dir, n.walMeta, n.logger.Named("wal"))
	if err != nil {
		if made { // made just now: leave the data dir as it was, for either store
			err = errors.Join(err, n.walMeta.Close(), os.RemoveAll(dir))
			n.walMeta = nil
		}
		return nil, err
	}
	n.wal = w
	return w, nil
}

// openWALSafely is raftwal.Open, with a panic in it (a segment file it
// cannot make sense of) turned into a *damagedError.
func openWALSafely(dir string, meta *metadb.BoltMetaDB, logger hclog.Logger) (w *raftwal.WAL, err error) {
	defer func() {
		if p := recover(); p != nil {
			err = &damagedError{path: dir, err: fmt.Errorf("raft-wal panicked opening it: %v", p)}
		}
	}()
	w, err = raftwal.Open(dir, raftwal.WithMetaStore(meta), raftwal.WithLogger(logger))
	switch {
	case errors.Is(err, fs.ErrPermission):
		return nil, fmt.Errorf("open raft-wal in %s: %w", dir, err)
	case err != nil:
		return nil, &damagedError{path: dir, err: fmt.Errorf("raft-wal: %w", err)}
	}
	return w, nil
}

// closeStores closes the transport, the WAL and bolt, whichever are open.
func (n *Node) closeStores() error {
	var errs []error
	if n.trans != nil {
		if err := n.trans.Close(); err != nil {
			errs = append(errs, fmt.Errorf("raftnode: close transport: %w", err))
		}
	}
	if n.wal != nil {
		if err := n.wal.Close(); err != nil {
			errs = append(errs, fmt.Errorf("raftnode: close wal: %w", err))
		}
	}
	if n.walMeta != nil {
		if err := n.walMeta.Close(); err != nil {
			errs = append(errs, fmt.Errorf("raftnode: close wal meta: %w", err))
		}
	}
	if n.bolt != nil {
		if err := n.bolt.Close(); err != nil {
			errs = append(errs, fmt.Errorf("raftnode: close bolt: %w", err))
		}
	}
	return errors.Join(errs...)
}

// raftConfig is raft's defaults with our id, logger, notify channel,
// scaled timeouts and snapshot overrides.
func (n *Node) raftConfig() *raft.Config {
	c := raft.DefaultConfig()
	c.LocalID = raft.ServerID(n.cfg.ID)
	c.Logger = n.logger.Named("raft")
	c.NotifyCh = n.notifyCh
	c.HeartbeatTimeout = n.timing.heartbeat
	c.ElectionTimeout = n.timing.election
	c.LeaderLeaseTimeout = n.timing.lease
	c.CommitTimeout = n.timing.commit
	if n.cfg.SnapshotThreshold > 0 {
		c.SnapshotThreshold = n.cfg.SnapshotThreshold
	}
	if n.cfg.TrailingLogs > 0 {
		c.TrailingLogs = n.cfg.TrailingLogs
	}
	if n.cfg.SnapshotInterval > 0 {
		c.SnapshotInterval = n.cfg.SnapshotInterval
	}
	return c
}

// boltRemedy tells the operator what to do about a damaged raft.db. The
// node's log and its stable store (term and vote) are in it, and a voter
// must not come back with them lost (it could vote twice in a term):
// hence the removal before it starts again empty.
func boltRemedy(id string) string {
	return fmt.Sprintf("this node's raft log and vote cannot be trusted: keep the node stopped, remove it from the cluster "+
		"(DELETE /v1/members/%s on another node), move its data dir away and start it again with an empty one and --join: "+
		"it is added back and receives a snapshot from the leader (\"Restore one node\" in docs/operations.md)", id)
}

// checkBoltFile checks the raft.db at path before bolt opens it for good,
// and returns how many pages it read. Bolt maps the file into memory and
// trusts it: a page past the end of a file cut short faults (SIGSEGV or
// SIGBUS) or reads as zeroes, and a damaged page trips an assertion, or
// the consistency check bolt runs to rebuild its freelist, which panics in
// a goroutine of its own; each kills the process with a crash dump. The
// check reads the file with ReadAt instead, trusts nothing it reads, and
// returns a *damagedError naming the file.
//
// It reads every page in use once, as bolt's own Check does, not the
// whole file: with NoFreelistSync, bolt's open walks those same pages to
// rebuild its freelist (and would panic on what this check reports), so
// the check costs about what opening costs already, in proportion to the
// live log (TrailingLogs plus the entries since the last snapshot), not
// to the file, which never shrinks. A missing file is a new node.
func checkBoltFile(path string) (pages int, err error) {
	info, err := os.Stat(path)
	switch {
	case errors.Is(err, fs.ErrNotExist):
		return 0, nil
	case err != nil:
		return 0, err
	case info.Size() == 0:
		// Bolt would start a new empty log here: the node would forget its
		// term and vote.
		return 0, &damagedError{path, errors.New("it is empty")}
	}
	f, err := os.Open(path)
	if err != nil {
		return 0, err // not a damaged file: one this process may not read, say
	}
	defer f.Close()
	// A shared lock, as bolt takes one, so that a file another process is
	// writing is reported as locked rather than damaged. Opening read-only
	// validates the meta pages and reads nothing else.
	db, err := bbolt.Open(path, 0o600, &bbolt.Options{ReadOnly: true, Timeout: time.Second})
	if errors.Is(err, bbolt.ErrTimeout) {
		return 0, fmt.Errorf("open %s: %w (is another process using the data dir?)", path, err)
	}
	if err != nil {
		return 0, &damagedError{path, err}
	}
	defer db.Close()
	defer func() {
		if p := recover(); p != nil { // a bug in the check, not in the file; still better than a crash
			err = fmt.Errorf("checking %s panicked: %v", path, p)
		}
	}()
	c := boltCheck{f: f}
	if err := c.check(info.Size()); err != nil {
		return c.pages, &damagedError{path, err}
	}
	return c.pages, nil
}

// checkLog reads the log entries raft.NewRaft reads when it starts, those
// after the newest snapshot, as it reads them, and returns how many it
// read: NewRaft panics on one it cannot get (missing, or stored bytes that
// do not decode), and this returns an error instead, as it does for a
// command whose CRC-32C does not match (fsm.ErrChecksum). It costs a second
// read of what NewRaft reads next. Entries up to the snapshot are read only
// for a follower that lags, and the FSM checks the payload of every entry
// when it applies it.
func checkLog(logs raft.LogStore, snaps raft.SnapshotStore) (int, error) {
	last, err := logs.LastIndex()
	if err != nil || last == 0 {
		return 0, err
	}
	from := uint64(1)
	if metas, err := snaps.List(); err == nil && len(metas) > 0 {
		from = metas[0].Index + 1
	}
	var l raft.Log
	n := 0
	for i := from; i <= last; i++ {
		if err := logs.GetLog(i, &l); err != nil {
			first, _ := logs.FirstIndex()
			return n, fmt.Errorf("raft log entry %d, which raft reads at startup (the log holds %d to %d): %w", i, first, last, err)
		}
		if l.Index != i {
			return n, fmt.Errorf("raft log entry %d is stored as entry %d", i, l.Index)
		}
		// The entry's own CRC-32C: raft-wal checks its CRC only on the
		// batch it recovers at the tail, and bolt has none.
		if l.Type == raft.LogCommand {
			if _, _, err := fsm.Decode(l.Data); errors.Is(err, fsm.ErrChecksum) {
				return n, fmt.Errorf("raft log entry %d: %w", i, err)
			}
		}
		n++
	}
	return n, nil
}

// The bolt file format (go.etcd.io/bbolt, file format version 2): pages of
// the meta's page size, each opening with a 16-byte header; bolt writes
// its structs in the machine's byte order.
const (
	boltMagic        = 0xED0CDAED
	boltVersion      = 2
	boltPageHeader   = 16 // id uint64, flags uint16, count uint16, overflow uint32
	boltMetaSize     = 64 // magic, version, page size, flags uint32; root, sequence, freelist, pgid, txid, checksum uint64
	boltElemSize     = 16 // a branch or leaf element
	boltBucketHeader = 16 // a bucket value: root uint64, sequence uint64
	boltNoFreelist   = ^uint64(0)
	boltMaxDepth     = 64 // tree levels and nested buckets together

	branchPage   = 0x01
	leafPage     = 0x02
	freelistPage = 0x10
	bucketLeaf   = 0x01 // a leaf element whose value is a bucket
)

var ne = binary.NativeEndian

// boltMeta is what the check needs from a meta page.
type boltMeta struct {
	pageSize uint32
	root     uint64 // the root bucket's page
	freelist uint64 // the freelist's page, or boltNoFreelist
	high     uint64 // pages [0, high) hold the database
	txid     uint64
}

// parseBoltMeta reads the meta page in b, and reports whether it passes
// bolt's own validation: magic, version and checksum.
func parseBoltMeta(b []byte) (boltMeta, bool) {
	if len(b) < boltPageHeader+boltMetaSize {
		return boltMeta{}, false
	}
	m := b[boltPageHeader:]
	h := fnv.New64a()
	h.Write(m[:56])
	if ne.Uint32(m) != boltMagic || ne.Uint32(m[4:]) != boltVersion || ne.Uint64(m[56:]) != h.Sum64() {
		return boltMeta{}, false
	}
	return boltMeta{pageSize: ne.Uint32(m[8:]), root: ne.Uint64(m[16:]), freelist: ne.Uint64(m[32:]),
		high: ne.Uint64(m[40:]), txid: ne.Uint64(m[48:])}, true
}

// boltCheck walks a bolt file through ReadAt.
type boltCheck struct {
	f      io.ReaderAt
	ps     int      // page size
	high   uint64   // the high-water mark: pages [0, high) exist
	seen   []uint64 // bitmap of the pages reached
	pages  int      // pages read
	bufs   [][]byte // page buffers by depth (see buffer)
	nested int      // how many buckets the walk is inside, the root bucket not counted
	last   uint64   // the last raft log index met in the logs bucket
}

// check checks the file of size bytes: the meta page bolt will use, that
// the file holds every page it counts, and every page reachable from it.
func (c *boltCheck) check(size int64) error {
	m, err := c.meta(size)
	if err != nil {
		return err
	}
	c.ps = int(m.pageSize)
	switch {
	case c.ps < 1024 || size%int64(c.ps) != 0:
		return fmt.Errorf("its %d bytes are not a whole number of %d-byte pages: it was cut short or extended", size, c.ps)
	case m.high < 2 || m.high > uint64(size)/uint64(c.ps):
		return fmt.Errorf("it holds %d pages of %d bytes, its header counts %d: it was cut short", size/int64(c.ps), c.ps, m.high)
	}
	c.high = m.high
	c.seen = make([]uint64, (m.high+63)/64)
	c.mark(0, 1) // the meta pages
	var freed []uint64
	if m.freelist != boltNoFreelist {
		if freed, err = c.freelist(m.freelist); err != nil {
			return err
		}
	}
	if _, err := c.tree(m.root, nil, nil, 0, nil); err != nil {
		return err
	}
	// Bolt would hand out a free page that is in use, or twice.
	for _, id := range freed {
		if id < 2 || id >= c.high || c.reached(id) {
			return fmt.Errorf("the freelist holds page %d, which is in use, listed twice or out of bounds", id)
		}
		c.mark(id, id)
	}
	return nil
}

// meta returns the meta page bolt will use: the valid one with the higher
// transaction id. Like bolt, it finds the second meta page by probing the
// page sizes bolt supports when the first is invalid.
func (c *boltCheck) meta(size int64) (boltMeta, error) {
	b := make([]byte, boltPageHeader+boltMetaSize)
	var m0, m1 boltMeta
	ok0, ok1 := false, false
	if _, err := c.f.ReadAt(b, 0); err == nil {
		m0, ok0 = parseBoltMeta(b)
	}
	for ps := int64(1024); ps <= 1<<24 && ps+int64(len(b)) <= size; ps *= 2 {
		if ok0 && ps != int64(m0.pageSize) {
			continue
		}
		if _, err := c.f.ReadAt(b, ps); err == nil {
			if m, ok := parseBoltMeta(b); ok && int64(m.pageSize) == ps {
				m1, ok1 = m, true
				break
			}
		}
	}
	switch {
	case ok0 && ok1 && m1.txid > m0.txid, !ok0 && ok1:
		return m1, nil
	case ok0:
		return m0, nil
	}
	return boltMeta{}, errors.New("neither meta page is valid")
}

func (c *boltCheck) mark(from, to uint64) {
	for id := from; id <= to; id++ {
		c.seen[id/64] |= 1 << (id % 64)
	}
}

func (c *boltCheck) reached(id uint64) bool { return c.seen[id/64]&(1<<(id%64)) != 0 }

// buffer returns n bytes to read a page at depth into. A page's bytes are
// needed until its subtrees, one level deeper, have been checked, and no
// longer, so one buffer per level serves the whole walk.
func (c *boltCheck) buffer(depth, n int) []byte {
	for len(c.bufs) <= depth {
		c.bufs = append(c.bufs, nil)
	}
	if cap(c.bufs[depth]) < n {
		c.bufs[depth] = append(c.bufs[depth][:cap(c.bufs[depth])], make([]byte, n-cap(c.bufs[depth]))...)
	}
	return c.bufs[depth][:n]
}

// page reads page id, at depth in the walk, with its overflow pages. It
// must lie within the file's pages, not have been reached before (bolt's
// Check: no page is referenced twice, so the walk cannot loop), name
// itself id and be of one of the types in want.
func (c *boltCheck) page(id uint64, want uint16, depth int) ([]byte, error) {
	if id < 2 || id >= c.high {
		return nil, fmt.Errorf("a reference to page %d, outside pages 2 to %d", id, c.high-1)
	}
	if c.reached(id) {
		return nil, fmt.Errorf("page %d is referenced twice", id)
	}
	p := c.buffer(depth, c.ps)
	if _, err := c.f.ReadAt(p, int64(id)*int64(c.ps)); err != nil {
		return nil, fmt.Errorf("page %d: %w", id, err)
	}
	over := uint64(ne.Uint32(p[12:]))
	switch {
	case ne.Uint64(p) != id:
		return nil, fmt.Errorf("page %d names itself page %d", id, ne.Uint64(p))
	case !oneOf(ne.Uint16(p[8:]), want):
		return nil, fmt.Errorf("page %d has type %#x, want one of %#x", id, ne.Uint16(p[8:]), want)
	case over >= c.high-id:
		return nil, fmt.Errorf("page %d runs %d pages past the last one", id, id+over-c.high+1)
	}
	for i := id + 1; i <= id+over; i++ {
		if c.reached(i) {
			return nil, fmt.Errorf("page %d is referenced twice", i)
		}
	}
	c.mark(id, id+over)
	c.pages += int(over) + 1
	if over > 0 {
		p = c.buffer(depth, (int(over)+1)*c.ps) // keeps the first page: buffer grows by appending
		if _, err := c.f.ReadAt(p[c.ps:], int64(id+1)*int64(c.ps)); err != nil {
			return nil, fmt.Errorf("page %d: %w", id, err)
		}
	}
	return p, nil
}

// freelist reads the freelist page at id and returns the pages it lists.
func (c *boltCheck) freelist(id uint64) ([]uint64, error) {
	p, err := c.page(id, freelistPage, 0)
	if err != nil {
		return nil, err
	}
	n, ids := uint64(ne.Uint16(p[10:])), p[boltPageHeader:]
	if n == 0xffff { // the count did not fit: it is the first element
		n, ids = ne.Uint64(ids), ids[8:]
	}
	if n > uint64(len(ids)/8) {
		return nil, fmt.Errorf("freelist page %d lists %d pages, it has room for %d", id, n, len(ids)/8)
	}
	free := make([]uint64, n)
	for i := range free {
		free[i] = ne.Uint64(ids[8*i:])
	}
	return free, nil
}

// tree checks the B+tree of a bucket from page id, and the buckets below
// it, with bolt's Check's rules for keys: in order on each page, and
// within [lo, hi) given by the parent page. It returns (a copy of) the
// subtree's largest key. kv sees the bucket's keys and values in order.
func (c *boltCheck) tree(id uint64, lo, hi []byte, depth int, kv func(k, v []byte) error) ([]byte, error) {
	if depth > boltMaxDepth {
		return nil, fmt.Errorf("page %d is %d levels deep", id, depth)
	}
	p, err := c.page(id, branchPage|leafPage, depth)
	if err != nil {
		return nil, err
	}
	var last []byte
	if ne.Uint16(p[8:]) == branchPage {
		last, err = c.branch(id, p, lo, hi, depth, kv)
	} else {
		last, err = c.leaf(pageName{id: id}, p, lo, hi, depth, kv)
	}
	return bytes.Clone(last), err
}

// pageName names a page for errors: a page of the file, or the inline
// page of a bucket.
type pageName struct {
	id     uint64
	bucket []byte
}

func (n pageName) String() string {
	if n.bucket != nil {
		return fmt.Sprintf("the inline page of bucket %q", n.bucket)
	}
	return fmt.Sprintf("page %d", n.id)
}

// oneOf reports whether flags is exactly one of the bits in want, as a
// page's type must be.
func oneOf(flags, want uint16) bool { return flags != 0 && flags&(flags-1) == 0 && flags&want != 0 }

// branch checks a branch page's elements and the subtrees they point to.
func (c *boltCheck) branch(id uint64, p, lo, hi []byte, depth int, kv func(k, v []byte) error) ([]byte, error) {
	n := int(ne.Uint16(p[10:]))
	if boltPageHeader+n*boltElemSize > len(p) {
		return nil, fmt.Errorf("page %d counts %d elements, it has room for %d", id, n, (len(p)-boltPageHeader)/boltElemSize)
	}
	keys := make([][]byte, n)
	for i := range keys {
		e := boltPageHeader + i*boltElemSize
		start, end := uint64(e)+uint64(ne.Uint32(p[e:])), uint64(e)+uint64(ne.Uint32(p[e:]))+uint64(ne.Uint32(p[e+4:]))
		if end > uint64(len(p)) {
			return nil, fmt.Errorf("page %d, element %d: its key lies past the page's end", id, i)
		}
		keys[i] = p[start:end]
	}
	var last []byte
	for i, k := range keys {
		if err := keyOrder(i, k, lo, hi); err != nil {
			return nil, fmt.Errorf("page %d, element %d: %w", id, i, err)
		}
		next := hi
		if i+1 < n {
			next = keys[i+1]
		}
		var err error
		if last, err = c.tree(ne.Uint64(p[boltPageHeader+i*boltElemSize+8:]), k, next, depth+1, kv); err != nil {
			return nil, err
		}
		lo = last
	}
	return last, nil
}

// leaf checks a leaf page's elements (where names the page for errors) and
// the buckets stored in them, and hands the others to kv.
func (c *boltCheck) leaf(where pageName, p, lo, hi []byte, depth int, kv func(k, v []byte) error) ([]byte, error) {
	n := int(ne.Uint16(p[10:]))
	if boltPageHeader+n*boltElemSize > len(p) {
		return nil, fmt.Errorf("%v counts %d elements, it has room for %d", where, n, (len(p)-boltPageHeader)/boltElemSize)
	}
	var last []byte
	for i := range n {
		e := boltPageHeader + i*boltElemSize
		flags, ks, vs := ne.Uint32(p[e:]), uint64(ne.Uint32(p[e+8:])), uint64(ne.Uint32(p[e+12:]))
		start := uint64(e) + uint64(ne.Uint32(p[e+4:]))
		if start+ks+vs > uint64(len(p)) {
			return nil, fmt.Errorf("%v, element %d: its key and value lie past the page's end", where, i)
		}
		k, v := p[start:start+ks], p[start+ks:start+ks+vs]
		if err := keyOrder(i, k, lo, hi); err != nil {
			return nil, fmt.Errorf("%v, element %d: %w", where, i, err)
		}
		lo, last = k, k
		var err error
		if flags&bucketLeaf != 0 {
			err = c.bucket(k, v, depth)
		} else if kv != nil {
			err = kv(k, v)
		}
		if err != nil {
			return nil, err
		}
	}
	return last, nil
}

// keyOrder applies bolt's Check's rule to the i-th key of a page: the
// first may not sort before prev, the bound its parent page gives; the
// others must sort after prev, the key (or subtree) before them; and all
// before hi, where the parent page starts the next page.
func keyOrder(i int, k, prev, hi []byte) error {
	switch {
	case i == 0 && prev != nil && bytes.Compare(prev, k) > 0:
		return fmt.Errorf("key %x sorts before %x, where its parent page starts it", k, prev)
	case i > 0 && bytes.Compare(prev, k) >= 0:
		return fmt.Errorf("key %x does not sort after the key before it, %x", k, prev)
	case hi != nil && bytes.Compare(k, hi) >= 0:
		return fmt.Errorf("key %x does not sort before %x, where its parent page starts the next page", k, hi)
	}
	return nil
}

// bucket checks the bucket named name whose header is v: its tree, or
// its inline page.
func (c *boltCheck) bucket(name, v []byte, depth int) error {
	if len(v) < boltBucketHeader {
		return fmt.Errorf("bucket %q: a header of %d bytes", name, len(v))
	}
	var kv func(k, v []byte) error
	if c.nested == 0 && string(name) == "logs" { // raft-boltdb's log
		kv = c.logKey
	}
	c.nested++
	defer func() { c.nested-- }()
	if root := ne.Uint64(v); root != 0 {
		_, err := c.tree(root, nil, nil, depth+1, kv)
		return err
	}
	inline := v[boltBucketHeader:]
	if len(inline) < boltPageHeader || ne.Uint16(inline[8:]) != leafPage {
		return fmt.Errorf("bucket %q: its inline page is not a leaf page", name)
	}
	_, err := c.leaf(pageName{bucket: name}, inline, nil, nil, depth+1, kv)
	return err
}

// logKey checks the keys of raft-boltdb's logs bucket: raft log indexes,
// 8 bytes big endian, with no gap (raft panics on an entry it needs and
// cannot get).
func (c *boltCheck) logKey(k, _ []byte) error {
	if len(k) != 8 {
		return fmt.Errorf("the raft log holds a key of %d bytes", len(k))
	}
	i := binary.BigEndian.Uint64(k)
	if c.last != 0 && i != c.last+1 {
		return fmt.Errorf("the raft log skips from index %d to %d", c.last, i)
	}
	c.last = i
	return nil
}

// boltOptions are the options raft.db at path is opened with.
// NoFreelistSync skips writing bolt's freelist on every commit (rqlite,
// Nomad; consul #15890); it is rebuilt on open. The timeout turns a data
// dir locked by another process into an error instead of a hang. NoSync
// stays false: fsync on.
func boltOptions(path string) raftboltdb.Options {
	return raftboltdb.Options{Path: path, BoltOptions: &bbolt.Options{NoFreelistSync: true, Timeout: time.Second}}
}

// watchedLogs reports the log store's failed writes (Config.StoreFailed).
type watchedLogs struct {
	raft.LogStore
	failed func(error)
}

func (w *watchedLogs) StoreLog(l *raft.Log) error { return w.check(w.LogStore.StoreLog(l)) }

func (w *watchedLogs) StoreLogs(logs []*raft.Log) error { return w.check(w.LogStore.StoreLogs(logs)) }

func (w *watchedLogs) DeleteRange(min, max uint64) error {
	return w.check(w.LogStore.DeleteRange(min, max))
}

// IsMonotonic passes on the store's raft.MonotonicLogStore (raft-wal's):
// raft then drops the whole log when it installs a snapshot, instead of
// leaving entries after it that a store without gaps cannot append to.
func (w *watchedLogs) IsMonotonic() bool { return isMonotonic(w.LogStore) }

// isMonotonic reports whether s is a raft.MonotonicLogStore that says it
// is one; a store that wraps another passes its answer on with it.
func isMonotonic(s raft.LogStore) bool {
	m, ok := s.(raft.MonotonicLogStore)
	return ok && m.IsMonotonic()
}

func (w *watchedLogs) check(err error) error {
	if err != nil {
		w.failed(err)
	}
	return err
}

// logStoreFailed handles a failed write of the raft log: once, it logs
// it and calls Config.StoreFailed.
func (n *Node) logStoreFailed(err error) {
	n.storeFailOnce.Do(func() {
		n.logger.Error("a write to the raft log failed; a restart reads the log back from disk", "error", err)
		if n.cfg.StoreFailed != nil {
			go n.cfg.StoreFailed(err) // not on raft's goroutine
		}
	})
}

// syncDir fsyncs the directory dir, making the names in it durable.
func syncDir(dir string) error {
	d, err := os.Open(dir)
	if err != nil {
		return fmt.Errorf("sync %s: %w", dir, err)
	}
	defer d.Close()
	if err := d.Sync(); err != nil {
		return fmt.Errorf("sync %s: %w", dir, err)
	}
	return nil
}
