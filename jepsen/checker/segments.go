package checker

import (
	"slices"
	"sort"

	"github.com/anishathalye/porcupine"

	"github.com/lockd/lockd/jepsen/history"
)

// Porcupine's search keeps, per state it has visited, a bitset as long as
// the partition: time and memory grow with the square of a partition's
// length (27k operations on one name take 1 GB, 54k take 4.5 GB, an hour
// of history over 60). So each partition is cut, in time, into segments
// checked on their own, at points where the lock table is provably empty:
//
//   - every operation in flight at the cut is an acquire of definite
//     outcome (granted or refused), not moved at the last cut; it moves
//     whole into the next segment, its call put at the cut;
//   - every process has settled all it did before the cut: nothing held,
//     nothing of unknown outcome since its last ok close or lost session
//     — a lost session or an expired hold TTL settles only grants that
//     returned before it was called, since the model may place it
//     anywhere in its window;
//   - no observe read and no acquire of unknown outcome returned after
//     the earliest call of those moved acquires (the read could have
//     seen one of them holding; the acquire's choice of locks, under
//     require any or majority, could have depended on their holds).
//
// If the whole history is linearizable, so is every segment from the
// empty table: in a linearization, move the in-flight acquires after the
// last operation of the earlier segment; what came between them loses
// only holds of processes that were granted later anyway (no observe
// saw them), and every process holds nothing at the end. Tokens carry
// over: a segment starts with an operation (kindTokenFloor) that raises
// each name's largest token to the largest granted in earlier segments
// by an acquire that returned before the moved acquires were called, so
// before they were granted (the others join the floor at the next cut).

// minSegment is the fewest operations a segment is cut after: porcupine
// judges a few thousand operations in well under a second. (A variable:
// the tests cut at every point they may.)
var minSegment = 2000

// segmentOperations cuts each partition of ops into segments (see
// above) and renumbers LockInput.Part so that each segment is a
// partition of its own. It returns the new operations and the number of
// segments.
func segmentOperations(ops []porcupine.Operation, minOps int) ([]porcupine.Operation, int) {
	lane := 0
	for _, o := range ops {
		lane = max(lane, o.ClientId+1)
	}
	var out []porcupine.Operation
	next := 0
	for _, part := range partitionByPart(ops) {
		for _, seg := range cutPartition(part, minOps, lane) {
			for _, o := range seg {
				in := o.Input.(LockInput)
				in.Part = next
				o.Input = in
				out = append(out, o)
			}
			next++
		}
	}
	return out, next
}

// opEdge is a call or a return of operation op at time at.
type opEdge struct {
	at  int64
	ret bool
	op  int
}

// cutPartition returns one partition's operations in segments; token
// floors are operations on client lane.
func cutPartition(ops []porcupine.Operation, minOps, lane int) [][]porcupine.Operation {
	edges := make([]opEdge, 0, 2*len(ops))
	for i, o := range ops {
		edges = append(edges, opEdge{at: o.Call, op: i}, opEdge{at: o.Return, ret: true, op: i})
	}
	sort.Slice(edges, func(i, j int) bool {
		a, b := edges[i], edges[j]
		if a.at != b.at {
			return a.at < b.at
		}
		if a.ret != b.ret {
			return !a.ret // calls first: equal times overlap
		}
		// A lost session last: a failed close ending at the same time
		// would otherwise leave its process in doubt for good.
		if la, lb := isLost(ops[a.op]), isLost(ops[b.op]); la != lb {
			return lb
		}
		return a.op < b.op
	})
	c := newCutter(ops, lane)
	var segs [][]porcupine.Operation
	for i, e := range edges {
		if e.ret {
			c.returned(e.op)
		} else {
			c.called(e.op)
		}
		last := i+1 == len(edges) || edges[i+1].at != e.at
		if !last || !e.ret || c.done < minOps || i+1 == len(edges) || !c.canCut() {
			continue
		}
		segs = append(segs, c.cut(e.at+1))
	}
	return append(segs, c.rest())
}

// cutter follows one partition through time and cuts it.
type cutter struct {
	ops       []porcupine.Operation
	assigned  []bool
	segment   []porcupine.Operation // returned operations of the current segment
	done      int
	inFlight  map[int]bool
	blocking  int // operations in flight that are not acquires of definite outcome
	procs     map[int]*procState
	unsettled int   // processes holding something or in doubt
	lastRead  int64 // return of the latest observe or acquire of unknown outcome
	floor     map[string]uint64
	nextFloor map[string]uint64 // grants that join the floor at the next cut
	lane      int
}

// procState is what one process may hold, as its returned operations say.
type procState struct {
	holds      map[string]int64 // name -> return of its grant
	doubt      bool             // an operation of unknown outcome since its last ok close or lost
	doubtUntil int64            // the latest return of those operations
}

func (p *procState) settled() bool { return len(p.holds) == 0 && !p.doubt }

func newCutter(ops []porcupine.Operation, lane int) *cutter {
	return &cutter{ops: ops, assigned: make([]bool, len(ops)), inFlight: map[int]bool{},
		procs: map[int]*procState{}, lastRead: -1 << 62, floor: map[string]uint64{},
		nextFloor: map[string]uint64{}, lane: lane}
}

func isLost(o porcupine.Operation) bool { return o.Input.(LockInput).Kind == history.Lost }

func movable(o porcupine.Operation) bool {
	t := o.Output.(LockOutput).Type
	return o.Input.(LockInput).Kind == history.Acquire && (t == history.OK || t == history.Fail)
}

