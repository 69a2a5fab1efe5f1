package workload

import (
	"context"
	"time"

	"github.com/lockd/lockd/jepsen/history"
)

// mutex: one name; the holder does a read-modify-write of the fenced
// register (Jepsen's set-full over a lock).
type mutex struct{}

const mutexName = "jepsen/mutex"

func (mutex) Name() string { return "mutex" }
func (mutex) Limit() int   { return 0 }

func (mutex) Cycle(ctx context.Context, p *Proc) {
	p.maybeObserve(ctx, mutexName)
	g := p.Acquire(ctx, []history.Lock{{Name: mutexName, Mode: "write"}}, "", p.env().Wait)
	if g == nil {
		return
	}
	p.ResAdd(mutexName, g.Token)
	Sleep(ctx, jitter(p.rng, p.env().Hold))
	p.maybeOverstay(ctx, g)
	p.Release(ctx, g)
}

func (mutex) Final(ctx context.Context, p *Proc, wait time.Duration) {
	if g := p.Acquire(ctx, []history.Lock{{Name: mutexName, Mode: "write"}}, "", wait); g != nil {
		p.ResAdd(mutexName, g.Token)
		p.Release(ctx, g)
	}
}

// semaphore: one name with limit permits of weight 1; the resource counts
// its concurrent users.
type semaphore struct{ limit int }

const semName = "jepsen/sem"

func (s semaphore) Name() string { return "semaphore" }
func (s semaphore) Limit() int   { return s.limit }

func (s semaphore) lock() []history.Lock {
	return []history.Lock{{Name: semName, Mode: "write", Weight: 1, Limit: s.limit}}
}

func (s semaphore) Cycle(ctx context.Context, p *Proc) {
	p.maybeObserve(ctx, semName)
	g := p.Acquire(ctx, s.lock(), "", p.env().Wait)
	if g == nil {
		return
	}
	p.ResUse(semName, g.Token, jitter(p.rng, p.env().Hold))
	p.maybeOverstay(ctx, g)
	p.Release(ctx, g)
}

func (s semaphore) Final(ctx context.Context, p *Proc, wait time.Duration) {
	if g := p.Acquire(ctx, s.lock(), "", wait); g != nil {
		p.ResUse(semName, g.Token, 0)
		p.Release(ctx, g)
	}
}

// rw: readers share one name, writers exclude everyone; writers append
// to the register, readers read it.
type rw struct{}

const rwName = "jepsen/rw"

func (rw) Name() string { return "rw" }
func (rw) Limit() int   { return 0 }

func (rw) Cycle(ctx context.Context, p *Proc) {
	p.maybeObserve(ctx, rwName)
	mode := "read"
	if p.rng.IntN(3) == 0 {
		mode = "write"
	}
	g := p.Acquire(ctx, []history.Lock{{Name: rwName, Mode: mode}}, "", p.env().Wait)
	if g == nil {
		return
	}
	if mode == "write" {
		p.ResAdd(rwName, g.Token)
	} else {
		p.ResRead(rwName, "read", g.Token)
		p.PausePoint()
		p.ResRead(rwName, "read", g.Token)
	}
	Sleep(ctx, jitter(p.rng, p.env().Hold))
	p.maybeOverstay(ctx, g)
	p.Release(ctx, g)
}

func (rw) Final(ctx context.Context, p *Proc, wait time.Duration) {
	mode := "read"
	if p.Worker()%2 == 0 {
		mode = "write"
	}
	if g := p.Acquire(ctx, []history.Lock{{Name: rwName, Mode: mode}}, "", wait); g != nil {
		p.Release(ctx, g)
	}
}

// multi: atomic acquires of several names with all/any/majority; the
// holder appends to the register of every name it was granted.
type multi struct{}

var multiNames = []string{"jepsen/multi/a", "jepsen/multi/b", "jepsen/multi/c", "jepsen/multi/d"}

func (multi) Name() string { return "multi" }
func (multi) Limit() int   { return 0 }

