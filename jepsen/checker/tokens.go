package checker

import (
	"maps"
	"slices"
	"sort"
	"time"

	"github.com/lockd/lockd/jepsen/history"
)

// Tokens checks that fencing tokens follow real time. For two grants A
// and B of a name where A's ok precedes B's invoke, token_A < token_B
// when either is exclusive (write mode, not a semaphore), and
// token_A <= token_B otherwise (readers woken by one entry share a
// token). Two grants of a name with the same token where one is
// exclusive are a violation too (tokens are unique Raft indexes). The
// check is a sweep, O(n log n).
func Tokens(events []history.Event, cfg Config) Result {
	r := newResult("tokens")
	byName := grantsByName(events, limits(events, cfg), &r)
	for _, name := range slices.Sorted(maps.Keys(byName)) {
		r.Counts["names"]++
		duplicateTokens(name, byName[name], cfg, &r)
		tokenOrder(name, byName[name], cfg, &r)
	}
	return r
}

// tokenGrant is one name of an acknowledged acquire.
type tokenGrant struct {
	inv, ok time.Duration
	invIdx  int
	okIdx   int
	proc    int
	token   uint64
	excl    bool // write mode, not a semaphore
}

// grantsByName returns the grants of the acknowledged acquires, by name,
// in history order.
func grantsByName(events []history.Event, lims map[string]int, r *Result) map[string][]tokenGrant {
	byName := map[string][]tokenGrant{}
	for _, o := range ops(events) {
		if o.inv.F != history.Acquire || o.typ() != history.OK {
			continue
		}
		r.Counts["grants"]++
		for _, g := range o.comp.Granted {
			byName[g.Name] = append(byName[g.Name], tokenGrant{
				inv: o.inv.Time, ok: o.comp.Time, invIdx: o.inv.Index, okIdx: o.comp.Index,
				proc: o.inv.Process, token: g.Token, excl: isWrite(g.Mode) && lims[g.Name] <= 1,
			})
		}
	}
	return byName
}

// duplicateTokens flags a token granted twice on name where one of the
// grants is exclusive.
func duplicateTokens(name string, gs []tokenGrant, cfg Config, r *Result) {
	byTok := map[uint64][]int{}
	for i, g := range gs {
		byTok[g.token] = append(byTok[g.token], i)
	}
	for tok, is := range byTok {
		if len(is) < 2 {
			continue
		}
		for _, i := range is {
			if gs[i].excl {
				j := is[0]
				if j == i {
					j = is[1]
				}
				r.anomaly(cfg, "duplicate token %d on %q: exclusive grant event %d (process %d) and grant event %d (process %d)",
					tok, name, gs[i].okIdx, gs[i].proc, gs[j].okIdx, gs[j].proc)
				break
			}
		}
	}
}

// tokenOrder flags a grant B of name whose token is not above that of a
// grant A acknowledged before B was invoked (not below, when neither is
// exclusive). It sweeps B by invoke time, admitting every A whose ok
// came strictly before it.
func tokenOrder(name string, gs []tokenGrant, cfg Config, r *Result) {
	byInv := make([]int, len(gs))
	byOK := make([]int, len(gs))
	for i := range gs {
		byInv[i], byOK[i] = i, i
	}
	sort.SliceStable(byInv, func(a, b int) bool { return gs[byInv[a]].inv < gs[byInv[b]].inv })
	sort.SliceStable(byOK, func(a, b int) bool { return gs[byOK[a]].ok < gs[byOK[b]].ok })
	maxAll, maxExcl := -1, -1 // indexes into gs
	k := 0
	for _, b := range byInv {
		B := gs[b]
		for ; k < len(byOK) && gs[byOK[k]].ok < B.inv; k++ {
			a := byOK[k]
			if maxAll < 0 || gs[a].token > gs[maxAll].token {
				maxAll = a
			}
			if gs[a].excl && (maxExcl < 0 || gs[a].token > gs[maxExcl].token) {
				maxExcl = a
			}
		}
		var a int
		switch {
		case B.excl && maxAll >= 0 && gs[maxAll].token >= B.token:
			a = maxAll
		case !B.excl && maxExcl >= 0 && gs[maxExcl].token >= B.token:
			a = maxExcl
		case !B.excl && maxAll >= 0 && gs[maxAll].token > B.token:
			a = maxAll
		default:
			continue
		}
		A := gs[a]
		r.anomaly(cfg, "token order on %q: grant event %d (process %d, token %d) completed before grant invoked at event %d (process %d, token %d)",
			name, A.okIdx, A.proc, A.token, B.invIdx, B.proc, B.token)
	}
}
