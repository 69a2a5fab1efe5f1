package checker

import (
	"fmt"
	"hash/fnv"
	"slices"
	"sort"
	"strconv"
	"strings"

	"github.com/anishathalye/porcupine"

	"github.com/lockd/lockd/jepsen/history"
)

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
		Partition:                 partitionByPart,
		Init:                      initialStates,
		Step:                      modelStep,
		Equal:                     sameState,
		Hash:                      hashState,
		DescribeOperation:         describeOp,
		DescribeState:             describeState,
		DescribeOperationMetadata: describeMetadata,
	}
}

// initialStates: nothing held, no token granted.
func initialStates() []any { return []any{newState(nil, map[string]uint64{})} }

// modelStep is step for porcupine's untyped states and operations.
func modelStep(state, input, output any) []any {
	return step(state.(*LockState), input.(LockInput), output.(LockOutput))
}

func sameState(a, b any) bool { return a.(*LockState).key == b.(*LockState).key }

func describeState(s any) string { return s.(*LockState).String() }

// partitionByPart splits a history by LockInput.Part, in partition order.
func partitionByPart(h []porcupine.Operation) [][]porcupine.Operation {
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
}

func hashState(s any) uint64 {
	h := fnv.New64a()
	h.Write([]byte(s.(*LockState).key))
	return h.Sum64()
}

func describeMetadata(m any) string {
	if m == nil {
		return ""
	}
	return fmt.Sprint(m)
}

// step returns the states s may move to by the operation (none: the
// operation is impossible from s).
func step(s *LockState, in LockInput, out LockOutput) []any {
	switch in.Kind {
	case history.Observe:
		if observedMatches(s, in.Names[0], out.Observed) {
			return []any{s}
		}
		return nil
	case history.Lost:
		return []any{s.withoutProcess(in.Process)}
	case history.Close:
		if out.Type == history.OK {
			return []any{s.withoutProcess(in.Process)}
		}
		return []any{s, s.withoutProcess(in.Process)}
	case kindTokenFloor:
		return []any{s.withTokenFloor(out.Granted)}
	case kindHoldsExpired:
		names := in.Names
		return []any{s.without(func(_ int, h hold) bool { return h.Proc == in.Process && slices.Contains(names, h.Name) })}
	case history.Release:
		return stepRelease(s, in, out)
	case history.Acquire:
		return stepAcquire(s, in, out)
	}
	return []any{s}
}

// kindTokenFloor is the operation a segment starts with (segments.go):
// it raises the largest token of each name in its output's grants to
// that grant's token.
const kindTokenFloor = "token-floor"

// withTokenFloor raises s's largest tokens to those of floor.
func (s *LockState) withTokenFloor(floor []history.Granted) *LockState {
	maxTok := make(map[string]uint64, len(s.maxTok)+len(floor))
	for k, v := range s.maxTok {
		maxTok[k] = v
	}
	for _, g := range floor {
		maxTok[g.Name] = max(maxTok[g.Name], g.Token)
	}
	return newState(append([]hold(nil), s.holds...), maxTok)
}

// withoutProcess ends every hold of proc.
func (s *LockState) withoutProcess(proc int) *LockState {
	return s.without(func(_ int, h hold) bool { return h.Proc == proc })
}

func stepRelease(s *LockState, in LockInput, out LockOutput) []any {
	switch out.Type {
	case history.OK:
		idx := map[int]bool{}
		for _, n := range in.Names {
			i := s.holdsName(in.Process, n)
			switch {
			case i >= 0:
				idx[i] = true
			case !in.Expirable:
				return nil
			}
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
}

func stepAcquire(s *LockState, in LockInput, out LockOutput) []any {
	switch out.Type {
	case history.Fail:
		return []any{s}
	case history.OK:
		if n := grantAcquire(s, in, out.Granted); n != nil {
			return []any{n}
		}
		return nil
	default:
		return stepUnknownAcquire(s, in)
	}
}

// stepUnknownAcquire: an acquire of unknown outcome either did nothing,
// or granted the first grantable locks in request order (token unknown).
func stepUnknownAcquire(s *LockState, in LockInput) []any {
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
