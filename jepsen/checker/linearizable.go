package checker

import (
	"fmt"
	"hash/fnv"
	"os"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"time"

	"github.com/anishathalye/porcupine"

	"github.com/lockd/lockd/jepsen/history"
)

// Linearizable checks the lock operations (acquire, release, close and
// lost sessions) against a sequential lock table with porcupine. Resource
// operations are not part of the model. The history is partitioned into
// groups of names no acquire links (by the first path segment, so the
// hierarchy stays inside a partition). On a timeout the verdict is
// Unknown; when the history is not linearizable, porcupine's HTML
// visualisation is written to cfg.OutDir/linearizability.html.
func Linearizable(events []history.Event, cfg Config) Result {
	r := newResult("linearizable")
	hops := LockOperations(events, cfg)
	r.Counts["operations"] = len(hops)
	parts := map[int]bool{}
	for _, o := range hops {
		parts[o.Input.(LockInput).Part] = true
	}
	r.Counts["partitions"] = len(parts)
	if len(hops) == 0 {
		r.Note = "no lock operations"
		return r
	}
	timeout := cfg.LinearizabilityTimeout
	if timeout <= 0 {
		timeout = 2 * time.Minute
	}
	nm := LockModel()
	model := nm.ToModel()
	start := time.Now()
	res, info := porcupine.CheckOperationsVerbose(model, hops, timeout)
	r.Note = fmt.Sprintf("porcupine %s in %v", res, time.Since(start).Round(time.Millisecond))
	switch res {
	case porcupine.Ok:
		return r
	case porcupine.Unknown:
		r.Verdict = Unknown
		return r
	}
	r.anomaly(cfg, "lock operations are not linearizable (see the visualisation for the longest partial linearizations)")
	for p, part := range info.PartialLinearizationsOperations() {
		if len(part) == 0 {
			continue
		}
		longest := part[0]
		for _, l := range part {
			if len(l) > len(longest) {
				longest = l
			}
		}
		if n := len(longest); n > 0 {
			last := longest[n-1]
			r.anomaly(cfg, "partition %d: longest linearization (%d ops) ends with %s", p, n,
				describeOp(last.Input, last.Output))
		}
	}
	if cfg.OutDir != "" {
		info.AddAnnotations(nemesisAnnotations(events))
		path := filepath.Join(cfg.OutDir, "linearizability.html")
		if err := os.MkdirAll(cfg.OutDir, 0o755); err == nil {
			err = porcupine.VisualizePath(model, info, path)
			if err == nil {
				r.Files = append(r.Files, "linearizability.html")
			} else {
				r.Note += "; visualisation: " + err.Error()
			}
		}
	}
	return r
}

// LockInput is the input of a lock operation in the porcupine model.
type LockInput struct {
	Kind    string // history.Acquire, Release, Close or Lost
	Process int
	Part    int // partition
	Locks   []history.Lock
	Require string
	Names   []string
	Index   int // history index of the invoke (of the lost event)
}

// LockOutput is the outcome of a lock operation.
type LockOutput struct {
	Type    history.Type // ok, fail or info (info also: no completion)
	Granted []history.Granted
	Error   string
	// Observed: the holders an ok observe read (Proc -1: a session no
	// process of the history owns).
	Observed []Observed
}

// Observed is one holder an observe read returned.
type Observed struct {
	Proc  int
	Write bool
	Token uint64
}

