package fsm

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"

	"github.com/hashicorp/go-hclog"
	"github.com/hashicorp/raft"

	"github.com/lockd/lockd/lockstate"
)

// ErrStopped is returned by Apply and WaitApplied after the FSM met an
// entry it could not apply and Config.Fatal returned instead of stopping
// the process. The FSM applies nothing after that.
var ErrStopped = errors.New("fsm: stopped after a fatal entry")

// Config configures an FSM. The zero value is usable.
type Config struct {
	// Logger receives skipped entries and fatal errors; nil discards them.
	Logger hclog.Logger
	// Fatal is called with a message when an entry cannot be applied
	// without diverging from the other nodes (it fails its checksum, does
	// not decode, has an unknown type without IgnoreUnknownFlag, or comes
	// out of order). It must not return in production: nil means
	// panic(msg), which stops the node from inside raft's FSM goroutine.
	// Tests set a function that records the message.
	Fatal func(msg string)
}

// FSM is the raft.FSM of a lockd node: a lockstate.Table plus the apply
// bookkeeping readers need. Apply, Snapshot and Restore are called by raft
// from one goroutine; every other method is safe for concurrent use.
type FSM struct {
	logger hclog.Logger
	fatal  func(msg string)

	mu      sync.RWMutex // guards table; Apply and Restore write, readers read
	table   *lockstate.Table
	applied atomic.Uint64             // index of the last entry this FSM applied; set under mu
	denied  atomic.Pointer[deniedSet] // the table's certificate deny list; set under mu (denied.go)

	stopped atomic.Bool // a fatal entry was met and Fatal returned

	// changes counts the table's changes (a command applied, a snapshot
	// restored); set under mu. digest is the table's digest at a count of
	// changes: a node asked for its status often (monitors, clients
	// learning the leader) hashes a large table once per change, not once
	// per call, holding applies back meanwhile.
	changes uint64
	digest  atomic.Pointer[digestAt]

	watch Broadcast // wakes blocking readers on every applied entry
	hub   hub       // per-entry events for subscribers
}

var _ raft.FSM = (*FSM)(nil)

// New returns an FSM holding an empty table.
func New(cfg Config) *FSM {
	f := &FSM{logger: cfg.Logger, fatal: cfg.Fatal, table: lockstate.New()}
	if f.logger == nil {
		f.logger = hclog.NewNullLogger()
	}
	if f.fatal == nil {
		f.fatal = func(msg string) { panic(msg) }
	}
	return f
}

// Apply applies one committed log entry. For a command it returns the
// table's *lockstate.Result, whose Err carries a domain failure (the table
// is then unchanged); its slices are shared with subscribers and must not
// be modified. It returns nil for entries that are not commands and
// for unknown commands marked IgnoreUnknownFlag. An entry that cannot be
// applied without diverging calls Config.Fatal; if that returns, Apply
// returns an error wrapping ErrStopped and the FSM applies nothing more.
func (f *FSM) Apply(l *raft.Log) any {
	if f.stopped.Load() {
		return f.stop(fmt.Sprintf("fsm: entry %d not applied: %v", l.Index, ErrStopped))
	}
	if l.Type != raft.LogCommand {
		return nil // raft hands only commands to a plain FSM; nothing else is ours
	}
	if prev := f.applied.Load(); l.Index <= prev {
		return f.stop(fmt.Sprintf("fsm: entry %d arrived after entry %d: the log went backwards", l.Index, prev))
	}
	now, cmd, err := Decode(l.Data)
	if err != nil {
		return f.undecodable(l, err)
	}

	f.mu.Lock()
	res := f.table.Apply(lockstate.Entry{Index: l.Index, Now: now, Cmd: cmd})
	f.changes++
	f.applied.Store(l.Index)
	f.publishDenied(false)
	f.mu.Unlock()

	if len(res.Events) > 0 {
		f.hub.publish(Batch{Index: l.Index, Events: res.Events})
	}
	f.watch.Notify()
	return &res
}

// logRemedy tells the operator what to do about an entry that fails its
// checksum. The proposer writes the checksum once and every node checks
// its own copy at apply, so the damage is in this node's copy (its disk,
// its memory, the network it came over) unless every node stops at the
// entry. A node must not come back as the same voter with an empty log
// (it could vote twice in a term), hence the removal first.
const logRemedy = "this node's copy of the log is corrupt: stop it, remove it from the cluster " +
	"(DELETE /v1/members/<id> on another node), move its data dir away and start it again with an empty one " +
	"and --join: it is added back and receives a snapshot from the leader (\"Restore one node\" in docs/operations.md); " +
	"if every node stops at this entry, restore the cluster from a backup"

