package report

import (
	"fmt"
	"math"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/lockd/lockd/jepsen/history"
)

// Drawing limits: they keep report.html to a few MB for ~50k events.
const (
	svgWidth   = 1300.0
	marginL    = 70.0
	marginR    = 20.0
	plotW      = svgWidth - marginL - marginR
	maxLanes   = 120   // lanes beyond are not drawn (noted on the page)
	maxBars    = 8000  // timeline bars after pixel de-duplication
	maxDots    = 10000 // latency dots after pixel de-duplication
	bucketPx   = 2.0   // timeline de-duplication resolution
	labelRowH  = 13.0  // height of one row of fault labels
	maxLabRows = 4
)

// Operation kinds, drawn with different heights (timeline) and shapes
// (latency plot).
const (
	kAcquire = iota
	kRelease
	kResource
	kOther
	nKinds
)

var kindNames = [nKinds]string{"acquire", "release", "resource op", "other (close, final-read)"}

// Outcomes of an operation.
const (
	oOK = iota
	oFail
	oInfo
	oUnfinished
	nOutcomes
)

var outcomeNames = [nOutcomes]string{"ok", "fail", "info", "unfinished"}

// colours[outcome][kind]: green/orange/red, darker for acquires and
// lighter for releases so the two read apart even where heights blur.
var colours = [nOutcomes][nKinds]string{
	{"#2e7d32", "#81c784", "#43a047", "#66bb6a"},
	{"#e65100", "#ffb74d", "#fb8c00", "#ffa726"},
	{"#b71c1c", "#ef9a9a", "#e53935", "#e57373"},
	{"#b71c1c", "#ef9a9a", "#e53935", "#e57373"},
}

var kindHeight = [nKinds]float64{1, 0.6, 0.35, 0.8}

var faultPalette = []string{"#7e57c2", "#0288d1", "#f9a825", "#6d4c41", "#d81b60", "#00897b", "#546e7a", "#c0ca33"}

func kindOf(f string) int {
	switch {
	case f == history.Acquire:
		return kAcquire
	case f == history.Release:
		return kRelease
	case strings.HasPrefix(f, "res-"):
		return kResource
	}
	return kOther
}

func outcomeOf(p history.Pair) int {
	if p.Completion == nil {
		return oUnfinished
	}
	switch p.Completion.Type {
	case history.OK:
		return oOK
	case history.Fail:
		return oFail
	}
	return oInfo
}

// axis maps run time to x.
type axis struct{ end time.Duration }

func (a axis) x(t time.Duration) float64 {
	return marginL + float64(t)/float64(a.end)*plotW
}

// window is one fault: a nemesis start and its stop (or the end of the
// run when it never stopped).
type window struct {
	fault      string
	targets    []string
	start, end time.Duration
	stopped    bool
}

// drawing is what both plots share.
type drawing struct {
	ax      axis
	windows []window
	phases  []history.Event
	colour  map[string]string // fault kind -> colour
}

func newDrawing(events []history.Event) drawing {
	var end time.Duration
	for _, e := range events {
		end = max(end, e.Time)
	}
	if end <= 0 {
		end = time.Second
	}
	d := drawing{ax: axis{end: end}, colour: map[string]string{}}
	var open []int // indexes in d.windows, in start order
	for _, e := range events {
		switch {
		case e.Process == history.Harness && e.F == history.Phase:
			d.phases = append(d.phases, e)
		case e.Process != history.Nemesis:
		case e.F == history.Start:
			open = append(open, len(d.windows))
			d.windows = append(d.windows, window{fault: faultName(e.Fault), targets: e.Targets, start: e.Began(), end: end})
		case e.F == history.Stop && len(open) > 0:
			// The oldest open window of the same kind; an unnamed stop
			// ends the latest one.
			j := len(open) - 1
			if e.Fault != "" {
				j = slices.IndexFunc(open, func(i int) bool { return d.windows[i].fault == e.Fault })
			}
			if j >= 0 {
				w := &d.windows[open[j]]
				w.end, w.stopped = e.Time, true
				open = slices.Delete(open, j, j+1)
			}
		}
	}
	var kinds []string
	for _, w := range d.windows {
		if !slices.Contains(kinds, w.fault) {
			kinds = append(kinds, w.fault)
		}
	}
	slices.Sort(kinds)
	for i, k := range kinds {
		d.colour[k] = faultPalette[i%len(faultPalette)]
	}
	return d
}