// LockOperations converts the lock operations of a history to porcupine
// operations: Call = invoke time, Return = completion time, or after the
// last event for info and missing completions. A lost event becomes an
// operation that ends all the process's holds, from when the session was
// last known alive (the invoke of its latest acknowledged acquire or
// release or definitely failed acquire, else its first event) to the
// lost event; so does a release
// failing not_held or a failed close without an earlier lost.
func LockOperations(events []history.Event, cfg Config) []porcupine.Operation {
	if len(events) == 0 {
		return nil
	}
	lims := limits(events, cfg)
	// An expiry (lost, or inferred from a failed release or close) ends
	// the holds at an unknown time, but after the session was last seen
	// alive: the invoke of its latest acknowledged acquire or release,
	// else its first event. The tight window keeps porcupine's search
	// small.
	var end time.Duration
	procOf := map[string]int{}       // session -> process
	since := map[int]time.Duration{} // process -> alive since
	invoked := map[int]time.Duration{}
	expiryFrom := map[int]time.Duration{} // event index -> window start
	for _, e := range events {
		end = max(end, e.Time)
		if e.Process < 0 {
			continue
		}
		if e.Session != "" {
			procOf[e.Session] = e.Process
		}
		if _, ok := since[e.Process]; !ok {
			since[e.Process] = e.Time
		}
		switch {
		case e.Type == history.Invoke:
			invoked[e.Process] = e.Time
		case provesAlive(e):
			since[e.Process] = invoked[e.Process]
		case e.F == history.Lost, e.Type == history.Fail:
			expiryFrom[e.Index] = since[e.Process]
		}
	}
	end++

	// Partitions: union-find over the first segment of the names one
	// acquire links together.
	parent := map[string]string{}
	var find func(string) string
	find = func(x string) string {
		p, ok := parent[x]
		if !ok {
			parent[x] = x
			return x
		}
		if p == x {
			return x
		}
		root := find(p)
		parent[x] = root
		return root
	}
	root := func(name string) string { return strings.SplitN(name, "/", 2)[0] }
	for _, e := range events {
		if e.F == history.Acquire && e.Type == history.Invoke && len(e.Locks) > 0 {
			a := find(root(e.Locks[0].Name))
			for _, l := range e.Locks[1:] {
				if b := find(root(l.Name)); b != a {
					parent[b] = a
				}
			}
		}
	}
	partOf := map[string]int{}
	part := func(name string) int {
		r := find(root(name))
		p, ok := partOf[r]
		if !ok {
			p = len(partOf)
			partOf[r] = p
		}
		return p
	}

	clients := map[int]int{}
	client := func(proc int) int {
		c, ok := clients[proc]
		if !ok {
			c = len(clients)
			clients[proc] = c
		}
		return c
	}
	procParts := map[int]map[int]bool{} // partitions a process touched
	touch := func(proc, p int) {
		if procParts[proc] == nil {
			procParts[proc] = map[int]bool{}
		}
		procParts[proc][p] = true
	}

	type pending struct {
		in      LockInput
		out     LockOutput
		call    time.Duration
		ret     time.Duration
		client  int
		perProc bool // close/lost: copied into each partition of the process
	}
	var ps []pending
	lostSeen := map[int]bool{}
	expire := func(proc, idx int, at time.Duration) {
		ps = append(ps, pending{
			in:  LockInput{Kind: history.Lost, Process: proc, Index: idx},
			out: LockOutput{Type: history.Info}, call: expiryFrom[idx], ret: at,
			client: -1, perProc: true,
		})
	}
	for _, e := range events {
		if e.F == history.Lost && e.Process >= 0 && !lostSeen[e.Process] {
			lostSeen[e.Process] = true
			expire(e.Process, e.Index, e.Time)
		}
	}
	for _, o := range ops(events) {
		out := LockOutput{Type: o.typ(), Error: o.errString()}
		ret := end
		if o.comp != nil && o.comp.Type != history.Info {
			ret = o.comp.Time
			out.Granted = o.comp.Granted
		}
		in := LockInput{Kind: o.inv.F, Process: o.inv.Process, Index: o.inv.Index}
		p := pending{in: in, out: out, call: o.inv.Time, ret: ret, client: client(o.inv.Process)}
		switch o.inv.F {
		case history.Acquire:
			if len(o.inv.Locks) == 0 {
				continue
			}
			p.in.Require = o.inv.Require
			for _, l := range o.inv.Locks {
				if l.Limit == 0 {
					l.Limit = lims[l.Name]
				}
				p.in.Locks = append(p.in.Locks, l)
			}
			p.in.Part = part(o.inv.Locks[0].Name)
			touch(o.inv.Process, p.in.Part)
			ps = append(ps, p)
		case history.Release:
			// One operation per partition the names fall in.
			byPart := map[int][]string{}
			var order []int
			for _, n := range o.inv.Names {
				pp := part(n)
				if _, ok := byPart[pp]; !ok {
					order = append(order, pp)
				}
				byPart[pp] = append(byPart[pp], n)
			}
			for _, pp := range order {
				q := p
				q.in.Part, q.in.Names = pp, byPart[pp]
				touch(o.inv.Process, pp)
				ps = append(ps, q)
			}
			if out.Type == history.Fail && out.Error == "not_held" && !lostSeen[o.inv.Process] {
				lostSeen[o.inv.Process] = true
				expire(o.inv.Process, o.comp.Index, ret)
			}
		case history.Observe:
			// A read changes nothing: only what it saw can be wrong.
			if out.Type != history.OK || len(o.inv.Names) != 1 {
				continue
			}
			for _, h := range o.comp.Holders {
				proc, ok := procOf[h.Session]
				if !ok {
					proc = -1
				}
				p.out.Observed = append(p.out.Observed, Observed{Proc: proc, Write: isWrite(h.Mode), Token: h.Token})
			}
			p.in.Names = o.inv.Names
			p.in.Part = part(o.inv.Names[0])
			ps = append(ps, p)
		case history.Close:
			p.perProc = true
			ps = append(ps, p)
			if out.Type == history.Fail && !lostSeen[o.inv.Process] {
				lostSeen[o.inv.Process] = true
				expire(o.inv.Process, o.comp.Index, ret)
			}
		}
	}
	// A paused client whose fate is unknown (an operation ended info,
	// and it never learned its session was lost) may have lost its
	// session unnoticed: its holds may end any time after the session
	// was last proven alive.
	paused := pausedProcesses(events)
	var uncertain []int
	for _, e := range events {
		if e.Process >= 0 && paused[e.Process] && e.Type == history.Info && e.F != history.Lost && !lostSeen[e.Process] {
			lostSeen[e.Process] = true
			uncertain = append(uncertain, e.Process)
		}
	}
	for _, proc := range uncertain {
		ps = append(ps, pending{
			in:  LockInput{Kind: history.Lost, Process: proc, Index: -1},
			out: LockOutput{Type: history.Info}, call: since[proc], ret: end,
			client: -1, perProc: true,
		})
	}
	lane := len(clients)
	var hops []porcupine.Operation
	add := func(p pending, part int) {
		in := p.in
		in.Part = part
		c := p.client
		if c < 0 {
			c = lane
			lane++
		}
		hops = append(hops, porcupine.Operation{
			ClientId: c, Input: in, Output: p.out,
			Call: int64(p.call), Return: int64(p.ret),
			Metadata: fmt.Sprintf("event %d, process %d", p.in.Index, p.in.Process),
		})
	}
	for _, p := range ps {
		if !p.perProc {
			add(p, p.in.Part)
			continue
		}
		parts := make([]int, 0, len(procParts[p.in.Process]))
		for pp := range procParts[p.in.Process] {
			parts = append(parts, pp)
		}
		sort.Ints(parts)
		for _, pp := range parts {
			add(p, pp)
		}
	}
	return hops
}