func (c *cutter) called(i int) {
	c.inFlight[i] = true
	if !movable(c.ops[i]) {
		c.blocking++
	}
}

func (c *cutter) returned(i int) {
	delete(c.inFlight, i)
	if !movable(c.ops[i]) {
		c.blocking--
	}
	if !c.assigned[i] { // else moved into this segment at a cut while in flight
		c.assigned[i] = true
		c.segment = append(c.segment, c.ops[i])
		c.done++
	}
	in, out := c.ops[i].Input.(LockInput), c.ops[i].Output.(LockOutput)
	if in.Kind == history.Observe || in.Kind == history.Acquire && out.Type == history.Info {
		c.lastRead = c.ops[i].Return
	}
	p := c.procs[in.Process]
	if p == nil {
		p = &procState{holds: map[string]int64{}}
		c.procs[in.Process] = p
	}
	before := p.settled()
	p.apply(c.ops[i])
	switch after := p.settled(); {
	case before && !after:
		c.unsettled++
	case !before && after:
		c.unsettled--
	}
}

// apply follows what operation o, returned, does to the process's holds.
func (p *procState) apply(o porcupine.Operation) {
	in, out := o.Input.(LockInput), o.Output.(LockOutput)
	switch {
	case in.Kind == history.Close && out.Type == history.OK:
		clear(p.holds)
		p.doubt = false
	case in.Kind == history.Lost:
		// The model may place the loss anywhere from its call on: before
		// a grant that returned later, and before an operation of unknown
		// outcome that took effect later.
		p.endHolds(o.Call, nil)
		p.doubt = p.doubt && p.doubtUntil >= o.Call
	case in.Kind == history.Close, out.Type == history.Info && in.Kind != kindHoldsExpired && in.Kind != history.Observe:
		p.doubt = true
		p.doubtUntil = max(p.doubtUntil, o.Return)
	case in.Kind == history.Acquire && out.Type == history.OK:
		for _, g := range out.Granted {
			p.holds[g.Name] = o.Return
		}
	case in.Kind == kindHoldsExpired:
		p.endHolds(o.Call, in.Names)
	case in.Kind == history.Release && (out.Type == history.OK || out.Error == "not_held"):
		for _, n := range in.Names {
			delete(p.holds, n)
		}
	}
}

// endHolds ends the holds of names (nil: all) granted before call.
func (p *procState) endHolds(call int64, names []string) {
	for n, granted := range p.holds {
		if granted < call && (names == nil || slices.Contains(names, n)) {
			delete(p.holds, n)
		}
	}
}

// canCut reports whether the partition may be cut now (see above).
func (c *cutter) canCut() bool {
	if c.blocking > 0 || c.unsettled > 0 {
		return false
	}
	for i := range c.inFlight {
		if c.assigned[i] || c.ops[i].Call <= c.lastRead {
			return false // moved at the last cut already, or its hold maybe seen
		}
	}
	return true
}

// cut ends the current segment at time at and moves the acquires in
// flight into the next one, their calls put at at.
func (c *cutter) cut(at int64) []porcupine.Operation {
	seg := c.segment
	c.segment, c.done = nil, 0
	moved := make([]int, 0, len(c.inFlight))
	for i := range c.inFlight {
		moved = append(moved, i)
	}
	sort.Ints(moved) // no map order in the output
	c.raiseFloor(seg, moved)
	c.segment = append(c.segment, c.floorOp(at-1)) // before all the segment's calls
	for _, i := range moved {
		o := c.ops[i]
		o.Call = at
		c.assigned[i] = true
		c.segment = append(c.segment, o)
		c.done++
	}
	return seg
}

// raiseFloor raises the token floor by the grants of seg that returned
// before the first call of the moved operations; the other grants of seg
// raise it at the next cut (the acquires moved then were called after
// this cut).
func (c *cutter) raiseFloor(seg []porcupine.Operation, moved []int) {
	for n, t := range c.nextFloor {
		c.floor[n] = max(c.floor[n], t)
	}
	clear(c.nextFloor)
	before := int64(1<<63 - 1)
	for _, i := range moved {
		before = min(before, c.ops[i].Call)
	}
	for _, o := range seg {
		in, out := o.Input.(LockInput), o.Output.(LockOutput)
		if in.Kind != history.Acquire || out.Type != history.OK {
			continue
		}
		floor := c.floor
		if o.Return >= before {
			floor = c.nextFloor
		}
		for _, g := range out.Granted {
			floor[g.Name] = max(floor[g.Name], g.Token)
		}
	}
}

// floorOp is the operation, at time at, a segment starts with: it
// raises the largest tokens to the floor.
func (c *cutter) floorOp(at int64) porcupine.Operation {
	names := make([]string, 0, len(c.floor))
	for n := range c.floor {
		names = append(names, n)
	}
	sort.Strings(names)
	out := LockOutput{Type: history.OK}
	for _, n := range names {
		out.Granted = append(out.Granted, history.Granted{Name: n, Token: c.floor[n]})
	}
	part := c.ops[0].Input.(LockInput).Part
	return porcupine.Operation{ClientId: c.lane, Call: at, Return: at, Output: out,
		Input: LockInput{Kind: kindTokenFloor, Process: -1, Part: part, Index: -1}, Metadata: "token floor"}
}

// rest is the last segment: everything not yet in one.
func (c *cutter) rest() []porcupine.Operation {
	seg := c.segment
	for i, o := range c.ops {
		if !c.assigned[i] {
			seg = append(seg, o)
		}
	}
	return seg
}
