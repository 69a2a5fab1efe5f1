// Package resource is the fencing-aware resource of the Jepsen harness:
// what lock holders protect. It keeps one register (a list of elements)
// per lock name and rejects a use whose fencing token is older than a
// conflicting use it has already accepted — the check a real storage
// system does with lockd's tokens.
//
// Tokens are raft indexes of grants, so a conflicting hold granted later
// always carries a larger token: once the resource has accepted that
// hold's use, every older conflicting hold must have ended, and its
// late writes (a client paused past its session TTL) are refused.
//
// Conflicts follow lockd's lock rules: equal names, or one name an
// ancestor of the other ("h" and "h/a"), with at least one write.
// Semaphore uses (Enter/Exit) are only counted, not fenced: a later
// permit does not mean an earlier one ended.
package resource

import (
	"errors"
	"slices"
	"strings"
	"sync"
)

// ErrStale is returned for a use whose token is older than a conflicting
// use already accepted.
var ErrStale = errors.New("stale token")

// Resource is safe for concurrent use; every accepted operation gets the
// next sequence number, the order in which it took effect.
type Resource struct {
	fenced bool

	mu       sync.Mutex
	seq      uint64
	regs     map[string][]int64
	maxAny   map[string]uint64 // largest token of any accepted use, per name
	maxWrite map[string]uint64 // largest token of an accepted write-mode use
	users    map[string]int    // current Enter-ed users per name
}

// New returns an empty resource. fenced false is the negative control:
// every use is accepted whatever its token.
func New(fenced bool) *Resource {
	return &Resource{fenced: fenced, regs: map[string][]int64{},
		maxAny: map[string]uint64{}, maxWrite: map[string]uint64{}, users: map[string]int{}}
}

// Fenced reports whether the resource checks tokens.
func (r *Resource) Fenced() bool { return r.fenced }

// Read returns the register of name, used under a hold of name in mode
// ("read" or "write") with token.
func (r *Resource) Read(name, mode string, token uint64) ([]int64, uint64, error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if err := r.admit(name, mode, token); err != nil {
		return nil, 0, err
	}
	r.seq++
	return slices.Clone(r.regs[name]), r.seq, nil
}

// Write replaces the register of name, used under a hold of name in mode
// with token.
func (r *Resource) Write(name, mode string, token uint64, value []int64) (uint64, error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if err := r.admit(name, mode, token); err != nil {
		return 0, err
	}
	r.regs[name] = slices.Clone(value)
	r.seq++
	return r.seq, nil
}

// Enter and Exit bracket a use of a semaphore-guarded name; they return
// the sequence number and the number of users after the call.
func (r *Resource) Enter(name string) (seq uint64, users int) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.users[name]++
	r.seq++
	return r.seq, r.users[name]
}

// Exit ends a use begun by Enter.
func (r *Resource) Exit(name string) (seq uint64, users int) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.users[name]--
	r.seq++
	return r.seq, r.users[name]
}

// Snapshot returns a copy of every register.
func (r *Resource) Snapshot() map[string][]int64 {
	r.mu.Lock()
	defer r.mu.Unlock()
	out := make(map[string][]int64, len(r.regs))
	for k, v := range r.regs {
		out[k] = slices.Clone(v)
	}
	return out
}

// admit checks token against the conflicting uses accepted so far and
// records it. Called with mu held.
func (r *Resource) admit(name, mode string, token uint64) error {
	write := mode != "read"
	if r.fenced {
		for n, t := range r.maxAny {
			if !related(n, name) {
				continue
			}
			// A writer conflicts with every use; a reader only with writes.
			if write && t > token || !write && r.maxWrite[n] > token {
				return ErrStale
			}
		}
	}
	r.maxAny[name] = max(r.maxAny[name], token)
	if write {
		r.maxWrite[name] = max(r.maxWrite[name], token)
	}
	return nil
}

// related reports whether a and b are the same name or one is an
// ancestor of the other.
func related(a, b string) bool {
	if len(a) > len(b) {
		a, b = b, a
	}
	return a == b || strings.HasPrefix(b, a) && b[len(a)] == '/'
}
