package report

import (
	"encoding/json"
	"encoding/xml"
	"errors"
	"io"
	"math/rand/v2"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/lockd/lockd/jepsen/checker"
	"github.com/lockd/lockd/jepsen/history"
)

const ms1 = time.Millisecond

// small is a hand-made history: two processes, one fault, the final
// phase, a retirement after an info and an unfinished op.
func small() []history.Event {
	ev := []history.Event{
		{Type: history.Invoke, Time: 1 * ms1, Process: 0, F: history.Acquire, Locks: []history.Lock{{Name: "a"}}},
		{Type: history.Invoke, Time: 2 * ms1, Process: 1, F: history.Acquire, Locks: []history.Lock{{Name: "a"}}},
		{Type: history.OK, Time: 11 * ms1, Process: 0, F: history.Acquire, Granted: []history.Granted{{Name: "a", Token: 1}}},
		{Type: history.Info, Time: 12 * ms1, Process: history.Nemesis, F: history.Start, Fault: "partition", Targets: []string{"n1"}},
		{Type: history.Invoke, Time: 13 * ms1, Process: 0, F: history.ResWrite, Value: 7},
		{Type: history.OK, Time: 15 * ms1, Process: 0, F: history.ResWrite, Seq: 1},
		{Type: history.Fail, Time: 42 * ms1, Process: 1, F: history.Acquire, Error: "timeout"},
		{Type: history.Invoke, Time: 43 * ms1, Process: 0, F: history.Release, Names: []string{"a"}},
		{Type: history.Info, Time: 143 * ms1, Process: 0, F: history.Release, Error: "unavailable"},
		{Type: history.Info, Time: 150 * ms1, Process: history.Nemesis, F: history.Stop, Fault: "partition"},
		{Type: history.Info, Time: 151 * ms1, Process: history.Harness, F: history.Phase, Fault: "final"},
		{Type: history.Info, Time: 152 * ms1, Process: 1, F: history.Lost},
		{Type: history.Invoke, Time: 160 * ms1, Process: 2, F: history.Acquire, Locks: []history.Lock{{Name: "a"}}},
	}
	for i := range ev {
		ev[i].Index = i
	}
	return ev
}

func TestSummarize(t *testing.T) {
	res := []checker.Result{{Checker: "safety", Verdict: checker.Valid}, {Checker: "linear", Verdict: checker.Valid}}
	s := Summarize(Run{ID: "x"}, small(), res)
	if !s.Valid || s.ID != "x" || s.Events != 13 {
		t.Fatalf("valid %v id %q events %d", s.Valid, s.ID, s.Events)
	}
	want := map[string]map[string]int{
		"acquire":   {"invoke": 3, "ok": 1, "fail": 1, Unfinished: 1},
		"res-write": {"invoke": 1, "ok": 1},
		"release":   {"invoke": 1, "info": 1},
		"lost":      {"info": 1},
	}
	if !reflect.DeepEqual(s.Ops, want) {
		t.Errorf("ops %v, want %v", s.Ops, want)
	}
	if !reflect.DeepEqual(s.Faults, map[string]int{"partition": 1}) {
		t.Errorf("faults %v", s.Faults)
	}
	if l := s.LatencyMS["acquire"]; l.N != 2 || l.P50 != 10 || l.P95 != 40 || l.Max != 40 {
		t.Errorf("acquire latency %+v", l)
	}
	if l := s.LatencyMS["release"]; l.N != 1 || l.P99 != 100 {
		t.Errorf("release latency %+v", l)
	}

	res[1].Verdict = checker.Unknown
	if Summarize(Run{}, small(), res).Valid {
		t.Error("unknown verdict counted as valid")
	}
	if Summarize(Run{}, small(), nil).Valid {
		t.Error("no results counted as valid")
	}
}

func TestWriteJSONRoundTrip(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "run")
	run := Run{
		ID: "20261122T170102Z-mutex-mixed-n3", Workload: "mutex", Nemesis: []string{"partition", "kill"},
		Nodes: []string{"n1", "n2", "n3"}, Duration: time.Minute, Seed: 42, Clients: 5,
		Started: time.Date(2026, 11, 22, 17, 1, 2, 0, time.UTC), Command: []string{"jepsen", "-seed", "42"}, Commit: "abc123",
	}
	s := Summarize(run, small(), []checker.Result{{Checker: "safety", Verdict: checker.Invalid, Anomalies: []string{"x"}, Counts: map[string]int{"n": 1}}})
	if err := WriteJSON(dir, s); err != nil {
		t.Fatal(err)
	}
	b, err := os.ReadFile(filepath.Join(dir, "results.json"))
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(string(b), "\n  \"id\": ") {
		t.Errorf("not indented, or Run not inlined:\n%s", b)
	}
	var got Summary
	if err := json.Unmarshal(b, &got); err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(got, s) {
		t.Errorf("round trip:\n got %+v\nwant %+v", got, s)
	}
}