// labelRows is the height reserved above a plot for fault labels.
func (d drawing) labelRows() int {
	rows := 0
	if len(d.windows) > 0 {
		rows, _ = d.labelLayout()
	}
	if len(d.phases) > 0 {
		rows++ // phase labels get the top row to themselves
	}
	return rows
}

// labelLayout assigns each window's label a row so that labels do not
// overlap, as long as maxLabRows suffice.
func (d drawing) labelLayout() (int, []int) {
	var ends []float64 // per row: x where its last label ends
	row := make([]int, len(d.windows))
	for i, w := range d.windows {
		x := d.ax.x(w.start)
		r := slices.IndexFunc(ends, func(e float64) bool { return e < x })
		if r < 0 {
			if len(ends) < maxLabRows {
				r = len(ends)
				ends = append(ends, 0)
			} else {
				r = i % maxLabRows // crowded: overlap rather than grow
			}
		}
		row[i] = r
		ends[r] = x + float64(len(label(w)))*6 + 6
	}
	return max(1, len(ends)), row
}

func label(w window) string {
	s := w.fault
	if len(w.targets) > 0 {
		s += " " + strings.Join(w.targets, ",")
	}
	if len(s) > 40 {
		s = s[:37] + "..."
	}
	return s
}

// bands draws the fault windows over [top, bottom], with their labels
// (and those of the phases) in the strip above top.
func (d drawing) bands(b *strings.Builder, top, bottom float64) {
	_, rows := d.labelLayout()
	for i, w := range d.windows {
		x0, x1 := d.ax.x(w.start), d.ax.x(w.end)
		c := d.colour[w.fault]
		tip := fmt.Sprintf("%s on %s: %s to %s", w.fault, strings.Join(w.targets, ", "), secs(w.start), secs(w.end))
		if !w.stopped {
			tip += " (never stopped)"
		}
		fmt.Fprintf(b, `<rect x="%s" y="%s" width="%s" height="%s" fill="%s" fill-opacity="0.2"><title>%s</title></rect>`+"\n",
			f1(x0), f1(top), f1(max(x1-x0, 1)), f1(bottom-top), c, esc(tip))
		fmt.Fprintf(b, `<line x1="%s" y1="%s" x2="%s" y2="%s" stroke="%s" stroke-width="1"/>`+"\n", f1(x0), f1(top), f1(x0), f1(bottom), c)
		ly := top - float64(rows[i])*labelRowH - 3
		fmt.Fprintf(b, `<text x="%s" y="%s" class="fl" fill="%s">%s</text>`+"\n", f1(x0+2), f1(ly), c, esc(label(w)))
	}
	for _, e := range d.phases {
		x := d.ax.x(e.Time)
		fmt.Fprintf(b, `<text x="%s" y="%s" class="fl" fill="#0d47a1">%s</text>`+"\n", f1(x+2), f1(top-float64(d.labelRows()-1)*labelRowH-3), esc(e.Fault+" phase"))
	}
}

// phaseLines marks the phases over [top, bottom]; drawn last, on top of
// the operations.
func (d drawing) phaseLines(b *strings.Builder, top, bottom float64) {
	for _, e := range d.phases {
		x := d.ax.x(e.Time)
		fmt.Fprintf(b, `<line x1="%s" y1="%s" x2="%s" y2="%s" stroke="#0d47a1" stroke-width="2" stroke-dasharray="6,3"><title>%s</title></line>`+"\n",
			f1(x), f1(top), f1(x), f1(bottom), esc("phase "+e.Fault+" at "+secs(e.Time)))
	}
}

