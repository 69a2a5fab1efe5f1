package checker

import (
	"strconv"
	"time"

	"github.com/lockd/lockd/jepsen/history"
)

// hb builds hand-written histories; each event is 1ms after the last.
type hb struct {
	ev []history.Event
	t  time.Duration
}

func (h *hb) add(e history.Event) history.Event {
	if e.Process >= 0 && e.Worker == 0 {
		e.Worker = e.Process // one process per worker
	}
	if e.Process >= 0 && e.Session == "" {
		e.Session = "s" + strconv.Itoa(e.Process) // one session per process
	}
	e.Index = len(h.ev)
	h.t += time.Millisecond
	e.Time = h.t
	h.ev = append(h.ev, e)
	return e
}

func (h *hb) sleep(d time.Duration) { h.t += d }

func wl(name string) history.Lock { return history.Lock{Name: name, Mode: "write"} }
func rl(name string) history.Lock { return history.Lock{Name: name, Mode: "read"} }
func sl(name string, limit int) history.Lock {
	return history.Lock{Name: name, Mode: "write", Weight: 1, Limit: limit}
}
func wg(name string, tok uint64) history.Granted {
	return history.Granted{Name: name, Mode: "write", Token: tok}
}
func rg(name string, tok uint64) history.Granted {
	return history.Granted{Name: name, Mode: "read", Token: tok}
}

// acquire invokes an acquire of ls.
func (h *hb) acquire(p int, ls ...history.Lock) {
	h.add(history.Event{Type: history.Invoke, Process: p, F: history.Acquire, Locks: ls})
}

// acquireReq invokes a multi-lock acquire with a requirement.
func (h *hb) acquireReq(p int, req string, ls ...history.Lock) {
	h.add(history.Event{Type: history.Invoke, Process: p, F: history.Acquire, Locks: ls, Require: req})
}

// granted completes p's acquire with ok.
func (h *hb) granted(p int, gs ...history.Granted) {
	h.add(history.Event{Type: history.OK, Process: p, F: history.Acquire, Granted: gs, Token: gs[0].Token})
}

// done completes p's pending f with typ and error.
func (h *hb) done(p int, f string, typ history.Type, err string) {
	h.add(history.Event{Type: typ, Process: p, F: f, Error: err})
}

// lock is a whole exclusive acquire of name with token.
func (h *hb) lock(p int, name string, tok uint64) {
	h.acquire(p, wl(name))
	h.granted(p, wg(name, tok))
}

func (h *hb) releaseInv(p int, names ...string) {
	h.add(history.Event{Type: history.Invoke, Process: p, F: history.Release, Names: names})
}

// release is a whole successful release.
func (h *hb) release(p int, names ...string) {
	h.releaseInv(p, names...)
	h.done(p, history.Release, history.OK, "")
}

func (h *hb) close(p int, typ history.Type) {
	h.add(history.Event{Type: history.Invoke, Process: p, F: history.Close})
	h.done(p, history.Close, typ, "")
}

func (h *hb) lost(p int) {
	h.add(history.Event{Type: history.Info, Process: p, F: history.Lost})
}

// res is a whole resource op under g: errS "" = accepted with seq.
func (h *hb) res(p int, f string, g history.Granted, seq uint64, value int64, errS string) {
	h.add(history.Event{Type: history.Invoke, Process: p, F: f, Granted: []history.Granted{g}, Token: g.Token, Value: value})
	if errS != "" {
		h.add(history.Event{Type: history.Fail, Process: p, F: f, Error: errS})
		return
	}
	h.add(history.Event{Type: history.OK, Process: p, F: f, Seq: seq, Value: value})
}

func (h *hb) phaseFinal() {
	h.add(history.Event{Type: history.Info, Process: history.Harness, F: history.Phase, Fault: "final"})
}

func (h *hb) finalRead(vs map[string][]int64) {
	h.add(history.Event{Type: history.OK, Process: history.Harness, F: history.FinalRead, Values: vs})
}

// observe is a whole observe read by p of name that saw holders
// (process, mode, token).
func (h *hb) observe(p int, name string, holders ...history.Holder) {
	h.add(history.Event{Type: history.Invoke, Process: p, F: history.Observe, Names: []string{name}})
	h.add(history.Event{Type: history.OK, Process: p, F: history.Observe, Names: []string{name}, Holders: holders})
}

// held is a holder of an observe read: process p's session.
func held(p int, mode string, tok uint64) history.Holder {
	return history.Holder{Session: "s" + strconv.Itoa(p), Mode: mode, Token: tok}
}
