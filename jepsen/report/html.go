package report

import (
	"fmt"
	"maps"
	"slices"
	"strings"
	"time"

	"github.com/lockd/lockd/jepsen/checker"
	"github.com/lockd/lockd/jepsen/history"
)

const css = `
body{font:14px/1.4 system-ui,sans-serif;margin:20px;color:#222;max-width:1340px}
h1{font-size:20px;margin:0 0 6px}h2{font-size:17px;margin:26px 0 8px;border-bottom:1px solid #ccc}
table{border-collapse:collapse;margin:4px 0}td,th{border:1px solid #ccc;padding:3px 8px;text-align:left;vertical-align:top}
th{background:#f0f0f0}td.n{text-align:right;font-variant-numeric:tabular-nums}
table.meta td:first-child{font-weight:600;background:#fafafa}
.verdict{display:inline-block;font-size:34px;font-weight:700;padding:4px 22px;border-radius:6px;color:#fff;margin:6px 0 12px}
.valid{background:#2e7d32}.invalid{background:#c62828}.unknown{background:#f9a825;color:#222}
.v-valid{color:#2e7d32;font-weight:700}.v-invalid{color:#c62828;font-weight:700}.v-unknown{color:#b8860b;font-weight:700}
.anom{font-family:ui-monospace,monospace;font-size:12px;white-space:pre-wrap;margin:2px 0;padding-left:22px}
.note{color:#555;font-size:13px;margin:4px 0}
.neg{background:#fff3e0;border:1px solid #ffb74d;padding:4px 8px;display:inline-block}
.lg{display:inline-block;margin-right:14px;font-size:12px}.sw{display:inline-block;width:18px;vertical-align:middle;margin-right:4px}
svg.plot{display:block;font:11px sans-serif;border:1px solid #ddd;background:#fff}
svg .fl{font:11px sans-serif;font-weight:600}svg .ll{font:10px sans-serif;fill:#666}
code{font-family:ui-monospace,monospace;font-size:12px}
`

// WriteHTML writes dir/report.html (creating dir): one self-contained
// page (inline CSS and SVG, no scripts, no external resources) with the
// run, the verdicts and counts of s, and a timeline and latency plot of
// events.
func WriteHTML(dir string, s Summary, events []history.Event) error {
	return writeFile(dir, "report.html", []byte(renderHTML(s, events)))
}

func renderHTML(s Summary, events []history.Event) string {
	var w page
	d := newDrawing(events)
	w.header(s)
	w.runTable(s)
	w.checkers(s.Results)
	w.operations(s)
	w.faults(s.Faults, d)
	w.timelineSection(events, d)
	w.latencySection(events, d)
	w.printf("</body></html>\n")
	return w.String()
}

// page is report.html being written.
type page struct{ strings.Builder }

func (w *page) printf(format string, a ...any) { fmt.Fprintf(w, format, a...) }

// header opens the page: the title and the overall verdict.
func (w *page) header(s Summary) {
	verdict, vclass := "VALID", "valid"
	switch {
	case slices.ContainsFunc(s.Results, func(r checker.Result) bool { return r.Verdict == checker.Invalid }):
		verdict, vclass = "INVALID", "invalid"
	case !s.Valid:
		verdict, vclass = "UNKNOWN", "unknown"
	}
	title := s.ID
	if title == "" {
		title = "lockd Jepsen run"
	}
	w.printf("<!DOCTYPE html>\n<html lang=\"en\"><head><meta charset=\"utf-8\"/>\n<title>%s: %s</title>\n<style>%s</style></head>\n<body>\n",
		esc(title), verdict, css)
	w.printf("<h1>%s</h1>\n<div class=\"verdict %s\">%s</div>\n", esc(title), vclass, verdict)
	if s.Negative != "" {
		// A negative control is supposed to be caught: say so next to
		// the verdict so that a red page is not misread.
		w.printf("<p class=\"neg\">Negative control <b>%s</b>: this run is expected to be INVALID.</p>\n", esc(s.Negative))
	}
	if len(s.Results) == 0 {
		w.printf("<p class=\"note\">No checker results: the run is not judged valid.</p>\n")
	}
}