// timeAxis draws the x axis (seconds) at y, with grid lines up to top.
func (d drawing) timeAxis(b *strings.Builder, top, y float64) {
	step := niceStep(d.ax.end.Seconds() / 12)
	fmt.Fprintf(b, `<line x1="%s" y1="%s" x2="%s" y2="%s" stroke="#333"/>`+"\n", f1(marginL), f1(y), f1(marginL+plotW), f1(y))
	for i := 0; ; i++ {
		s := float64(i) * step
		if s > d.ax.end.Seconds()+1e-9 {
			break
		}
		x := d.ax.x(time.Duration(s * 1e9))
		fmt.Fprintf(b, `<line x1="%s" y1="%s" x2="%s" y2="%s" stroke="#ddd"/>`, f1(x), f1(top), f1(x), f1(y))
		fmt.Fprintf(b, `<text x="%s" y="%s" text-anchor="middle">%s</text>`+"\n", f1(x), f1(y+14), strconv.FormatFloat(s, 'f', -1, 64))
	}
	fmt.Fprintf(b, `<text x="%s" y="%s" text-anchor="middle">time since start (s)</text>`+"\n", f1(marginL+plotW/2), f1(y+30))
}

// niceStep rounds x up to 1, 2 or 5 times a power of ten.
func niceStep(x float64) float64 {
	if x <= 0 {
		return 1
	}
	p := math.Pow(10, math.Floor(math.Log10(x)))
	for _, m := range []float64{1, 2, 5, 10} {
		if m*p >= x {
			return m * p
		}
	}
	return 10 * p
}

// timelineStats says what the timeline left out.
type timelineStats struct {
	lanes, processes      int
	ops, drawn            int
	covered, sampled      int
	lanesDropped, dropped int
}

type bar struct {
	p                history.Pair
	lane, kind, outc int
	x0, x1           float64
	hidden           int // ops of the same kind and outcome it covers
}

// timeline draws one lane per group of processes (see assignLanes).
func timeline(events []history.Event, d drawing) (string, timelineStats) {
	pairs := history.Pairs(events)
	var st timelineStats
	st.ops = len(pairs)
	lost := lostEvents(events)
	layout := assignLanes(pairs, lost, d.ax.end)
	st.processes = layout.processes
	st.lanes = layout.count
	lanes := min(st.lanes, maxLanes)
	st.lanesDropped = st.lanes - lanes

	bars := timelineBars(pairs, layout.of, lanes, d.ax, &st)
	// Still too many: thin the ok bars evenly until they fit; failures
	// and infos are always drawn.
	var dropped int
	bars, dropped = thinOK(bars, maxBars, func(br bar) bool { return br.outc == oOK })
	st.sampled += dropped
	st.drawn = len(bars)
	return drawTimeline(d, layout, lanes, bars, lost), st
}

// lostEvents are the lost events of client processes.
func lostEvents(events []history.Event) []history.Event {
	var lost []history.Event
	for _, e := range events {
		if e.Process >= 0 && e.F == history.Lost {
			lost = append(lost, e)
		}
	}
	return lost
}

// laneLayout places each process on a lane.
type laneLayout struct {
	of        map[int]int   // process -> lane
	procs     map[int][]int // lane -> its processes
	count     int           // lanes
	processes int
}

// assignLanes gives a process the lane most recently freed by a finished
// process (so a worker's successive processes after retirement usually
// share a lane), else a new lane. A process spans its operations (to
// end when unfinished) and lost events.
func assignLanes(pairs []history.Pair, lost []history.Event, end time.Duration) laneLayout {
	type span struct{ first, last time.Duration }
	spans := map[int]*span{}
	var order []int
	touch := func(p int, t0, t1 time.Duration) {
		s := spans[p]
		if s == nil {
			s = &span{t0, t1}
			spans[p] = s
			order = append(order, p)
		}
		s.first, s.last = min(s.first, t0), max(s.last, t1)
	}
	for _, p := range pairs {
		last := end
		if p.Completion != nil {
			last = p.Completion.Time
		}
		touch(p.Invoke.Process, p.Invoke.Time, last)
	}
	for _, e := range lost {
		touch(e.Process, e.Time, e.Time)
	}
	slices.SortStableFunc(order, func(a, b int) int { return int(spans[a].first - spans[b].first) })
	l := laneLayout{of: map[int]int{}, procs: map[int][]int{}, processes: len(order)}
	var laneEnd []time.Duration
	for _, p := range order {
		s := spans[p]
		best := -1
		for i, e := range laneEnd {
			if e < s.first && (best < 0 || e > laneEnd[best]) {
				best = i
			}
		}
		if best < 0 {
			best = len(laneEnd)
			laneEnd = append(laneEnd, 0)
		}
		laneEnd[best] = s.last
		l.of[p] = best
		l.procs[best] = append(l.procs[best], p)
	}
	l.count = len(laneEnd)
	return l
}

