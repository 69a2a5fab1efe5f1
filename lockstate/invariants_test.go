package lockstate

import (
	"cmp"
	"fmt"
	"reflect"
	"slices"
	"strings"
)

// The invariants TestModelRandom and FuzzOps check after every entry. They
// read the table only through its public views and re-derive every rule
// here with plain scans, without the engine's helpers (the two name and
// mode predicates are the reference model's).

type violation struct {
	check string
	msg   string
}

// needOf is k for a request's requirement, derived here.
func needOf(r *RequestRecord) int {
	switch r.Require {
	case "any":
		return 1
	case "majority":
		return len(r.Locks)/2 + 1
	}
	return len(r.Locks)
}

func checkInvariants(pre, post *tabView, e Entry, res Result, t *Table, maxTok map[string]uint64) []violation {
	var out []violation
	add := func(check, format string, args ...any) {
		out = append(out, violation{check, fmt.Sprintf(format, args...)})
	}
	checkHolders(post, add)
	checkWaiters(post, add)
	checkFairness(pre, post, e, res, add)
	checkTokens(pre, post, e, res, t, maxTok, add)
	checkVersions(pre, post, e, t, add)
	checkGraph(post, add)
	checkDeadlines(post, add)
	checkViews(post, t, add)
	checkResult(pre, post, e, res, add)
	return out
}

type addFunc func(check, format string, args ...any)

// checkHolders: no two conflicting holders anywhere in the hierarchy, and
// every hold well formed.
func checkHolders(v *tabView, add addFunc) {
	for i, n1 := range v.names {
		li := v.locks[n1]
		seen := map[SessionID]bool{}
		reads, writes, weight := 0, 0, 0
		for _, h := range li.Holders {
			if seen[h.Session] {
				add("holders", "%s: session %d holds it twice", n1, h.Session)
			}
			seen[h.Session] = true
			if h.Count < 1 {
				add("holders", "%s: session %d holds it with count %d", n1, h.Session, h.Count)
			}
			if h.Mode == Read {
				reads++
				if h.Weight != 1 {
					add("semaphore-weight", "%s: read hold by %d has weight %d", n1, h.Session, h.Weight)
				}
			} else {
				writes++
				weight += h.Weight
			}
			if h.Weight < 1 || h.Weight > li.Limit {
				add("semaphore-weight", "%s: hold by session %d has weight %d, limit %d", n1, h.Session, h.Weight, li.Limit)
			}
		}
		if len(li.Holders) > 0 && li.Limit < 1 {
			add("semaphore-weight", "%s is held but has limit %d", n1, li.Limit)
		}
		if reads > 0 && writes > 0 {
			add("holders", "%s has read and write holders at once: %+v", n1, li.Holders)
		}
		if writes > 1 && weight > li.Limit {
			add("holders", "%s has write holders of total weight %d over limit %d: %+v", n1, weight, li.Limit, li.Holders)
		}
		for _, n2 := range v.names[i+1:] {
			if !refRelated(n1, n2) {
				continue
			}
			for _, h1 := range li.Holders {
				for _, h2 := range v.locks[n2].Holders {
					if h1.Session != h2.Session && refModesConflict(h1.Mode, h2.Mode) {
						add("holders", "conflicting holders: session %d %s %s and session %d %s %s",
							h1.Session, h1.Mode, n1, h2.Session, h2.Mode, n2)
					}
				}
			}
		}
	}
}

// holderBlocked re-derives whether a hold of another session, or a
// lock-delay, keeps sp from session s.
func holderBlocked(v *tabView, s SessionID, sp LockSpec) string {
	for _, name := range v.names {
		if !refRelated(name, sp.Name) {
			continue
		}
		li := v.locks[name]
		if li.DelayedUntil != 0 {
			return "lock-delay on " + name
		}
		if name == sp.Name && sp.Mode == Write {
			sum := sp.Weight
			for _, h := range li.Holders {
				if h.Session != s && h.Mode == Write {
					sum += h.Weight
				}
			}
			if sum > li.Limit {
				return fmt.Sprintf("write weights %d over limit %d on %s", sum, li.Limit, name)
			}
		}
		for _, h := range li.Holders {
			if h.Session != s && refModesConflict(h.Mode, sp.Mode) && !(name == sp.Name && h.Mode == Write && sp.Mode == Write) {
				return fmt.Sprintf("session %d holds %s %s", h.Session, name, h.Mode)
			}
		}
	}
	return ""
}

