// Package history is the record of a Jepsen-style run: one JSON line per
// event, in the order the harness observed them.
//
// Every client operation is an invoke event followed, on the same
// process, by exactly one completion: ok (it happened), fail (it
// certainly did not happen) or info (unknown: it may have happened, at
// any time after the invoke). A process runs one operation at a time and
// is one lockd session; after an info it is retired and its worker goes
// on as a new process with a new session, as in Jepsen.
//
// The nemesis (Process = Nemesis) writes info events whose F is "start"
// or "stop" and whose Fault names the fault; the harness writes a
// "phase" event when the final (healed) phase begins.
package history

import (
	"bufio"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"sync"
	"time"
)

// Type is the kind of an event.
type Type string

// Event types.
const (
	Invoke Type = "invoke"
	OK     Type = "ok"
	Fail   Type = "fail"
	Info   Type = "info"
)

// Nemesis is the Process of fault events; Harness of phase markers;
// Intruder of the intruder's attempts on other clients' sessions.
const (
	Nemesis  = -1
	Harness  = -2
	Intruder = -3
)

// Intrude is an intruder's attempt, with its own token, to act through
// another client's session (Session): Names[0] says what it tried
// ("keepalive", "release", "surrender", "close", "acquire"; Names[1] the
// lock; or "cancel", Names[1] the pending request's id). ok: the cluster
// let it; fail: refused (Error: the code); info: unknown.
const Intrude = "intrude"

// Operation names (Event.F) of client processes.
const (
	// Acquire: Locks and Require in; Granted (and Token, the request's
	// token) on ok; Error on fail ("timeout", "deadlock", ...;
	// "cancelled": by someone else, the client never cancels a wait that
	// is still running).
	Acquire = "acquire"
	// Release: Names in (one hold of each). fail "not_held" means the
	// session no longer held them (lost by expiry).
	Release = "release"
	// Close deletes the process's session: every hold of the process
	// ends. An info close leaves them to expire after the session TTL.
	Close = "close"
	// Lost is a single info event: the client learned that its session
	// is gone (the cluster said so), or gave up on it (no keepalive got
	// through within its TTL, less a margin). Its holds ended, or end, at
	// some time after the session was last known alive: a client gives
	// up a margin before the cluster expires the session, so not
	// necessarily before this event, but by the process's ok close, which
	// deletes the session.
	Lost = "lost"
	// ResRead and ResWrite use the fenced resource under the locks named
	// in Granted with their tokens. ok: accepted (Seq orders it among
	// all accepted resource operations); fail "stale": rejected because
	// a conflicting holder with a larger token used it already. Value is
	// the element a write adds; Read what a read returned.
	ResRead  = "res-read"
	ResWrite = "res-write"
	// ResEnter and ResExit bracket a use of a semaphore-guarded resource
	// (unfenced: the checker counts concurrent users per Seq order).
	ResEnter = "res-enter"
	ResExit  = "res-exit"
	// Observe reads one lock from lockd (GET /v1/locks/{name}, a
	// linearizable read): Names[0] in; Holders on ok (none: nobody
	// holds it). It changes nothing, so any error is a fail.
	Observe = "observe"
	// FinalRead reads every register of the resource after the run
	// (Values: name -> elements), for the set-full check.
	FinalRead = "final-read"
	// Proclaim replaces the value of the process's hold on Names[0]
	// (POST /v1/proclaim): Token is the fencing token of the hold it
	// proclaims under and Text the value; on ok, Token and Text are what
	// the cluster answered the hold has now. fail: refused (Error:
	// "not_held", "session_not_found"); info: unknown, it may have been
	// applied at any time after the invoke.
	Proclaim = "proclaim"
	// Leader reads Names[0] as an election (GET /v1/elections/{name},
	// linearizable, blocking until the name's version passes the last one
	// the worker saw): on ok, Token and Text are the leader's fencing
	// token and value (Token 0: nobody leads). It changes nothing, so
	// any error is a fail.
	Leader = "leader"
)

