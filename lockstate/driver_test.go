package lockstate

import (
	"testing"
	"time"
)

// driver applies commands to a table at increasing indexes, with a clock
// that tests move by hand. It is the tests' stand-in for the Raft log.
type driver struct {
	t     *testing.T
	tab   *Table
	index uint64
	now   int64
	log   []Entry
}

func newDriver(t *testing.T) *driver {
	return &driver{t: t, tab: New(), now: int64(time.Hour)}
}

func (d *driver) apply(cmd Command) Result {
	d.index++
	e := Entry{Index: d.index, Now: d.now, Cmd: cmd}
	d.log = append(d.log, e)
	return d.tab.Apply(e)
}

// advance moves the clock on and applies a Tick.
func (d *driver) advance(dt time.Duration) Result {
	d.now += int64(dt)
	return d.apply(&Tick{})
}

func (d *driver) session(opts ...func(*CreateSession)) SessionID {
	c := &CreateSession{TTL: 10 * time.Second}
	for _, o := range opts {
		o(c)
	}
	res := d.apply(c)
	if res.Err != nil {
		d.t.Fatalf("create session: %v", res.Err)
	}
	return res.Session
}

// acquire asks for one lock and returns the request's state.
func (d *driver) acquire(s SessionID, name string, m Mode, wait time.Duration) *RequestInfo {
	d.t.Helper()
	res := d.apply(&Acquire{Session: s, Locks: []LockSpec{{Name: name, Mode: m}}, Wait: wait})
	if res.Err != nil {
		d.t.Fatalf("acquire %s %v by %d: %v", name, m, s, res.Err)
	}
	return res.Request
}

func (d *driver) release(s SessionID, name string) Result {
	return d.apply(&Release{Session: s, Name: name})
}

// status returns a request's current status.
func (d *driver) status(id string) Status {
	d.t.Helper()
	r, ok := d.request(id)
	if !ok {
		d.t.Fatalf("request %q not found", id)
	}
	return r.Status
}

// request returns the one request with id, whatever its session; a test
// that gives two sessions one id looks them up by session.
func (d *driver) request(id string) (RequestInfo, bool) {
	d.t.Helper()
	r := d.tab.requests.withID(id)
	if r == nil {
		return RequestInfo{}, false
	}
	if r.sameID != nil {
		d.t.Fatalf("request id %q is used by more than one session", id)
	}
	return *d.tab.requestInfo(r), true
}

func (d *driver) holders(name string) []SessionID {
	li, _ := d.tab.Lock(name)
	var out []SessionID
	for _, h := range li.Holders {
		out = append(out, h.Session)
	}
	return out
}