// waiterBlocked re-derives whether a request that arrived before seq waits
// for a lock that conflicts with sp.
func waiterBlocked(v *tabView, seq uint64, sp LockSpec) string {
	for _, p := range v.reqOrder {
		if p.Status != Pending || p.Seq >= seq {
			continue
		}
		for _, q := range p.Locks {
			if refRelated(q.Name, sp.Name) && refModesConflict(q.Mode, sp.Mode) {
				return fmt.Sprintf("earlier request %s (seq %d) waits for %s %s", p.ID, p.Seq, q.Name, q.Mode)
			}
		}
	}
	return ""
}

// grantableNow re-derives whether constituent i of pending r could be
// granted, and if not, why.
func grantableNow(v *tabView, r *RequestRecord, i int) (bool, string) {
	sp := r.Locks[i]
	upgrade := i < len(r.Upgrade) && r.Upgrade[i]
	if own := v.holdOf(r.Session, sp.Name); upgrade && own != nil {
		if own.Mode >= sp.Mode && own.Weight >= sp.Weight {
			return true, "reentrant"
		}
		why := holderBlocked(v, r.Session, sp)
		return why == "", why
	}
	if why := holderBlocked(v, r.Session, sp); why != "" {
		return false, why
	}
	why := waiterBlocked(v, r.Seq, sp)
	return why == "", why
}

// checkWaiters: no request is left waiting that the rules would grant,
// and the queues show exactly the pending requests.
func checkWaiters(v *tabView, add addFunc) {
	for _, r := range v.pending() {
		ok := 0
		var whys []string
		for i := range r.Locks {
			g, why := grantableNow(v, r, i)
			if g {
				ok++
			}
			whys = append(whys, fmt.Sprintf("%s %s: %v (%s)", r.Locks[i].Name, r.Locks[i].Mode, g, why))
		}
		if ok >= needOf(r) {
			add("grantable-waiter", "request %s (session %d, seq %d, upgrade %v) could be granted (%d of %d needed) but waits: %s",
				r.ID, r.Session, r.Seq, r.Upgrade, ok, needOf(r), strings.Join(whys, "; "))
		}
		if r.Need != needOf(r) {
			add("views", "request %s needs %d, want %d", r.ID, r.Need, needOf(r))
		}
		for _, sp := range r.Locks {
			li := v.locks[sp.Name]
			n := 0
			if li != nil {
				for _, w := range li.Waiters {
					if w.RequestID == r.ID && w.Session == r.Session {
						n++
						if w.Mode != sp.Mode || w.Weight != sp.Weight || w.Seq != r.Seq {
							add("views", "waiter %+v on %s does not match request %s", w, sp.Name, r.ID)
						}
					}
				}
			}
			if n != 1 {
				add("views", "pending request %s appears %d times among the waiters of %s", r.ID, n, sp.Name)
			}
		}
	}
	for _, name := range v.names {
		var last uint64
		for _, w := range v.locks[name].Waiters {
			if r := v.reqs[reqKey{w.Session, w.RequestID}]; r == nil || r.Status != Pending {
				add("views", "%s lists waiter %s, which is not pending", name, w.RequestID)
			}
			if w.Seq <= last {
				add("views", "%s lists its waiters out of arrival order", name)
			}
			last = w.Seq
		}
	}
}

