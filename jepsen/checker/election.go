package checker

import (
	"slices"
	"sort"
	"time"

	"github.com/lockd/lockd/jepsen/history"
)

// Election checks leader election (the election workload) from what was
// seen of the leader: each (token, value) an election read returned, and
// what an acknowledged proclaim answered its hold now has. Every value
// in the run is unique, so a value names the campaign or proclaim that
// set it.
//
//   - Set by its holder: a value seen under token T was given by the
//     campaign that was granted T (or by a campaign of unknown outcome,
//     when T is not another process's grant), or proclaimed under T (ok
//     or of unknown outcome); never one nobody set, one whose campaign or
//     proclaim was refused, nor one of another token.
//   - In order: each observer (a worker, whose reads follow one another)
//     sees tokens in non-decreasing order and, under one token, never a
//     value older than one it saw (the holder's campaign first, then its
//     proclaims in order).
//   - Fresh: no read shows a leader whose token is below that of a
//     campaign acknowledged before the read was invoked, nor, under one
//     token, a value older than one acknowledged before it.
//
// That no two leaders acted at once (their writes to the fenced
// resource) is Safety's.
func Election(events []history.Event, cfg Config) Result {
	r := newResult("election")
	e := scanElection(events, &r)
	r.Counts["reads"] = len(e.reads)
	for _, s := range e.reads {
		e.checkSetter(s, "read", cfg, &r)
	}
	for _, s := range e.answers {
		e.checkSetter(s, "proclaim answer", cfg, &r)
	}
	e.checkOrder(cfg, &r)
	e.checkFresh(cfg, &r)
	leaders := map[uint64]bool{}
	for _, s := range e.reads {
		if s.token != 0 {
			leaders[s.token] = true
		}
	}
	r.Counts["leaders-seen"] = len(leaders)
	return r
}

// valueSetter is the campaign or proclaim that gave a value.
type valueSetter struct {
	proc     int
	proclaim bool
	token    uint64 // the hold's (a proclaim's, as sent); 0: not known (a campaign of unknown outcome)
	typ      history.Type
	rank     int // place among its hold's values: the campaign 0, its proclaims 1, 2, ...
	idx      int // history index of the invoke
}

// sighting is a (token, value) the run saw: an election read's leader
// (token 0: none), or a proclaim's answer.
type sighting struct {
	worker, proc int
	token        uint64
	value        string
	inv          time.Duration
	idx          int // history index of the completion
}

// ack is an acknowledged value: from its completion on, it (or a later
// one) is what reads must show.
type ack struct {
	at    time.Duration
	token uint64
	rank  int
}

// electionHistory is what Election reads from a history.
type electionHistory struct {
	setters map[string]valueSetter
	owner   map[uint64]int // token -> process of its acknowledged campaign
	reads   []sighting     // ok election reads, in order of invoke
	answers []sighting     // ok proclaims' answers
	acks    []ack          // acknowledged campaigns and proclaims, in order of completion
}

func scanElection(events []history.Event, r *Result) *electionHistory {
	e := &electionHistory{setters: map[string]valueSetter{}, owner: map[uint64]int{}}
	ranks := map[procToken]int{} // values given so far under each hold
	for _, o := range ops(events) {
		switch {
		case o.inv.F == history.Acquire && len(o.inv.Locks) == 1 && o.inv.Locks[0].Value != "":
			s := valueSetter{proc: o.inv.Process, typ: o.typ(), idx: o.inv.Index}
			if s.typ == history.OK && len(o.comp.Granted) > 0 {
				s.token = o.comp.Granted[0].Token
				e.owner[s.token] = s.proc
				e.acks = append(e.acks, ack{at: o.comp.Time, token: s.token})
				ranks[procToken{s.proc, s.token}] = 0
			}
			e.setters[o.inv.Locks[0].Value] = s
			r.Counts["campaigns-"+string(s.typ)]++
		case o.inv.F == history.Proclaim:
			k := procToken{o.inv.Process, o.inv.Token}
			ranks[k]++
			s := valueSetter{proc: o.inv.Process, proclaim: true, token: o.inv.Token, typ: o.typ(), rank: ranks[k], idx: o.inv.Index}
			e.setters[o.inv.Text] = s
			r.Counts["proclaims-"+string(s.typ)]++
			if s.typ == history.OK {
				e.acks = append(e.acks, ack{at: o.comp.Time, token: s.token, rank: s.rank})
				e.answers = append(e.answers, sighting{worker: o.inv.Worker, proc: o.inv.Process, token: o.comp.Token,
					value: o.comp.Text, inv: o.inv.Time, idx: o.comp.Index})
			}
		case o.inv.F == history.Leader && o.typ() == history.OK:
			if o.comp.Token == 0 {
				r.Counts["reads-no-leader"]++
			}
			e.reads = append(e.reads, sighting{worker: o.inv.Worker, proc: o.inv.Process, token: o.comp.Token,
				value: o.comp.Text, inv: o.inv.Time, idx: o.comp.Index})
		}
	}
	sort.SliceStable(e.acks, func(i, j int) bool { return e.acks[i].at < e.acks[j].at })
	return e
}