// nemesisAnnotations marks faults in the visualisation.
func nemesisAnnotations(events []history.Event) []porcupine.Annotation {
	var out []porcupine.Annotation
	open := map[string]time.Duration{}
	for _, e := range events {
		switch {
		case e.Process == history.Nemesis && e.F == history.Start:
			open[e.Fault] = e.Time
		case e.Process == history.Nemesis && e.F == history.Stop:
			if t, ok := open[e.Fault]; ok {
				out = append(out, porcupine.Annotation{Tag: "nemesis", Start: int64(t), End: int64(e.Time),
					Description: e.Fault, Details: strings.Join(e.Targets, ","), BackgroundColor: "#fbe3d6"})
				delete(open, e.Fault)
			}
		case e.Process == history.Harness && e.F == history.Phase:
			out = append(out, porcupine.Annotation{Tag: "harness", Start: int64(e.Time), Description: "phase " + e.Fault})
		}
	}
	return out
}

// hold is one grant held in the model.
type hold struct {
	Proc   int
	Name   string
	Write  bool
	Weight int
	Limit  int
	Token  uint64 // 0: unknown (granted by an info acquire)
}

// LockState is a state of the lock-table model: the holds, sorted, and
// the largest token granted per name. It is immutable.
type LockState struct {
	holds  []hold
	maxTok map[string]uint64
	key    string
}

func newState(holds []hold, maxTok map[string]uint64) *LockState {
	sort.Slice(holds, func(i, j int) bool {
		a, b := holds[i], holds[j]
		if a.Name != b.Name {
			return a.Name < b.Name
		}
		if a.Proc != b.Proc {
			return a.Proc < b.Proc
		}
		if a.Write != b.Write {
			return !a.Write
		}
		if a.Token != b.Token {
			return a.Token < b.Token
		}
		return a.Weight < b.Weight
	})
	var sb strings.Builder
	for _, h := range holds {
		sb.WriteString(h.Name)
		sb.WriteString(" p")
		sb.WriteString(strconv.Itoa(h.Proc))
		if h.Write {
			sb.WriteString(" w")
		} else {
			sb.WriteString(" r")
		}
		if h.Limit > 1 {
			fmt.Fprintf(&sb, " %d/%d", h.Weight, h.Limit)
		}
		if h.Token == 0 {
			sb.WriteString(" @?")
		} else {
			sb.WriteString(" @" + strconv.FormatUint(h.Token, 10))
		}
		sb.WriteString("; ")
	}
	names := make([]string, 0, len(maxTok))
	for n := range maxTok {
		names = append(names, n)
	}
	sort.Strings(names)
	sb.WriteString("| max")
	for _, n := range names {
		sb.WriteString(" " + n + "=" + strconv.FormatUint(maxTok[n], 10))
	}
	return &LockState{holds: holds, maxTok: maxTok, key: sb.String()}
}