// checkFairness: a request granted by this entry was not granted ahead of
// an earlier conflicting waiter (own requests count; upgrades are exempt).
// An earlier request that is still pending after the entry was pending
// when the grant happened, since requests only ever get later arrival
// numbers.
func checkFairness(pre, post *tabView, e Entry, res Result, add addFunc) {
	for _, r := range post.reqOrder {
		if r.Status != Granted || r.Ended != e.Index {
			continue
		}
		before := pre.reqs[reqKey{r.Session, r.ID}]
		if before != nil && before.Status != Pending {
			continue // a request id reused after its first request ended: not this grant
		}
		for _, g := range r.Granted {
			i := slices.IndexFunc(r.Locks, func(sp LockSpec) bool { return sp.Name == g.Name })
			if i < 0 {
				add("result", "request %s was granted %s, which it did not ask for", r.ID, g.Name)
				continue
			}
			sp := r.Locks[i]
			if before != nil && i < len(before.Upgrade) && before.Upgrade[i] {
				continue // upgrade or reentrant: waits for holders only
			}
			if before == nil && heldBefore(pre, res.Events, r.ID, r.Session, sp.Name) {
				continue // asked for while holding the name
			}
			for _, w := range post.pending() {
				if w.Seq >= r.Seq {
					continue
				}
				for _, q := range w.Locks {
					if refRelated(q.Name, sp.Name) && refModesConflict(q.Mode, sp.Mode) {
						add("fairness", "request %s (session %d, seq %d) was granted %s %s ahead of earlier request %s (session %d, seq %d) waiting for %s %s",
							r.ID, r.Session, r.Seq, sp.Name, sp.Mode, w.ID, w.Session, w.Seq, q.Name, q.Mode)
					}
				}
			}
		}
	}
}

// heldBefore reports whether session s may have held name when request id
// was made in this entry: it held it before the entry, or was granted it by
// this entry before id's first grant (deadlines fire before the command).
func heldBefore(pre *tabView, events []Event, id string, s SessionID, name string) bool {
	if pre.holdOf(s, name) != nil {
		return true
	}
	for _, ev := range events {
		if ev.Kind == EvGranted && ev.RequestID == id {
			return false
		}
		if ev.Kind == EvGranted && ev.Session == s && ev.Name == name {
			return true
		}
	}
	return false
}

// checkTokens: a new grant's token is the entry's index and tokens rise
// strictly per name from entry to entry; a reentrant grant keeps its token;
// Check agrees with the holders.
func checkTokens(pre, post *tabView, e Entry, res Result, t *Table, maxTok map[string]uint64, add addFunc) {
	issued := map[string]uint64{}
	for _, name := range post.names {
		for _, h := range post.locks[name].Holders {
			if old := pre.holdOf(h.Session, name); old != nil && old.Token == h.Token {
				if h.Mode > old.Mode || h.Weight > old.Weight {
					add("token", "%s: session %d's hold was upgraded (%s/%d to %s/%d) but kept token %d",
						name, h.Session, old.Mode, old.Weight, h.Mode, h.Weight, h.Token)
				}
				continue
			}
			if h.Token != e.Index {
				add("token", "%s: new or changed hold of session %d has token %d, entry index %d", name, h.Session, h.Token, e.Index)
			}
			if h.Token <= maxTok[name] {
				add("token", "%s: token %d issued after token %d", name, h.Token, maxTok[name])
			}
			issued[name] = max(issued[name], h.Token)
		}
	}
	for _, ev := range res.Events {
		if ev.Kind != EvGranted {
			continue
		}
		if ev.Token != e.Index {
			if old := pre.holdOf(ev.Session, ev.Name); old == nil || old.Token != ev.Token {
				add("token", "grant of %s to session %d carries token %d: neither the entry index %d nor its reentrant hold's token",
					ev.Name, ev.Session, ev.Token, e.Index)
			}
		}
	}
	for name, tok := range issued {
		maxTok[name] = max(maxTok[name], tok)
	}
	for _, r := range post.reqOrder {
		if r.Status == Granted {
			var top uint64
			for _, g := range r.Granted {
				top = max(top, g.Token)
			}
			if r.Token != top || len(r.Granted) != needOf(r) {
				add("result", "granted request %s: token %d (max of grants %d), %d grants for need %d", r.ID, r.Token, top, len(r.Granted), needOf(r))
			}
		}
	}
	// Check(name, token): valid for the tokens of holds on the name and its
	// ancestors; current is the newest of them.
	for _, name := range modelNames {
		var cur uint64
		var live []uint64
		for _, n := range post.names {
			if n == name || strings.HasPrefix(name, n+"/") {
				for _, h := range post.locks[n].Holders {
					cur = max(cur, h.Token)
					live = append(live, h.Token)
				}
			}
		}
		for _, tok := range append(slices.Clone(live), 0, maxTok[name], e.Index) {
			valid, current := t.Check(name, tok)
			want := tok != 0 && slices.Contains(live, tok)
			if valid != want || current != cur {
				add("token", "Check(%q, %d) = %v, %d; want %v, %d", name, tok, valid, current, want, cur)
			}
		}
	}
}