// Nemesis and harness operation names.
const (
	Start = "start" // a fault begins (Fault, Targets; Error: it applied in part at most)
	Stop  = "stop"  // a fault ends
	// Unapplied is a fault drawn that failed before it applied anything
	// (Fault, Error): no window opens.
	Unapplied = "unapplied"
	Phase     = "phase" // Fault holds the phase that begins: "final"
	// Metrics is one sample of a node's resource use (Node; Values:
	// metric name -> [value], see SampledMetrics), for the soak check.
	Metrics = "metrics"
)

// SampledMetrics are the node metrics a Metrics event holds: resident
// memory (bytes), goroutines, open file descriptors, and the process's
// start time (Unix seconds), which tells a restarted node apart.
var SampledMetrics = []string{"process_resident_memory_bytes", "go_goroutines", "process_open_fds", "process_start_time_seconds"}

// Lock is one lock of an acquire request.
type Lock struct {
	Name   string `json:"name"`
	Mode   string `json:"mode,omitempty"` // "write" (default) or "read"
	Weight int    `json:"weight,omitempty"`
	Limit  int    `json:"limit,omitempty"` // semaphore permits; 0 or 1: a lock
	// Value is the value the hold takes (leader election: a campaign's).
	Value string `json:"value,omitempty"`
}

// Granted is one lock a grant holds, with its fencing token.
type Granted struct {
	Name  string `json:"name"`
	Mode  string `json:"mode,omitempty"`
	Token uint64 `json:"token"`
}

// Holder is one holder of a lock as lockd reported it (Observe).
type Holder struct {
	Session string `json:"session"`
	Mode    string `json:"mode,omitempty"`
	Token   uint64 `json:"token"`
}

// Event is one line of the history.
type Event struct {
	Index   int           `json:"index"`
	Type    Type          `json:"type"`
	Time    time.Duration `json:"time"` // since the start of the run (monotonic), ns
	Process int           `json:"process"`
	Worker  int           `json:"worker"` // the client (goroutine) running the process
	F       string        `json:"f"`

	Locks   []Lock `json:"locks,omitempty"`
	Require string `json:"require,omitempty"`
	// HoldTTL is an acquire's hold TTL (invoke and completion): its holds
	// end by themselves, at the earliest HoldTTL after the invoke.
	HoldTTL time.Duration `json:"hold_ttl,omitempty"`
	Names   []string      `json:"names,omitempty"`
	Granted []Granted     `json:"granted,omitempty"`
	Token   uint64        `json:"token,omitempty"`
	Holders []Holder      `json:"holders,omitempty"`

	Value int64 `json:"value,omitempty"`
	// Text is a hold's value (leader election): what a Proclaim sets or
	// answers, what a Leader read saw.
	Text string `json:"text,omitempty"`
	// Read is what a resource read returned: its last ReadTail values,
	// and ReadLen counts them all where there were more. No checker
	// judges reads (set-full judges the final read, Values), and a whole
	// register per read made a history grow with the square of its
	// length: an hour's soak wrote 11.7 GB, which no checker could load.
	Read    []int64            `json:"read,omitempty"`
	ReadLen int                `json:"read_len,omitempty"`
	Values  map[string][]int64 `json:"values,omitempty"`
	Seq     uint64             `json:"seq,omitempty"`

	Session string   `json:"session,omitempty"`
	Node    string   `json:"node,omitempty"`
	Error   string   `json:"error,omitempty"`
	Fault   string   `json:"fault,omitempty"`
	Targets []string `json:"targets,omitempty"`
	// Lead, on a nemesis start, is how long the fault took to apply
	// before the start was recorded: a power loss of a majority is
	// recorded only once its nodes are back and lead, but its first node
	// lost power Lead before. Began is the time the fault began.
	Lead time.Duration `json:"lead,omitempty"`
}

// Began is when a fault began: its start's Time less its Lead.
func (e Event) Began() time.Duration { return e.Time - e.Lead }