// String describes the state.
func (s *LockState) String() string { return "{" + s.key + "}" }

func (s *LockState) without(drop func(i int, h hold) bool) *LockState {
	holds := make([]hold, 0, len(s.holds))
	for i, h := range s.holds {
		if !drop(i, h) {
			holds = append(holds, h)
		}
	}
	return newState(holds, s.maxTok)
}

func (s *LockState) holdsName(proc int, name string) int {
	for i, h := range s.holds {
		if h.Proc == proc && h.Name == name {
			return i
		}
	}
	return -1
}

// grantable reports whether proc may be granted l on top of holds.
func grantable(holds []hold, proc int, l history.Lock, write bool) bool {
	w := max(l.Weight, 1)
	used := 0
	for _, h := range holds {
		if !related(h.Name, l.Name) {
			continue
		}
		if l.Limit > 1 && h.Name == l.Name {
			used += h.Weight
			continue
		}
		if h.Proc != proc && (h.Write || write) {
			return false
		}
	}
	return l.Limit <= 1 || used+w <= l.Limit
}

func required(require string, n int) int {
	switch require {
	case "any":
		return 1
	case "majority":
		return n/2 + 1
	}
	return n
}

// LockModel is the sequential specification of the lock table (see
// Linearizable). States are *LockState.
func LockModel() porcupine.NondeterministicModel {
	return porcupine.NondeterministicModel{
		Partition: func(h []porcupine.Operation) [][]porcupine.Operation {
			by := map[int][]porcupine.Operation{}
			var keys []int
			for _, o := range h {
				p := o.Input.(LockInput).Part
				if _, ok := by[p]; !ok {
					keys = append(keys, p)
				}
				by[p] = append(by[p], o)
			}
			sort.Ints(keys)
			out := make([][]porcupine.Operation, len(keys))
			for i, k := range keys {
				out[i] = by[k]
			}
			return out
		},
		Init: func() []any { return []any{newState(nil, map[string]uint64{})} },
		Step: func(state, input, output any) []any {
			return step(state.(*LockState), input.(LockInput), output.(LockOutput))
		},
		Equal: func(a, b any) bool { return a.(*LockState).key == b.(*LockState).key },
		Hash: func(s any) uint64 {
			h := fnv.New64a()
			h.Write([]byte(s.(*LockState).key))
			return h.Sum64()
		},
		DescribeOperation: func(input, output any) string { return describeOp(input, output) },
		DescribeState:     func(s any) string { return s.(*LockState).String() },
		DescribeOperationMetadata: func(m any) string {
			if m == nil {
				return ""
			}
			return fmt.Sprint(m)
		},
	}
}

func step(s *LockState, in LockInput, out LockOutput) []any {
	dropAll := func() *LockState {
		return s.without(func(_ int, h hold) bool { return h.Proc == in.Process })
	}
	switch in.Kind {
	case history.Observe:
		if observedMatches(s, in.Names[0], out.Observed) {
			return []any{s}
		}
		return nil
	case history.Lost:
		return []any{dropAll()}
	case history.Close:
		if out.Type == history.OK {
			return []any{dropAll()}
		}
		return []any{s, dropAll()}
	case history.Release:
		switch out.Type {
		case history.OK:
			idx := map[int]bool{}
			for _, n := range in.Names {
				i := s.holdsName(in.Process, n)
				if i < 0 {
					return nil
				}
				idx[i] = true
			}
			return []any{s.without(func(i int, _ hold) bool { return idx[i] })}
		case history.Fail:
			if out.Error != "not_held" {
				return []any{s}
			}
			for _, n := range in.Names {
				if s.holdsName(in.Process, n) >= 0 {
					return nil
				}
			}
			return []any{s}
		default:
			idx := map[int]bool{}
			for _, n := range in.Names {
				if i := s.holdsName(in.Process, n); i >= 0 {
					idx[i] = true
				}
			}
			return []any{s, s.without(func(i int, _ hold) bool { return idx[i] })}
		}
	case history.Acquire:
		switch out.Type {
		case history.Fail:
			return []any{s}
		case history.OK:
			if n := grantAcquire(s, in, out.Granted); n != nil {
				return []any{n}
			}
			return nil
		default:
			// Unknown: either nothing happened, or the first grantable
			// locks in request order were granted (token unknown).
			var gs []history.Granted
			holds := append([]hold(nil), s.holds...)
			k := required(in.Require, len(in.Locks))
			for _, l := range in.Locks {
				if len(gs) == k {
					break
				}
				if grantable(holds, in.Process, l, isWrite(l.Mode)) {
					gs = append(gs, history.Granted{Name: l.Name, Mode: l.Mode})
					holds = append(holds, hold{Proc: in.Process, Name: l.Name, Write: isWrite(l.Mode), Weight: max(l.Weight, 1), Limit: l.Limit})
				}
			}
			if len(gs) < k {
				return []any{s}
			}
			return []any{s, newState(holds, s.maxTok)}
		}
	}
	return []any{s}
}