// checkVersions: a name's version is the index of the last entry that
// changed its holders or waiters. A lock-delay ending may also bump it.
func checkVersions(pre, post *tabView, e Entry, t *Table, add addFunc) {
	for _, name := range modelNames {
		if post.versions[name] < pre.versions[name] {
			add("version-decrease", "Version(%q) went down from %d to %d (in use before: %v, after: %v)",
				name, pre.versions[name], post.versions[name], pre.locks[name] != nil, post.locks[name] != nil)
		}
		if pre.locks[name] != nil && post.locks[name] == nil && post.versions[name] != e.Index {
			add("version", "%s was emptied at index %d but Version says %d", name, e.Index, post.versions[name])
		}
	}
	for _, name := range post.names {
		li := post.locks[name]
		if t.Version(name) != li.Version {
			add("version", "Version(%q) = %d, Locks says %d", name, t.Version(name), li.Version)
		}
		old := pre.locks[name]
		if old == nil {
			if li.Version != e.Index {
				add("version", "%s appeared at index %d with version %d", name, e.Index, li.Version)
			}
			continue
		}
		changed := !slices.Equal(old.Holders, li.Holders) || !slices.Equal(old.Waiters, li.Waiters)
		switch {
		case li.Version < old.Version:
			add("version", "%s: version went down from %d to %d", name, old.Version, li.Version)
		case changed && li.Version != e.Index:
			add("version", "%s: queue changed at index %d but version is %d\n before %+v\n after  %+v", name, e.Index, li.Version, *old, *li)
		case !changed && li.Version != old.Version && !(old.DelayedUntil != li.DelayedUntil && li.Version == e.Index):
			add("version-spurious", "%s: version moved from %d to %d although its queue did not change: %+v", name, old.Version, li.Version, *li)
		}
	}
}