// svgs returns the <svg>...</svg> fragments of page.
func svgs(t *testing.T, page string) []string {
	var out []string
	for rest := page; ; {
		i := strings.Index(rest, "<svg")
		if i < 0 {
			return out
		}
		j := strings.Index(rest[i:], "</svg>")
		if j < 0 {
			t.Fatal("unterminated <svg>")
		}
		out = append(out, rest[i:i+j+len("</svg>")])
		rest = rest[i+j:]
	}
}

// wellFormed decodes s as XML, strictly or HTML-leniently.
func wellFormed(t *testing.T, what, s string, strict bool) {
	t.Helper()
	d := xml.NewDecoder(strings.NewReader(s))
	if !strict {
		d.Strict, d.AutoClose, d.Entity = false, xml.HTMLAutoClose, xml.HTMLEntity
	}
	for {
		_, err := d.Token()
		if errors.Is(err, io.EOF) {
			return
		}
		if err != nil {
			t.Fatalf("%s: %v", what, err)
		}
	}
}

func render(t *testing.T, s Summary, ev []history.Event) string {
	t.Helper()
	dir := t.TempDir()
	if err := WriteHTML(dir, s, ev); err != nil {
		t.Fatal(err)
	}
	b, err := os.ReadFile(filepath.Join(dir, "report.html"))
	if err != nil {
		t.Fatal(err)
	}
	page := string(b)
	wellFormed(t, "page", page, false)
	fr := svgs(t, page)
	if len(fr) != 2 {
		t.Fatalf("%d svg fragments, want 2", len(fr))
	}
	for _, f := range fr {
		wellFormed(t, "svg", f, true)
	}
	for _, bad := range []string{"<script", "http://", "https://", "<link", "<img"} {
		// The SVG namespace is the one URL allowed: it is not fetched.
		if strings.Contains(strings.ReplaceAll(page, `xmlns="http://www.w3.org/2000/svg"`, ""), bad) {
			t.Errorf("page contains %q", bad)
		}
	}
	return page
}

func TestWriteHTMLEscapes(t *testing.T) {
	ev := small()
	hostile := "<script>alert('x')</script> & \"q\" \x00\x01 \xff"
	ev[6].Error = hostile             // a fail: in a tooltip
	ev[3].Targets = []string{hostile} // a fault label
	s := Summarize(Run{ID: hostile, Workload: "mutex", Negative: hostile, Command: []string{hostile}}, ev, []checker.Result{{
		Checker: hostile, Verdict: checker.Invalid, Counts: map[string]int{hostile: 1},
		Anomalies: []string{hostile}, Note: hostile, Files: []string{hostile, "javascript:alert(1)"},
	}})
	page := render(t, s, ev)
	if !strings.Contains(page, "&lt;script&gt;alert(&#39;x&#39;)") {
		t.Error("hostile anomaly not shown escaped")
	}
	if strings.Contains(page, `href="javascript`) {
		t.Error("URL scheme linked")
	}
	if !strings.Contains(page, "INVALID") || !strings.Contains(page, "Negative control") {
		t.Error("verdict or negative control missing")
	}
	if !strings.Contains(page, "unfinished: invoked 0.160s") || !strings.Contains(page, "lost its session") {
		t.Error("unfinished op or lost session not drawn")
	}
}

func TestWriteHTMLEmpty(t *testing.T) {
	page := render(t, Summarize(Run{}, nil, nil), nil)
	if !strings.Contains(page, "UNKNOWN") || !strings.Contains(page, "No faults") {
		t.Error("empty run: verdict or fault note missing")
	}
	page = render(t, Summarize(Run{}, small()[:1], []checker.Result{{Checker: "c", Verdict: checker.Valid}}), small()[:1])
	if !strings.Contains(page, "VALID") || !strings.Contains(page, "unfinished: invoked") {
		t.Error("single unfinished op: not drawn")
	}
}