// observedMatches reports whether a read of name's holders agrees with
// the state: the same processes in the same modes, with the same tokens
// where the model knows them.
func observedMatches(s *LockState, name string, seen []Observed) bool {
	var want []hold
	for _, h := range s.holds {
		if h.Name == name {
			want = append(want, h)
		}
	}
	if len(want) != len(seen) {
		return false
	}
	used := make([]bool, len(want))
	for _, o := range seen {
		found := false
		for i, h := range want {
			if !used[i] && h.Proc == o.Proc && h.Write == o.Write && (h.Token == 0 || h.Token == o.Token) {
				used[i], found = true, true
				break
			}
		}
		if !found {
			return false
		}
	}
	return true
}

// grantAcquire applies an acknowledged grant, or returns nil when the
// state does not allow it.
func grantAcquire(s *LockState, in LockInput, granted []history.Granted) *LockState {
	if len(granted) < required(in.Require, len(in.Locks)) || len(granted) > len(in.Locks) {
		return nil
	}
	holds := append([]hold(nil), s.holds...)
	maxTok := s.maxTok
	copied := false
	for _, g := range granted {
		var l history.Lock
		found := false
		for _, x := range in.Locks {
			if x.Name == g.Name {
				l, found = x, true
				break
			}
		}
		if !found {
			return nil
		}
		mode := g.Mode
		if mode == "" {
			mode = l.Mode
		}
		write := isWrite(mode)
		if !grantable(holds, in.Process, l, write) {
			return nil
		}
		prev := maxTok[g.Name]
		if write && l.Limit <= 1 && g.Token <= prev || g.Token < prev {
			return nil
		}
		if g.Token > prev {
			if !copied {
				maxTok = make(map[string]uint64, len(s.maxTok)+1)
				for k, v := range s.maxTok {
					maxTok[k] = v
				}
				copied = true
			}
			maxTok[g.Name] = g.Token
		}
		holds = append(holds, hold{Proc: in.Process, Name: g.Name, Write: write, Weight: max(l.Weight, 1), Limit: l.Limit, Token: g.Token})
	}
	return newState(holds, maxTok)
}

func describeOp(input, output any) string {
	in, out := input.(LockInput), output.(LockOutput)
	var sb strings.Builder
	fmt.Fprintf(&sb, "p%d %s", in.Process, in.Kind)
	switch in.Kind {
	case history.Acquire:
		var ls []string
		for _, l := range in.Locks {
			d := l.Name + ":" + map[bool]string{true: "w", false: "r"}[isWrite(l.Mode)]
			if l.Limit > 1 {
				d += fmt.Sprintf("/%d", l.Limit)
			}
			ls = append(ls, d)
		}
		fmt.Fprintf(&sb, " [%s]", strings.Join(ls, " "))
		if in.Require != "" && in.Require != "all" {
			sb.WriteString(" " + in.Require)
		}
	case history.Release, history.Observe:
		fmt.Fprintf(&sb, " %v", in.Names)
	}
	if in.Kind == history.Lost {
		return sb.String()
	}
	sb.WriteString(" -> " + string(out.Type))
	for _, g := range out.Granted {
		fmt.Fprintf(&sb, " %s@%d", g.Name, g.Token)
	}
	for _, o := range out.Observed {
		fmt.Fprintf(&sb, " p%d:%s@%d", o.Proc, map[bool]string{true: "w", false: "r"}[o.Write], o.Token)
	}
	if out.Error != "" {
		sb.WriteString(" " + out.Error)
	}
	return sb.String()
}