// runTable describes the run.
func (w *page) runTable(s Summary) {
	w.printf("<table class=\"meta\">\n")
	row := func(k, v string) { w.printf("<tr><td>%s</td><td>%s</td></tr>\n", k, esc(v)) }
	row("Workload", s.Workload)
	row("Nemesis", strings.Join(s.Nemesis, ", "))
	row("Nodes", strings.Join(s.Nodes, ", "))
	row("Clients", fmt.Sprint(s.Clients))
	row("Duration", s.Duration.String())
	row("Seed", fmt.Sprint(s.Seed))
	if !s.Started.IsZero() {
		row("Started", s.Started.UTC().Format(time.RFC3339))
	}
	row("Negative control", orNone(s.Negative))
	row("lockd commit", s.Commit)
	w.printf("<tr><td>Command</td><td><code>%s</code></td></tr>\n", esc(strings.Join(s.Command, " ")))
	row("Events", fmt.Sprint(s.Events))
	w.printf("</table>\n")
}

// checkers is the table of verdicts, counts and anomalies.
func (w *page) checkers(results []checker.Result) {
	w.printf("<h2>Checkers</h2>\n<table>\n<tr><th>checker</th><th>verdict</th><th>counts</th><th>anomalies / notes</th></tr>\n")
	for _, r := range results {
		w.printf("<tr><td>%s</td><td class=\"v-%s\">%s</td><td>", esc(r.Checker), vclassOf(r.Verdict), esc(string(r.Verdict)))
		for _, k := range slices.Sorted(maps.Keys(r.Counts)) {
			w.printf("%s=%d<br/>", esc(k), r.Counts[k])
		}
		w.printf("</td><td>")
		if r.Note != "" {
			w.printf("<div class=\"note\">%s</div>", esc(r.Note))
		}
		if len(r.Anomalies) > 0 {
			open := ""
			if !r.OK() {
				open = ` open="open"`
			}
			w.printf("<details%s><summary>%d anomalies</summary><ol class=\"anom\">", open, len(r.Anomalies))
			for _, a := range r.Anomalies {
				w.printf("<li>%s</li>", esc(a))
			}
			w.printf("</ol></details>")
		}
		for _, f := range r.Files {
			if strings.Contains(f, ":") { // relative paths only: no URL schemes
				w.printf("<div>%s</div>", esc(f))
			} else {
				w.printf("<div><a href=\"%s\">%s</a></div>", esc(f), esc(f))
			}
		}
		w.printf("</td></tr>\n")
	}
	w.printf("</table>\n")
}

// operations is the table of operation outcomes and latencies.
func (w *page) operations(s Summary) {
	types := []string{string(history.Invoke), string(history.OK), string(history.Fail), string(history.Info), Unfinished}
	w.printf("<h2>Operations</h2>\n<table>\n<tr><th>op</th>")
	for _, t := range types {
		w.printf("<th>%s</th>", t)
	}
	w.printf("<th>latency p50 ms</th><th>p95</th><th>p99</th><th>max</th></tr>\n")
	for _, f := range slices.Sorted(maps.Keys(s.Ops)) {
		w.printf("<tr><td>%s</td>", esc(f))
		for _, t := range types {
			w.printf("<td class=\"n\">%d</td>", s.Ops[f][t])
		}
		if l, ok := s.LatencyMS[f]; ok {
			w.printf("<td class=\"n\">%.1f</td><td class=\"n\">%.1f</td><td class=\"n\">%.1f</td><td class=\"n\">%.1f</td>", l.P50, l.P95, l.P99, l.Max)
		} else {
			w.printf("<td></td><td></td><td></td><td></td>")
		}
		w.printf("</tr>\n")
	}
	w.printf("</table>\n")
}