// ReadTail is how many of a read's last values an event keeps.
const ReadTail = 16

// trimRead keeps the last ReadTail values of e.Read and their count.
func (e *Event) trimRead() {
	if len(e.Read) <= ReadTail {
		return
	}
	if e.ReadLen == 0 {
		e.ReadLen = len(e.Read)
	}
	e.Read = append([]int64(nil), e.Read[len(e.Read)-ReadTail:]...)
}

// Recorder appends events to a history in memory and, optionally, to a
// JSON-lines file as they happen (so a crashed run still leaves its
// history). It is safe for concurrent use.
type Recorder struct {
	start time.Time

	mu     sync.Mutex
	events []Event
	w      *bufio.Writer
	f      *os.File
	err    error
}

// NewRecorder starts a history whose times count from now. path "" keeps
// it in memory only.
func NewRecorder(path string) (*Recorder, error) {
	r := &Recorder{start: time.Now()}
	if path != "" {
		f, err := os.Create(path)
		if err != nil {
			return nil, fmt.Errorf("history: %w", err)
		}
		r.f, r.w = f, bufio.NewWriter(f)
	}
	return r, nil
}

// Now returns the time since the start of the run.
func (r *Recorder) Now() time.Duration { return time.Since(r.start) }

// Start returns the wall-clock start of the run.
func (r *Recorder) Start() time.Time { return r.start }

// Add stamps e with its index and the current time and records it; it
// returns the stamped event.
func (r *Recorder) Add(e Event) Event {
	r.mu.Lock()
	defer r.mu.Unlock()
	e.Index = len(r.events)
	e.Time = time.Since(r.start)
	e.trimRead()
	r.events = append(r.events, e)
	if r.w != nil && r.err == nil {
		b, err := json.Marshal(e)
		if err == nil {
			b = append(b, '\n')
			_, err = r.w.Write(b)
		}
		r.err = err
	}
	return e
}

// Events returns a copy of the events recorded so far.
func (r *Recorder) Events() []Event {
	r.mu.Lock()
	defer r.mu.Unlock()
	return append([]Event(nil), r.events...)
}

// Close flushes and closes the file.
func (r *Recorder) Close() error {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.f == nil {
		return r.err
	}
	err := r.w.Flush()
	if cerr := r.f.Close(); err == nil {
		err = cerr
	}
	r.f = nil
	if r.err != nil {
		return fmt.Errorf("history: %w", r.err)
	}
	return err
}

// Read parses a JSON-lines history.
func Read(rd io.Reader) ([]Event, error) {
	var out []Event
	sc := bufio.NewScanner(rd)
	sc.Buffer(make([]byte, 1<<20), 64<<20)
	for line := 1; sc.Scan(); line++ {
		if len(sc.Bytes()) == 0 {
			continue
		}
		var e Event
		if err := json.Unmarshal(sc.Bytes(), &e); err != nil {
			return nil, fmt.Errorf("history line %d: %w", line, err)
		}
		e.trimRead() // histories written before reads were trimmed
		out = append(out, e)
	}
	return out, sc.Err()
}

// ReadFile parses the history at path.
func ReadFile(path string) ([]Event, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	return Read(f)
}

// Pair is a client operation: its invoke and its completion (nil while
// it has none: the run ended first, which counts as info).
type Pair struct {
	Invoke     Event
	Completion *Event
}

// Pairs matches every client invoke with the next completion of the same
// process, in invoke order. Nemesis and harness events, and Lost events,
// are left out.
func Pairs(events []Event) []Pair {
	var out []Pair
	open := map[int]int{} // process -> index in out
	for _, e := range events {
		if e.Process < 0 || e.F == Lost {
			continue
		}
		if e.Type == Invoke {
			open[e.Process] = len(out)
			out = append(out, Pair{Invoke: e})
			continue
		}
		if i, ok := open[e.Process]; ok {
			c := e
			out[i].Completion = &c
			delete(open, e.Process)
		}
	}
	return out
}