// checkGraph: the wait-for graph, built here from holders and waiters, has
// no cycle, and WaitGraph reports the same edges.
func checkGraph(v *tabView, add addFunc) {
	succ := map[SessionID][]SessionID{}
	addEdge := func(a, b SessionID) {
		if !slices.Contains(succ[a], b) {
			succ[a] = append(succ[a], b)
		}
	}
	pend := v.pending()
	for _, r := range pend {
		for i, sp := range r.Locks {
			for _, name := range v.names {
				if !refRelated(name, sp.Name) {
					continue
				}
				li := v.locks[name]
				sum := sp.Weight
				for _, h := range li.Holders {
					if h.Session != r.Session && h.Mode == Write {
						sum += h.Weight
					}
				}
				for _, h := range li.Holders {
					if h.Session == r.Session || !refModesConflict(h.Mode, sp.Mode) {
						continue
					}
					if name == sp.Name && h.Mode == Write && sp.Mode == Write && sum <= li.Limit {
						continue // the semaphore has room
					}
					addEdge(r.Session, h.Session)
				}
			}
			if i < len(r.Upgrade) && r.Upgrade[i] && v.holdOf(r.Session, sp.Name) != nil {
				continue // an upgrade waits for holders only
			}
			for _, p := range pend {
				if p.Seq >= r.Seq || p.Session == r.Session {
					continue
				}
				for _, q := range p.Locks {
					if refRelated(q.Name, sp.Name) && refModesConflict(q.Mode, sp.Mode) {
						addEdge(r.Session, p.Session)
					}
				}
			}
		}
	}
	var edges []Edge
	for a, bs := range succ {
		for _, b := range bs {
			edges = append(edges, Edge{From: a, To: b, FromKey: PublicID(a, ""), ToKey: PublicID(b, "")})
		}
	}
	slices.SortFunc(edges, func(x, y Edge) int {
		if x.From != y.From {
			return cmp.Compare(x.From, y.From)
		}
		return cmp.Compare(x.To, y.To)
	})
	if !slices.Equal(edges, v.graph) {
		add("waitgraph", "WaitGraph() = %v, the rules give %v", v.graph, edges)
	}
	// Cycle search: colour DFS over sessions in id order.
	ids := make([]SessionID, 0, len(succ))
	for a := range succ {
		ids = append(ids, a)
	}
	slices.Sort(ids)
	color := map[SessionID]int{}
	var stack []SessionID
	var cycle []SessionID
	var dfs func(u SessionID) bool
	dfs = func(u SessionID) bool {
		color[u] = 1
		stack = append(stack, u)
		next := slices.Clone(succ[u])
		slices.Sort(next)
		for _, w := range next {
			if color[w] == 1 {
				i := slices.Index(stack, w)
				cycle = slices.Clone(stack[i:])
				return true
			}
			if color[w] == 0 && dfs(w) {
				return true
			}
		}
		stack = stack[:len(stack)-1]
		color[u] = 2
		return false
	}
	for _, u := range ids {
		if color[u] == 0 && dfs(u) {
			add("deadlock-cycle", "a wait-for cycle survived the entry: sessions %v", cycle)
			return
		}
	}
}

// checkDeadlines: nothing that is due is left over, and NextDeadline is
// the earliest deadline still to come.
func checkDeadlines(v *tabView, add addFunc) {
	var next int64
	has := false
	see := func(at int64, what string) {
		if at <= v.clock {
			add("deadline", "%s is due (at %d, clock %d) but did not fire", what, at, v.clock)
		}
		if !has || at < next {
			next, has = at, true
		}
	}
	for _, name := range v.names {
		li := v.locks[name]
		if li.DelayedUntil != 0 {
			see(li.DelayedUntil, "lock-delay on "+name)
		}
		for _, h := range li.Holders {
			if h.Expires != 0 {
				see(h.Expires, fmt.Sprintf("hold_ttl of session %d on %s", h.Session, name))
			}
		}
	}
	for _, r := range v.pending() {
		if r.Deadline != 0 {
			see(r.Deadline, "wait of request "+r.ID)
		}
	}
	if next != v.next || has != v.hasNext {
		add("deadline", "NextDeadline() = %d, %v; want %d, %v", v.next, v.hasNext, next, has)
	}
}