// setterOf returns the setter of a value seen under a leader's token, or
// an anomaly's text when it cannot have set it.
func (e *electionHistory) setterOf(s sighting) (valueSetter, string) {
	v, ok := e.setters[s.value]
	owner, owned := e.owner[s.token]
	switch {
	case !ok:
		return v, "a value nobody set"
	case v.typ == history.Fail:
		return v, "the value of a refused " + v.what()
	case v.token != 0 && v.token != s.token:
		return v, "the value of a " + v.what() + " under another token"
	case v.token == 0 && owned && owner != v.proc:
		return v, "the value of a campaign of unknown outcome by another process than the token's"
	}
	return v, ""
}

func (v valueSetter) what() string {
	if v.proclaim {
		return "proclaim"
	}
	return "campaign"
}

// checkSetter flags a (token, value) seen that its holder did not set.
func (e *electionHistory) checkSetter(s sighting, seenBy string, cfg Config, r *Result) {
	if s.token == 0 {
		return
	}
	r.Counts["sightings"]++
	v, bad := e.setterOf(s)
	if bad == "" {
		return
	}
	r.anomaly(cfg, "%s at event %d (process %d) shows token %d with value %q: %s (event %d, process %d, token %d, %s)",
		seenBy, s.idx, s.proc, s.token, s.value, bad, v.idx, v.proc, v.token, v.typ)
}

// checkOrder flags an observer that saw a token below one it saw before,
// or under one token a value older than one it saw.
func (e *electionHistory) checkOrder(cfg Config, r *Result) {
	type seen struct {
		token uint64
		rank  int
		idx   int
	}
	last := map[int]seen{} // worker -> its latest leader seen
	for _, s := range e.reads {
		if s.token == 0 {
			continue
		}
		v, bad := e.setterOf(s)
		prev, ok := last[s.worker]
		switch {
		case ok && s.token < prev.token:
			r.anomaly(cfg, "observer %d saw token %d at event %d after token %d at event %d", s.worker, s.token, s.idx, prev.token, prev.idx)
			continue
		case bad != "": // flagged by checkSetter; its rank means nothing
			continue
		case ok && s.token == prev.token && v.rank < prev.rank:
			r.anomaly(cfg, "observer %d saw under token %d value %q (rank %d) at event %d after one of rank %d at event %d",
				s.worker, s.token, s.value, v.rank, s.idx, prev.rank, prev.idx)
			continue
		}
		last[s.worker] = seen{s.token, v.rank, s.idx}
	}
}

// checkFresh flags a read that shows a leader, or a value of its, older
// than one acknowledged before the read was invoked.
func (e *electionHistory) checkFresh(cfg Config, r *Result) {
	reads := slices.Clone(e.reads)
	sort.SliceStable(reads, func(i, j int) bool { return reads[i].inv < reads[j].inv })
	var maxTok uint64
	maxRank := map[uint64]int{}
	k := 0
	for _, s := range reads {
		for ; k < len(e.acks) && e.acks[k].at < s.inv; k++ {
			a := e.acks[k]
			maxTok = max(maxTok, a.token)
			maxRank[a.token] = max(maxRank[a.token], a.rank)
		}
		if s.token == 0 {
			continue
		}
		if s.token < maxTok {
			r.anomaly(cfg, "stale read at event %d: leader token %d, below token %d acknowledged before it was invoked", s.idx, s.token, maxTok)
			continue
		}
		if v, bad := e.setterOf(s); bad == "" && v.rank < maxRank[s.token] {
			r.anomaly(cfg, "stale read at event %d: under token %d value %q (rank %d), older than one of rank %d acknowledged before it was invoked",
				s.idx, s.token, s.value, v.rank, maxRank[s.token])
		}
	}
}