// synth makes a random history of about n events, advancing up to tick
// per attempted operation: workers retiring after infos, lost sessions,
// faults and the final phase.
func synth(n, workers int, tick time.Duration, seed uint64) []history.Event {
	rnd := rand.New(rand.NewPCG(seed, 1))
	var ev []history.Event
	add := func(e history.Event) { e.Index = len(ev); ev = append(ev, e) }
	type w struct {
		proc    int
		free    time.Duration
		holding bool
	}
	ws := make([]w, workers)
	next := 0
	for i := range ws {
		ws[i].proc = next
		next++
	}
	type done struct {
		t time.Duration
		e history.Event
	}
	var pending []done
	var now time.Duration
	faults := []string{"partition", "kill", "pause", "clock"}
	nextFault, faultOn := 2*time.Second, ""
	phased := false
	for len(ev) < n {
		now += time.Duration(rnd.Int64N(int64(tick)))
		// completions due
		for i := 0; i < len(pending); {
			if pending[i].t <= now {
				add(pending[i].e)
				pending = append(pending[:i], pending[i+1:]...)
				continue
			}
			i++
		}
		if now >= nextFault {
			if faultOn == "" {
				faultOn = faults[rnd.IntN(len(faults))]
				add(history.Event{Type: history.Info, Time: now, Process: history.Nemesis, F: history.Start, Fault: faultOn, Targets: []string{"n" + string(rune('1'+rnd.IntN(3)))}})
				nextFault = now + time.Duration(1+rnd.IntN(4))*time.Second
			} else {
				add(history.Event{Type: history.Info, Time: now, Process: history.Nemesis, F: history.Stop, Fault: faultOn})
				faultOn, nextFault = "", now+time.Duration(1+rnd.IntN(3))*time.Second
			}
		}
		k := rnd.IntN(workers)
		if ws[k].free > now {
			continue
		}
		p := ws[k].proc
		lat := time.Duration(1+rnd.ExpFloat64()*8) * time.Millisecond
		if faultOn != "" {
			lat *= time.Duration(1 + rnd.IntN(30))
		}
		inv := history.Event{Type: history.Invoke, Time: now, Process: p}
		comp := history.Event{Time: now + lat, Process: p}
		switch {
		case !ws[k].holding:
			inv.F = history.Acquire
			inv.Locks = []history.Lock{{Name: "lock-" + string(rune('a'+rnd.IntN(3)))}}
		case rnd.IntN(3) > 0:
			inv.F = []string{history.ResRead, history.ResWrite}[rnd.IntN(2)]
		default:
			inv.F = history.Release
		}
		comp.F = inv.F
		r := rnd.IntN(100)
		switch {
		case r < 80 || faultOn == "" && r < 97:
			comp.Type = history.OK
			if inv.F == history.Acquire {
				comp.Granted = []history.Granted{{Name: inv.Locks[0].Name, Token: uint64(len(ev))}}
				ws[k].holding = true
			}
			if inv.F == history.Release {
				ws[k].holding = false
			}
		case r < 92:
			comp.Type, comp.Error = history.Fail, "timeout"
		default:
			comp.Type, comp.Error = history.Info, "unavailable"
			ws[k].proc, ws[k].holding = next, false // retire
			next++
			if rnd.IntN(2) == 0 {
				pending = append(pending, done{now + lat + 1, history.Event{Type: history.Info, Process: p, F: history.Lost, Time: now + lat + 1}})
			}
		}
		add(inv)
		pending = append(pending, done{now + lat, comp})
		ws[k].free = now + lat + time.Millisecond
		if !phased && len(ev) >= n*9/10 {
			phased = true
			add(history.Event{Type: history.Info, Time: now, Process: history.Harness, F: history.Phase, Fault: "final"})
		}
	}
	return ev // pending completions are left unfinished
}

func TestWriteHTMLLarge(t *testing.T) {
	ev := synth(50000, 12, time.Millisecond, 1)
	s := Summarize(Run{ID: "big"}, ev, []checker.Result{{Checker: "c", Verdict: checker.Valid}})
	page := render(t, s, ev)
	if len(page) > 6<<20 {
		t.Errorf("report.html is %d bytes for %d events", len(page), len(ev))
	}
	if !strings.Contains(page, "Downsampled") {
		t.Error("no downsampling note")
	}
	t.Logf("%d events: %d bytes", len(ev), len(page))
}

// A negative control counts as caught only when a checker says invalid:
// an Unknown (porcupine out of time, no final read) proves nothing
// (found in review).
func TestFlaggedNeedsAnInvalidVerdict(t *testing.T) {
	unknown := Summarize(Run{Negative: "unfenced"}, nil, []checker.Result{
		{Checker: "safety", Verdict: checker.Valid},
		{Checker: "linearizable", Verdict: checker.Unknown},
	})
	if unknown.Valid || unknown.Flagged() {
		t.Fatalf("valid+unknown: Valid=%v Flagged=%v, want false, false", unknown.Valid, unknown.Flagged())
	}
	invalid := Summarize(Run{}, nil, []checker.Result{{Checker: "safety", Verdict: checker.Invalid}})
	if !invalid.Flagged() {
		t.Fatal("an invalid verdict is not Flagged")
	}
}

// A fault whose start carries an error (applied in part at most), or
// that applied nothing, is counted apart from the faults that were
// applied.
func TestSummarizeCountsFailedFaultsApart(t *testing.T) {
	start := func(fault, err string) history.Event {
		return history.Event{Process: history.Nemesis, Type: history.Info, F: history.Start, Fault: fault, Error: err}
	}
	unapplied := history.Event{Process: history.Nemesis, Type: history.Info, F: history.Unapplied, Fault: "member-leave", Error: "no leader"}
	s := Summarize(Run{}, []history.Event{start("clock-bump", ""), start("clock-bump", "404"), start("member-grow", "timeout"), unapplied}, nil)
	want := map[string]int{"clock-bump": 1, "clock-bump (failed)": 1, "member-grow (failed)": 1, "member-leave (failed)": 1}
	if !reflect.DeepEqual(s.Faults, want) {
		t.Errorf("faults %v, want %v", s.Faults, want)
	}
}