// timelineBars returns the bars of the operations on the first lanes.
// It de-duplicates at bucketPx: of the ops of one kind and outcome that
// start in the same bucket of a lane only the longest is drawn (it
// covers the others); its tooltip says how many it hides.
func timelineBars(pairs []history.Pair, laneOf map[int]int, lanes int, ax axis, st *timelineStats) []bar {
	type key struct{ lane, bucket, kind, outc int }
	keep := map[key]int{}
	var bars []bar
	for _, p := range pairs {
		l := laneOf[p.Invoke.Process]
		if l >= lanes {
			st.dropped++
			continue
		}
		br := bar{p: p, lane: l, kind: kindOf(p.Invoke.F), outc: outcomeOf(p), x0: ax.x(p.Invoke.Time), x1: ax.x(ax.end)}
		if p.Completion != nil {
			br.x1 = ax.x(p.Completion.Time)
		}
		k := key{l, int((br.x0 - marginL) / bucketPx), br.kind, br.outc}
		if i, ok := keep[k]; ok {
			st.covered++
			if br.x1-br.x0 > bars[i].x1-bars[i].x0 {
				br.hidden = bars[i].hidden + 1
				bars[i] = br
			} else {
				bars[i].hidden++
			}
			continue
		}
		keep[k] = len(bars)
		bars = append(bars, br)
	}
	return bars
}

// laneGeometry is where the lanes of the timeline are.
type laneGeometry struct {
	top, bottom, laneH float64
}

func (g laneGeometry) y(lane int) float64 { return g.top + float64(lane)*g.laneH }

// drawTimeline draws the lanes, the fault bands, the bars and the lost
// sessions.
func drawTimeline(d drawing, layout laneLayout, lanes int, bars []bar, lost []history.Event) string {
	laneH := 18.0
	if lanes > 20 {
		laneH = 14
	}
	if lanes > 40 {
		laneH = max(4, math.Floor(560/float64(lanes)))
	}
	rows := d.labelRows()
	top := 8 + float64(rows)*labelRowH
	g := laneGeometry{top: top, bottom: top + float64(max(lanes, 1))*laneH, laneH: laneH}
	height := g.bottom + 40

	var b strings.Builder
	fmt.Fprintf(&b, `<svg xmlns="http://www.w3.org/2000/svg" width="%s" height="%s" viewBox="0 0 %s %s" class="plot">`+"\n",
		f1(svgWidth), f1(height), f1(svgWidth), f1(height))
	drawLanes(&b, g, lanes, layout.procs)
	d.timeAxis(&b, g.top, g.bottom)
	d.bands(&b, g.top, g.bottom)
	drawBars(&b, g, bars)
	for _, e := range lost {
		l := layout.of[e.Process]
		if l >= lanes {
			continue
		}
		x, y := d.ax.x(e.Time), g.y(l)
		fmt.Fprintf(&b, `<path d="M%s %sl-3 -5h6z" fill="#000"><title>%s</title></path>`+"\n",
			f1(x), f1(y+laneH-1), esc(fmt.Sprintf("p%d lost its session at %s %s", e.Process, secs(e.Time), e.Error)))
	}
	d.phaseLines(&b, g.top, g.bottom)
	b.WriteString("</svg>\n")
	return b.String()
}

// drawLanes shades every other lane and labels the lanes with their
// processes.
func drawLanes(b *strings.Builder, g laneGeometry, lanes int, procs map[int][]int) {
	for l := 0; l < lanes; l++ {
		y := g.y(l)
		if l%2 == 1 {
			fmt.Fprintf(b, `<rect x="%s" y="%s" width="%s" height="%s" fill="#f4f4f4"/>`, f1(marginL), f1(y), f1(plotW), f1(g.laneH))
		}
		if g.laneH >= 10 || l%5 == 0 {
			ps := procs[l]
			tip := fmt.Sprintf("lane %d: %d processes: %s", l, len(ps), procList(ps))
			fmt.Fprintf(b, `<text x="%s" y="%s" text-anchor="end" class="ll">L%d<title>%s</title></text>`+"\n",
				f1(marginL-4), f1(y+min(g.laneH, 12)-2), l, esc(tip))
		}
	}
}

