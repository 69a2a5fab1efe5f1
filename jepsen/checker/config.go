package checker

import (
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/lockd/lockd/jepsen/history"
)

// Config tells the checkers what the run was.
type Config struct {
	// Workload is the workload's name ("mutex", "rw", "semaphore",
	// "deadlock", "multi", ...). Only "deadlock" changes a rule (Liveness);
	// "election" adds the Election checker.
	Workload string
	// Limit is the semaphore's permits when an acquire does not say
	// (Lock.Limit wins when set).
	Limit int
	// Fenced is whether the resource checked tokens. An unfenced run is a
	// negative control: the checkers judge it the same way, and say so.
	Fenced bool
	// OutDir is where checkers write files (the porcupine
	// visualisation); "" writes none.
	OutDir string
	// LinearizabilityTimeout bounds porcupine; 0 means 2 minutes.
	LinearizabilityTimeout time.Duration
	// LivenessBound is how long an acquire in the final phase may take;
	// 0 means 30 seconds.
	LivenessBound time.Duration
	// MaxAnomalies caps Result.Anomalies; 0 means 30.
	MaxAnomalies int
	// Intruder says the run had an intruder (ACLs on): Ownership must
	// then see refused attempts to be valid.
	Intruder bool
	// SessionTTL is the clients' session TTL (Ownership's loss window);
	// 0 means 10 seconds, the suite's default.
	SessionTTL time.Duration
}

func (c Config) maxAnomalies() int {
	if c.MaxAnomalies <= 0 {
		return 30
	}
	return c.MaxAnomalies
}

// All runs every history checker (Safety, Tokens, Linearizable, Liveness;
// SetFull when the run wrote to the resource, Ownership with an
// intruder, HoldTTL with hold TTLs, Election for leader elections,
// Resources with metrics). Convergence
// needs the live cluster and is run separately.
func All(events []history.Event, cfg Config) []Result {
	out := []Result{
		Safety(events, cfg),
		Tokens(events, cfg),
		Linearizable(events, cfg),
	}
	for _, e := range events {
		if e.F == history.ResWrite || e.F == history.FinalRead {
			out = append(out, SetFull(events, cfg))
			break
		}
	}
	if cfg.Intruder {
		out = append(out, Ownership(events, cfg))
	}
	if slices.ContainsFunc(events, func(e history.Event) bool { return e.F == history.Acquire && e.HoldTTL > 0 }) {
		out = append(out, HoldTTL(events, cfg))
	}
	if cfg.Workload == "election" || slices.ContainsFunc(events, func(e history.Event) bool {
		return e.F == history.Proclaim || e.F == history.Leader
	}) {
		out = append(out, Election(events, cfg))
	}
	if slices.ContainsFunc(events, func(e history.Event) bool { return e.F == history.Metrics }) {
		out = append(out, Resources(events, cfg))
	}
	return append(out, Liveness(events, cfg))
}

// newResult starts a Result; finish sets its verdict from its anomalies.
func newResult(name string) Result {
	return Result{Checker: name, Verdict: Valid, Counts: map[string]int{}}
}

// anomaly records a violation: the verdict becomes Invalid, the text is
// kept while under the cap, and "violations" counts them all.
func (r *Result) anomaly(cfg Config, format string, a ...any) {
	r.Verdict = Invalid
	r.Counts["violations"]++
	if len(r.Anomalies) < cfg.maxAnomalies() {
		r.Anomalies = append(r.Anomalies, fmt.Sprintf(format, a...))
	}
}

// isWrite: an empty mode means write.
func isWrite(mode string) bool { return mode != "read" }

// related reports whether a and b are the same name or one is an
// ancestor of the other in the '/' hierarchy.
func related(a, b string) bool {
	if len(a) > len(b) {
		a, b = b, a
	}
	return a == b || strings.HasPrefix(b, a) && b[len(a)] == '/'
}

// conflict reports whether two holds of different processes conflict.
func conflict(nameA, modeA, nameB, modeB string) bool {
	return related(nameA, nameB) && (isWrite(modeA) || isWrite(modeB))
}

// op is a client operation: its invoke and completion (nil: none, which
// counts as info).
type op struct {
	inv  history.Event
	comp *history.Event
}

func (o op) typ() history.Type {
	if o.comp == nil {
		return history.Info
	}
	return o.comp.Type
}

