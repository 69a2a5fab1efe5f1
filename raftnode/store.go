package raftnode

import (
	"errors"
	"fmt"
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
	"github.com/lockd/lockd/raftnode/internal/boltcheck"
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
	// unanswered: a peer that answered no raft RPC for this long is
	// silent; contactWindow: raft's contact older than this says nothing
	// (contact.go); quorumTick: how often the quorum is judged again.
	unanswered, contactWindow, quorumTick time.Duration
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
	// An election timeout, but never under a second: a peer of a loaded
	// machine may take hundreds of milliseconds to answer (a vote is
	// written to disk first), and counting it silent would answer writes
	// quorum_lost while a leader can still be elected.
	t.unanswered = max(t.election, time.Second)
	t.contactWindow = max(t.leaderWait, 3*t.unanswered)
	t.quorumTick = t.unanswered / 4
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
	pages, err := boltcheck.Check(path)
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

// damagedError reports a store that cannot be trusted: raft-wal's
// directory (missing, or segment files it cannot read), or a raft log
// whose entries raft reads at startup do not read back (checkLog).
// boltcheck reports damaged raft.db pages with its own DamagedError.
type damagedError struct {
	path string
	err  error
}

func (e *damagedError) Error() string { return e.path + " is damaged: " + e.err.Error() }
func (e *damagedError) Unwrap() error { return e.err }

// storeError is err from opening the stores, with what to do if a store
// is damaged: a *damagedError, or boltcheck's finding on raft.db.
func (n *Node) storeError(err error) error {
	d, bd := (*damagedError)(nil), (*boltcheck.DamagedError)(nil)
	if errors.As(err, &d) || errors.As(err, &bd) {
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