// undecodable handles an entry Decode refused: an unknown command marked
// IgnoreUnknownFlag is skipped; anything else stops the FSM, because
// applying a guess would let this node's state diverge (Consul's rule).
func (f *FSM) undecodable(l *raft.Log, err error) any {
	var ute *UnknownTypeError
	switch {
	case errors.As(err, &ute) && ute.Ignorable():
		f.logger.Warn("skipping unknown ignorable command", "index", l.Index, "type", uint8(ute.Type))
		f.advance(l.Index)
		return nil
	case errors.Is(err, ErrChecksum):
		return f.stop(fmt.Sprintf("fsm: entry %d (term %d, %d bytes) is corrupt: %v; %s", l.Index, l.Term, len(l.Data), err, logRemedy))
	}
	return f.stop(fmt.Sprintf("fsm: entry %d (term %d, %d bytes) cannot be applied: %v", l.Index, l.Term, len(l.Data), err))
}

// advance records an entry that changed nothing in the table.
func (f *FSM) advance(index uint64) {
	f.mu.Lock()
	f.applied.Store(index)
	f.mu.Unlock()
	f.watch.Notify()
}

// stop reports a fatal entry. It only returns when Config.Fatal does.
func (f *FSM) stop(msg string) error {
	f.logger.Error(msg)
	f.stopped.Store(true)
	f.watch.Notify() // WaitApplied callers must learn that nothing more comes
	f.fatal(msg)
	return fmt.Errorf("%s: %w", msg, ErrStopped)
}

// Read calls fn with the table under a read lock. fn must not keep the
// table or anything it returns that aliases it, and must not block: Apply
// waits for it.
func (f *FSM) Read(fn func(t *lockstate.Table)) {
	f.mu.RLock()
	defer f.mu.RUnlock()
	fn(f.table)
}

// Digest returns the table's content digest (lockstate.Table.Digest).
func (f *FSM) Digest() [32]byte {
	_, sum := f.AppliedDigest()
	return sum
}

// digestAt is the table's digest after a count of changes.
type digestAt struct {
	changes uint64
	sum     [32]byte
}

// AppliedDigest returns the applied index and the table's digest at
// exactly that index, computed once per change of the table.
func (f *FSM) AppliedDigest() (uint64, [32]byte) {
	f.mu.RLock()
	defer f.mu.RUnlock()
	d := f.digest.Load()
	if d == nil || d.changes != f.changes {
		d = &digestAt{changes: f.changes, sum: f.table.Digest()}
		f.digest.Store(d)
	}
	return f.applied.Load(), d.sum
}

// AppliedIndex returns the index of the last entry this FSM has applied,
// the table state Read now sees. Unlike raft's AppliedIndex, which counts
// entries handed to the FSM goroutine, it moves only once Apply (or
// Restore) has finished. raft never hands no-op, barrier or (for a plain
// FSM) configuration entries to Apply, so they never move it.
func (f *FSM) AppliedIndex() uint64 { return f.applied.Load() }

// Changed returns a channel that is closed when the next entry is applied
// or a snapshot restored. Blocking queries take it, check their condition,
// then wait on it.
func (f *FSM) Changed() <-chan struct{} { return f.watch.Wait() }

// WaitApplied blocks until AppliedIndex is at least index, ctx ends, or
// the FSM stops. Only command entries advance AppliedIndex (see there):
// wait for the index of a command, such as the one returned by
// raft's ApplyFuture.Index, not for a bare commit index.
func (f *FSM) WaitApplied(ctx context.Context, index uint64) error {
	for {
		ch := f.watch.Wait() // take the channel before checking: no wake-up is lost in between
		if f.applied.Load() >= index {
			return nil
		}
		if f.stopped.Load() {
			return ErrStopped
		}
		select {
		case <-ch:
		case <-ctx.Done():
			return fmt.Errorf("fsm: waiting for index %d (applied %d): %w", index, f.applied.Load(), ctx.Err())
		}
	}
}

// Broadcast wakes every goroutine waiting for the next change. Wait
// returns a channel that the next Notify closes; a waiter takes the channel
// before checking its condition, so no change between the check and the
// wait is lost. A channel is only made when someone waits, so a Notify with
// no waiters costs one uncontended lock. The zero value is ready to use; a
// Broadcast must not be copied after first use.
type Broadcast struct {
	mu sync.Mutex
	ch chan struct{}
}

// Wait returns a channel that is closed by the next call to Notify.
func (b *Broadcast) Wait() <-chan struct{} {
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.ch == nil {
		b.ch = make(chan struct{})
	}
	return b.ch
}

// Notify wakes everyone waiting on a channel from Wait.
func (b *Broadcast) Notify() {
	b.mu.Lock()
	if b.ch != nil {
		close(b.ch)
		b.ch = nil
	}
	b.mu.Unlock()
}