// granted prefers the completion's Granted (an acquire's), else the
// invoke's (a resource op names its lock on the invoke).
func (o op) granted() []history.Granted {
	if o.comp != nil && len(o.comp.Granted) > 0 {
		return o.comp.Granted
	}
	return o.inv.Granted
}

func (o op) value() int64 {
	if o.inv.Value != 0 || o.comp == nil {
		return o.inv.Value
	}
	return o.comp.Value
}

func (o op) errString() string {
	if o.comp == nil {
		return ""
	}
	return o.comp.Error
}

func ops(events []history.Event) []op {
	ps := history.Pairs(events)
	out := make([]op, len(ps))
	for i, p := range ps {
		out[i] = op{inv: p.Invoke, comp: p.Completion}
	}
	return out
}

// limits returns each name's semaphore permits (>1 only), from the
// acquires' Locks, falling back to cfg.Limit for the semaphore workload.
func limits(events []history.Event, cfg Config) map[string]int {
	out := map[string]int{}
	for _, e := range events {
		if e.F != history.Acquire || e.Type != history.Invoke {
			continue
		}
		for _, l := range e.Locks {
			lim := l.Limit
			if lim == 0 && cfg.Workload == "semaphore" {
				lim = cfg.Limit
			}
			if lim > 1 {
				out[l.Name] = lim
			}
		}
	}
	return out
}

// LostProcesses are the processes whose session expired: a lost event or
// a release that failed not_held (without hold TTLs).
func LostProcesses(events []history.Event) map[int]bool {
	out := map[int]bool{}
	ttl := map[int]bool{} // processes whose holds have a TTL
	for _, e := range events {
		if e.F == history.Acquire && e.HoldTTL > 0 {
			ttl[e.Process] = true
		}
		// A hold with a TTL ends by itself: its release finding nothing
		// says nothing of the session (the checkers bound its hold by
		// its deadline instead).
		if e.F == history.Lost || e.F == history.Release && e.Type == history.Fail && e.Error == "not_held" && !ttl[e.Process] {
			out[e.Process] = true
		}
	}
	return out
}

// procToken names a grant: its process and its token.
type procToken struct {
	proc  int
	token uint64
}

// holdDeadlines returns when each grant made with a hold TTL may have
// ended by itself at the earliest: its acquire's invoke plus the TTL.
func holdDeadlines(events []history.Event) map[procToken]time.Duration {
	out := map[procToken]time.Duration{}
	invoked := map[int]time.Duration{}
	for _, e := range events {
		switch {
		case e.Process < 0 || e.F != history.Acquire:
		case e.Type == history.Invoke:
			invoked[e.Process] = e.Time
		case e.Type == history.OK && e.HoldTTL > 0:
			for _, g := range e.Granted {
				out[procToken{e.Process, g.Token}] = invoked[e.Process] + e.HoldTTL
			}
		}
	}
	return out
}

// definiteFailure: acquire answers that were decided in the log for a
// live session (so they prove the session was alive when applied).
func definiteFailure(code string) bool {
	switch code {
	case "timeout", "deadlock", "limit_mismatch", "poorly_ordered_access":
		return true
	}
	return false
}

// provesAlive reports whether the completion e of an operation proves
// that its process's session was alive when the operation was applied:
// an acknowledged acquire or release, or a definite acquire failure.
func provesAlive(e history.Event) bool {
	switch {
	case e.Type == history.OK && (e.F == history.Acquire || e.F == history.Release):
		return true
	case e.Type == history.Fail && e.F == history.Acquire && definiteFailure(e.Error):
		return true
	}
	return false
}

// lastAlive returns, per process, the history index of the last
// completion that proves its session alive (see provesAlive).
func lastAlive(events []history.Event) map[int]int {
	out := map[int]int{}
	for _, e := range events {
		if e.Process >= 0 && provesAlive(e) {
			out[e.Process] = e.Index
		}
	}
	return out
}

// pausedProcesses are the processes a client-pause fault stalled (its
// Targets name "process-N"). Only such a client can miss that its session
// expired: a running client's keepalive loop gives up before the server
// expires the session.
func pausedProcesses(events []history.Event) map[int]bool {
	out := map[int]bool{}
	for _, e := range events {
		if e.Process != history.Nemesis || e.F != history.Start || e.Fault != "client-pause" {
			continue
		}
		for _, t := range e.Targets {
			var n int
			if _, err := fmt.Sscanf(t, "process-%d", &n); err == nil {
				out[n] = true
			}
		}
	}
	return out
}