// drawBars draws the bars grouped by outcome and kind, ok bars first so
// that failures and infos are drawn on top.
func drawBars(b *strings.Builder, g laneGeometry, bars []bar) {
	for o := 0; o < nOutcomes; o++ {
		for k := 0; k < nKinds; k++ {
			var group strings.Builder
			for _, br := range bars {
				if br.outc != o || br.kind != k {
					continue
				}
				h := max(2, math.Round((g.laneH-2)*kindHeight[k]))
				y := g.y(br.lane) + g.laneH - 1 - h
				fmt.Fprintf(&group, `<rect x="%s" y="%s" width="%s" height="%s"><title>%s</title></rect>`+"\n",
					f1(br.x0), f1(y), f1(max(br.x1-br.x0, 1)), f1(h), esc(tooltip(br.p, br.hidden)))
			}
			if group.Len() == 0 {
				continue
			}
			extra := ""
			if o == oUnfinished {
				extra = ` stroke="#000" stroke-width="0.5" stroke-dasharray="2,1"`
			}
			fmt.Fprintf(b, `<g fill="%s"%s>`+"\n%s</g>\n", colours[o][k], extra, group.String())
		}
	}
}

func procList(ps []int) string {
	var s []string
	for i, p := range ps {
		if i == 20 {
			s = append(s, fmt.Sprintf("... (%d more)", len(ps)-20))
			break
		}
		s = append(s, "p"+strconv.Itoa(p))
	}
	return strings.Join(s, " ")
}

// tooltip describes an operation.
func tooltip(p history.Pair, hidden int) string {
	in := p.Invoke
	var b strings.Builder
	fmt.Fprintf(&b, "p%d %s ", in.Process, in.F)
	c := p.Completion
	if c == nil {
		fmt.Fprintf(&b, "unfinished: invoked %s, no completion", secs(in.Time))
	} else {
		fmt.Fprintf(&b, "%s: %s to %s (%.1f ms)", c.Type, secs(in.Time), secs(c.Time), float64(c.Time-in.Time)/1e6)
	}
	fmt.Fprintf(&b, " [#%d]", in.Index)
	describeRequest(&b, in)
	grants := in.Granted
	if c != nil && len(c.Granted) > 0 {
		grants = c.Granted
	}
	if len(grants) > 0 {
		var gs []string
		for _, g := range grants {
			gs = append(gs, fmt.Sprintf("%s#%d", g.Name, g.Token))
		}
		fmt.Fprintf(&b, "\ngranted: %s", strings.Join(gs, ", "))
	}
	for _, e := range []*history.Event{&in, c} {
		if e == nil {
			continue
		}
		if e.Token != 0 {
			fmt.Fprintf(&b, "\ntoken: %d", e.Token)
		}
		if e.Value != 0 {
			fmt.Fprintf(&b, "\nvalue: %d", e.Value)
		}
		if e.Seq != 0 {
			fmt.Fprintf(&b, "\nseq: %d", e.Seq)
		}
	}
	if c != nil {
		describeCompletion(&b, c)
	}
	if hidden > 0 {
		fmt.Fprintf(&b, "\n(+%d more %s ops starting at this pixel)", hidden, in.F)
	}
	return b.String()
}

// describeRequest adds the locks and names an invoke asks for.
func describeRequest(b *strings.Builder, in history.Event) {
	if len(in.Locks) > 0 {
		var ls []string
		for _, l := range in.Locks {
			s := l.Name
			if l.Mode != "" {
				s += " " + l.Mode
			}
			if l.Limit > 1 {
				s += fmt.Sprintf(" %d/%d", max(l.Weight, 1), l.Limit)
			}
			ls = append(ls, s)
		}
		fmt.Fprintf(b, "\nlocks: %s", strings.Join(ls, ", "))
	}
	if in.Require != "" {
		fmt.Fprintf(b, "\nrequire: %s", in.Require)
	}
	if len(in.Names) > 0 {
		fmt.Fprintf(b, "\nnames: %s", strings.Join(in.Names, ", "))
	}
}

