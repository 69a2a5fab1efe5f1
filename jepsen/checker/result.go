// Package checker judges a recorded history (package history) of a
// Jepsen-style run of lockd: safety at the fenced resource, fencing-token
// order, linearizability of the lock operations (porcupine), set-full,
// hold TTLs from above, leader election (who set the values seen, in
// order), liveness after the final heal, and convergence of the nodes.
package checker

// Verdict of one checker.
type Verdict string

// Verdicts. Unknown (e.g. porcupine ran out of time) is not valid.
const (
	Valid   Verdict = "valid"
	Invalid Verdict = "invalid"
	Unknown Verdict = "unknown"
)

// Result is one checker's verdict with what it counted and, when
// invalid, the first few anomalies found.
type Result struct {
	Checker string         `json:"checker"`
	Verdict Verdict        `json:"verdict"`
	Counts  map[string]int `json:"counts,omitempty"`
	// Anomalies describe (at most a few dozen) violations, each citing
	// the history indexes of the events involved.
	Anomalies []string `json:"anomalies,omitempty"`
	// Files the checker wrote (relative to the run directory), e.g. the
	// porcupine visualisation.
	Files []string `json:"files,omitempty"`
	Note  string   `json:"note,omitempty"`
}

// OK reports whether the verdict is Valid.
func (r Result) OK() bool { return r.Verdict == Valid }