// checkViews: Sessions, Locks, Request and Export tell the same story.
func checkViews(v *tabView, t *Table, add addFunc) {
	holds := 0
	for _, s := range v.sessions {
		for _, hl := range s.Held {
			holds++
			if h := v.holdOf(s.ID, hl.Name); h == nil || *h != hl.Holder {
				add("views", "session %d says it holds %+v; Locks says %+v", s.ID, hl, h)
			}
		}
		var pend []string
		for _, r := range v.pending() {
			if r.Session == s.ID {
				pend = append(pend, r.ID)
			}
		}
		if !slices.Equal(pend, clip(s.Pending)) {
			add("views", "session %d lists pending %v, requests say %v", s.ID, s.Pending, pend)
		}
	}
	waiters := 0
	for _, name := range v.names {
		li := v.locks[name]
		waiters += len(li.Waiters)
		for _, h := range li.Holders {
			if v.sess[h.Session] == nil {
				add("views", "%s is held by session %d, which is not open", name, h.Session)
			}
		}
		if len(li.Holders) == 0 && len(li.Waiters) == 0 && li.DelayedUntil == 0 {
			add("views", "Locks lists %s, which is not in use", name)
		}
	}
	if len(v.sessions) != len(v.sess) {
		add("views", "Sessions lists a session twice")
	}
	for _, r := range v.reqs {
		id := r.ID
		if r.Status != Pending && r.Ended != v.index {
			continue // finished before this entry: checked when it finished
		}
		want := r.Status
		if want == Granted { // the view says released once a granted hold is gone
			for _, g := range r.Granted {
				li := v.locks[g.Name]
				if li == nil || !slices.ContainsFunc(li.Holders, func(h Holder) bool { return h.Session == r.Session && h.Token == g.Token }) {
					want = Released
					break
				}
			}
		}
		got, ok := t.Request(r.Session, r.ID)
		if !ok || got.Status != want || got.Token != r.Token || got.Seq != r.Seq || got.Session != r.Session {
			add("views", "Request(%q) = %+v, %v; Export says %+v", id, got, ok, *r)
		}
		if v.sess[r.Session] == nil {
			add("views", "request %s of closed session %d is still remembered", id, r.Session)
		}
	}
	for _, name := range v.names {
		if li, ok := t.Lock(name); !ok || !reflect.DeepEqual(li, *v.locks[name]) {
			add("views", "Lock(%q) = %+v, %v; Locks says %+v", name, li, ok, *v.locks[name])
		}
	}
	ttls := t.SessionTTLs()
	for _, s := range v.sessions {
		if si, ok := t.Session(s.ID); !ok || !reflect.DeepEqual(si, s) || !t.HasSession(s.ID) || ttls[s.ID] != s.TTL {
			add("views", "Session(%d) = %+v, %v; Sessions says %+v", s.ID, si, ok, s)
		}
	}
	if len(ttls) != len(v.sessions) {
		add("views", "SessionTTLs has %d sessions, Sessions %d", len(ttls), len(v.sessions))
	}
	st := t.Stats()
	if st.Sessions != len(v.sessions) || st.Holds != holds || st.Waiters != waiters || st.Requests != len(v.reqs) {
		add("views", "Stats() = %+v; views count %d sessions, %d holds, %d waiters, %d requests",
			st, len(v.sessions), holds, waiters, len(v.reqs))
	}
}

// checkResult: the Result has the shape its command allows.
func checkResult(pre, post *tabView, e Entry, res Result, add addFunc) {
	c, ok := e.Cmd.(*Acquire)
	if !ok || res.Err != nil {
		return
	}
	r := res.Request
	if r == nil {
		add("result", "acquire without error returned no request")
		return
	}
	if old := pre.reqs[reqKey{r.Session, r.ID}]; old != nil {
		return // an idempotent retry reports the old request as it is
	}
	switch r.Status {
	case Granted:
		n := len(r.Locks)
		want := n
		switch c.Require {
		case "any":
			want = 1
		case "majority":
			want = n/2 + 1
		}
		if len(r.Granted) != want {
			add("result", "request %s granted %d locks, requirement %q of %d needs %d", r.ID, len(r.Granted), c.Require, n, want)
		}
		last := -1
		for _, g := range r.Granted {
			i := slices.IndexFunc(r.Locks, func(sp LockSpec) bool { return sp.Name == g.Name })
			if i <= last {
				add("result", "request %s grants %v are not in request order", r.ID, r.Granted)
			}
			last = i
		}
	case Pending, Deadlock:
		if c.Wait == 0 {
			add("result", "acquire with wait 0 ended %s", r.Status)
		}
	case TimedOut:
		if c.Wait != 0 {
			add("result", "acquire with wait %v timed out at once", c.Wait)
		}
	default:
		add("result", "new request %s has status %s", r.ID, r.Status)
	}
	if r.Status == Pending && post.reqs[reqKey{r.Session, r.ID}] == nil {
		add("result", "pending request %s is unknown to the table", r.ID)
	}
}