// describeCompletion adds what a completion read, where it ran, and its
// error.
func describeCompletion(b *strings.Builder, c *history.Event) {
	if len(c.Read) > 0 {
		r, total := c.Read, max(c.ReadLen, len(c.Read))
		more := ""
		if total > 10 {
			r, more = r[max(len(r)-10, 0):], fmt.Sprintf("(%d) ...", total)
		}
		fmt.Fprintf(b, "\nread: %s%v", more, r)
	}
	if c.Node != "" || c.Session != "" {
		fmt.Fprintf(b, "\nnode %s session %s", c.Node, c.Session)
	}
	if c.Error != "" {
		fmt.Fprintf(b, "\nerror: %s", c.Error)
	}
}

// latencyStats says what the latency plot left out.
type latencyStats struct{ ops, unfinished, covered, sampled, drawn int }

// dot is one operation in the latency plot.
type dot struct {
	p          history.Pair
	kind, outc int
	x, lat     float64 // lat in ms
}

// latencyPlotH is the height of the latency plot's area.
const latencyPlotH = 300.0

// latencyScale maps a latency to y: decades d0 to d1, log scale.
type latencyScale struct{ d0, d1, top, bottom float64 }

func (s latencyScale) y(l float64) float64 {
	return s.bottom - (math.Log10(l)-s.d0)/(s.d1-s.d0)*latencyPlotH
}

// latencyPlot draws a dot per completed operation: x its invoke, y its
// latency on a log scale.
func latencyPlot(events []history.Event, d drawing) (string, latencyStats) {
	var st latencyStats
	var dots []dot
	lo, hi := math.Inf(1), 0.0
	for _, p := range history.Pairs(events) {
		st.ops++
		if p.Completion == nil {
			st.unfinished++
			continue
		}
		l := max(float64(p.Completion.Time-p.Invoke.Time)/1e6, 0.001)
		lo, hi = min(lo, l), max(hi, l)
		dots = append(dots, dot{p: p, kind: kindOf(p.Invoke.F), outc: outcomeOf(p), x: d.ax.x(p.Invoke.Time), lat: l})
	}
	sc := latencyScale{d0: -1, d1: 3} // decades shown when there is nothing to plot
	if len(dots) > 0 {
		sc.d0, sc.d1 = math.Floor(math.Log10(lo)), math.Ceil(math.Log10(hi))
		if sc.d1 <= sc.d0 {
			sc.d1 = sc.d0 + 1
		}
	}
	sc.top = 8 + float64(d.labelRows())*labelRowH
	sc.bottom = sc.top + latencyPlotH

	// De-duplicate per pixel, kind and outcome; then sample ok dots.
	type key struct{ x, y, kind, outc int }
	seen := map[key]bool{}
	var kept []dot
	for _, dt := range dots {
		k := key{int(dt.x), int(sc.y(dt.lat)), dt.kind, dt.outc}
		if seen[k] {
			st.covered++
			continue
		}
		seen[k] = true
		kept = append(kept, dt)
	}
	var dropped int
	kept, dropped = thinOK(kept, maxDots, func(dt dot) bool { return dt.outc == oOK })
	st.sampled += dropped
	st.drawn = len(kept)
	return drawLatency(d, sc, kept), st
}

// drawLatency draws the latency grid, the fault bands and the dots.
func drawLatency(d drawing, sc latencyScale, dots []dot) string {
	height := sc.bottom + 40
	var b strings.Builder
	fmt.Fprintf(&b, `<svg xmlns="http://www.w3.org/2000/svg" width="%s" height="%s" viewBox="0 0 %s %s" class="plot">`+"\n",
		f1(svgWidth), f1(height), f1(svgWidth), f1(height))
	for e := sc.d0; e <= sc.d1; e++ {
		yy := sc.y(math.Pow(10, e))
		fmt.Fprintf(&b, `<line x1="%s" y1="%s" x2="%s" y2="%s" stroke="#ddd"/>`, f1(marginL), f1(yy), f1(marginL+plotW), f1(yy))
		fmt.Fprintf(&b, `<text x="%s" y="%s" text-anchor="end">%s</text>`+"\n", f1(marginL-4), f1(yy+4), strconv.FormatFloat(math.Pow(10, e), 'f', -1, 64))
	}
	fmt.Fprintf(&b, `<text transform="translate(14 %s) rotate(-90)" text-anchor="middle">latency (ms, log)</text>`+"\n", f1((sc.top+sc.bottom)/2))
	d.timeAxis(&b, sc.top, sc.bottom)
	d.bands(&b, sc.top, sc.bottom)
	drawDots(&b, sc, dots)
	d.phaseLines(&b, sc.top, sc.bottom)
	b.WriteString("</svg>\n")
	return b.String()
}