func (multi) Cycle(ctx context.Context, p *Proc) {
	n := 2 + p.rng.IntN(len(multiNames)-1)
	perm := p.rng.Perm(len(multiNames))[:n]
	locks := make([]history.Lock, n)
	for i, j := range perm {
		locks[i] = history.Lock{Name: multiNames[j], Mode: "write"}
	}
	require := []string{"all", "any", "majority"}[p.rng.IntN(3)]
	g := p.Acquire(ctx, locks, require, p.env().Wait)
	if g == nil {
		return
	}
	for _, gl := range g.Locks {
		p.ResAdd(gl.Name, gl.Token)
	}
	Sleep(ctx, jitter(p.rng, p.env().Hold))
	p.maybeOverstay(ctx, g)
	p.Release(ctx, g)
}

func (multi) Final(ctx context.Context, p *Proc, wait time.Duration) {
	locks := make([]history.Lock, len(multiNames))
	for i, n := range multiNames {
		locks[i] = history.Lock{Name: n, Mode: "write"}
	}
	if g := p.Acquire(ctx, locks, "any", wait); g != nil {
		p.Release(ctx, g)
	}
}

// deadlock: even workers lock x then y, odd ones y then x, holding the
// first while waiting for the second; lockd must pick a victim (409
// deadlock) every time such waits close a cycle.
type deadlock struct{}

var deadlockNames = [2]string{"jepsen/dl/x", "jepsen/dl/y"}

func (deadlock) Name() string { return "deadlock" }
func (deadlock) Limit() int   { return 0 }

func (d deadlock) Cycle(ctx context.Context, p *Proc) { d.round(ctx, p, p.env().Wait) }

func (d deadlock) Final(ctx context.Context, p *Proc, wait time.Duration) { d.round(ctx, p, wait) }

func (deadlock) round(ctx context.Context, p *Proc, wait time.Duration) {
	first, second := deadlockNames[0], deadlockNames[1]
	if p.Worker()%2 == 1 {
		first, second = second, first
	}
	g1 := p.Acquire(ctx, []history.Lock{{Name: first, Mode: "write"}}, "", wait)
	if g1 == nil {
		return
	}
	p.ResAdd(first, g1.Token)
	Sleep(ctx, jitter(p.rng, p.env().Hold/2))
	if g2 := p.Acquire(ctx, []history.Lock{{Name: second, Mode: "write"}}, "", wait); g2 != nil {
		p.ResAdd(second, g2.Token)
		p.Release(ctx, g2)
	}
	p.Release(ctx, g1)
}

// hierarchy: parent and child names ("h" covers "h/a" and "h/a/1");
// holders append to the register of the name they hold.
type hierarchy struct{}

var hierNames = []string{"jepsen/h", "jepsen/h/a", "jepsen/h/b", "jepsen/h/a/1"}

func (hierarchy) Name() string { return "hierarchy" }
func (hierarchy) Limit() int   { return 0 }

func (hierarchy) Cycle(ctx context.Context, p *Proc) {
	name := hierNames[p.rng.IntN(len(hierNames))]
	p.maybeObserve(ctx, name)
	mode := "write"
	if p.rng.IntN(4) == 0 {
		mode = "read"
	}
	g := p.Acquire(ctx, []history.Lock{{Name: name, Mode: mode}}, "", p.env().Wait)
	if g == nil {
		return
	}
	if mode == "write" {
		p.ResAdd(name, g.Token)
	} else {
		p.ResRead(name, "read", g.Token)
	}
	Sleep(ctx, jitter(p.rng, p.env().Hold))
	p.maybeOverstay(ctx, g)
	p.Release(ctx, g)
}

func (hierarchy) Final(ctx context.Context, p *Proc, wait time.Duration) {
	name := hierNames[p.Worker()%len(hierNames)]
	if g := p.Acquire(ctx, []history.Lock{{Name: name, Mode: "write"}}, "", wait); g != nil {
		p.ResAdd(name, g.Token)
		p.Release(ctx, g)
	}
}