// faults is the table of faults injected, with their colours.
func (w *page) faults(faults map[string]int, d drawing) {
	w.printf("<h2>Faults</h2>\n")
	if len(faults) == 0 {
		w.printf("<p class=\"note\">No faults injected.</p>\n")
		return
	}
	w.printf("<table>\n<tr><th>fault</th><th>count</th></tr>\n")
	for _, f := range slices.Sorted(maps.Keys(faults)) {
		sw := ""
		if c, ok := d.colour[f]; ok {
			sw = fmt.Sprintf("<span class=\"sw\" style=\"background:%s;opacity:.5\">&#160;</span>", c)
		}
		w.printf("<tr><td>%s%s</td><td class=\"n\">%d</td></tr>\n", sw, esc(f), faults[f])
	}
	w.printf("</table>\n")
}

// timelineSection is the timeline, what it left out, and its legend.
func (w *page) timelineSection(events []history.Event, d drawing) {
	svg, ts := timeline(events, d)
	w.printf("<h2>Timeline</h2>\n<p class=\"note\">One lane per run of client processes (a process reuses the lane of one that finished, so a worker's successive processes usually share a lane): %d processes in %d lanes, %d operations. Bars run from invoke to completion; unfinished ones (dashed) to the end of the run; &#9660; marks a lost session. Shaded bands are fault windows (nemesis start to stop); the dashed blue line starts the final phase. Hover for details.</p>\n",
		ts.processes, ts.lanes, ts.ops)
	if ts.covered > 0 || ts.sampled > 0 || ts.dropped > 0 {
		w.printf("<p class=\"note\"><b>Downsampled:</b> %d of %d operations drawn", ts.drawn, ts.ops)
		if ts.covered > 0 {
			w.printf("; %d hidden under a longer bar of the same kind and outcome starting at the same pixel (its tooltip counts them)", ts.covered)
		}
		if ts.sampled > 0 {
			w.printf("; %d ok operations left out evenly to stay under %d bars (failures and infos are all drawn)", ts.sampled, maxBars)
		}
		if ts.dropped > 0 {
			w.printf("; %d operations in %d lanes beyond the first %d not drawn", ts.dropped, ts.lanesDropped, maxLanes)
		}
		w.printf(".</p>\n")
	}
	w.printf("<div>")
	for k := 0; k < nKinds; k++ {
		w.printf("<span class=\"lg\">%s: ", kindNames[k])
		for o := 0; o < oUnfinished; o++ {
			w.printf("<span class=\"sw\" style=\"background:%s;height:%.0fpx\" title=\"%s\">&#160;</span>", colours[o][k], 4+10*kindHeight[k], outcomeNames[o])
		}
		w.printf("</span>")
	}
	w.printf("<span class=\"lg\">(green ok, orange fail, red info; height: acquire &gt; other &gt; release &gt; resource)</span></div>\n")
	w.WriteString(svg)
}

// latencySection is the latency plot and what it left out.
func (w *page) latencySection(events []history.Event, d drawing) {
	svg, ls := latencyPlot(events, d)
	w.printf("<h2>Latency</h2>\n<p class=\"note\">One mark per completed operation at its invoke time: filled circle acquire, filled square release, hollow circle resource op, hollow square other; green ok, orange fail, red info. %d unfinished operations have no latency.</p>\n", ls.unfinished)
	if ls.covered > 0 || ls.sampled > 0 {
		w.printf("<p class=\"note\"><b>Downsampled:</b> %d of %d completed operations drawn", ls.drawn, ls.ops-ls.unfinished)
		if ls.covered > 0 {
			w.printf("; %d fall on the pixel of an identical mark", ls.covered)
		}
		if ls.sampled > 0 {
			w.printf("; %d ok operations left out evenly to stay under %d marks (failures and infos are all drawn)", ls.sampled, maxDots)
		}
		w.printf(".</p>\n")
	}
	w.WriteString(svg)
}

func vclassOf(v checker.Verdict) string {
	switch v {
	case checker.Valid:
		return "valid"
	case checker.Invalid:
		return "invalid"
	}
	return "unknown"
}

func orNone(s string) string {
	if s == "" {
		return "none"
	}
	return s
}