// drawDots draws the dots grouped by outcome and kind: filled circles
// for acquires, filled squares for releases, hollow circles for
// resource operations and hollow squares for the others.
func drawDots(b *strings.Builder, sc latencyScale, dots []dot) {
	for o := 0; o < nOutcomes; o++ {
		for k := 0; k < nKinds; k++ {
			var g strings.Builder
			for _, dt := range dots {
				if dt.outc != o || dt.kind != k {
					continue
				}
				// Only non-ok dots get tooltips: they are the few that
				// matter, and tooltips dominate the size.
				tip := ""
				if o != oOK {
					tip = "<title>" + esc(tooltip(dt.p, 0)) + "</title>"
				}
				x, yy := f1(dt.x), f1(sc.y(dt.lat))
				switch k {
				case kAcquire, kResource:
					fmt.Fprintf(&g, `<circle cx="%s" cy="%s" r="2">%s</circle>`+"\n", x, yy, tip)
				default:
					fmt.Fprintf(&g, `<rect x="%s" y="%s" width="3.5" height="3.5">%s</rect>`+"\n", f1(dt.x-1.75), f1(sc.y(dt.lat)-1.75), tip)
				}
			}
			if g.Len() == 0 {
				continue
			}
			c := colours[o][k]
			paint := `fill="` + c + `"`
			if k == kResource || k == kOther {
				paint = `fill="none" stroke="` + c + `" stroke-width="1"` // hollow
			}
			fmt.Fprintf(b, "<g %s>\n%s</g>\n", paint, g.String())
		}
	}
}

// secs formats a run time in seconds.
func secs(t time.Duration) string { return strconv.FormatFloat(t.Seconds(), 'f', 3, 64) + "s" }

// f1 formats a coordinate with one decimal (trimmed).
func f1(v float64) string {
	if math.IsNaN(v) || math.IsInf(v, 0) {
		v = 0
	}
	return strconv.FormatFloat(math.Round(v*10)/10, 'f', -1, 64)
}

// esc escapes text for HTML and XML alike, and replaces what XML cannot
// carry at all (control characters, invalid UTF-8) so that every SVG
// fragment stays well-formed XML.
func esc(s string) string {
	var b strings.Builder
	for _, r := range s {
		switch {
		case r == '<':
			b.WriteString("&lt;")
		case r == '>':
			b.WriteString("&gt;")
		case r == '&':
			b.WriteString("&amp;")
		case r == '"':
			b.WriteString("&quot;")
		case r == '\'':
			b.WriteString("&#39;")
		case r == '\t' || r == '\n' || r == '\r' ||
			r >= 0x20 && r <= 0xD7FF || r >= 0xE000 && r <= 0xFFFC || r >= 0x10000 && r <= 0x10FFFF:
			b.WriteRune(r)
		default: // includes utf8.RuneError from invalid bytes
			b.WriteRune('\uFFFD')
		}
	}
	return b.String()
}

// thinOK keeps at most limit items by dropping ok ones (isOK) evenly;
// the others are always kept. It returns the items kept, in order, and
// how many were dropped.
func thinOK[T any](items []T, limit int, isOK func(T) bool) ([]T, int) {
	if len(items) <= limit {
		return items, 0
	}
	nok := 0
	for _, it := range items {
		if isOK(it) {
			nok++
		}
	}
	keepOK := max(0, limit-(len(items)-nok))
	var out []T
	dropped, j := 0, 0
	for _, it := range items {
		if isOK(it) {
			// keep ok item j iff it is the first to reach a new multiple
			// of nok/keepOK
			keepIt := keepOK > 0 && (j*keepOK)/nok != ((j+1)*keepOK)/nok
			j++
			if !keepIt {
				dropped++
				continue
			}
		}
		out = append(out, it)
	}
	return out, dropped
}
