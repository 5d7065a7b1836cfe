package main

import (
	"fmt"
	"io"
	"slices"
	"strconv"
	"text/tabwriter"
	"time"

	"github.com/lockstep-sched/lockstep/test/lib/harness"
)

// baseline is the git revision -baseline measures lockstep at, beside this tree's.
type baseline struct {
	rev string // as given on the command line
	// commit is rev's abbreviated hash, resolved once at the start so that the binary built and
	// the label printed name the same commit even if rev (a branch, HEAD~1) moves during the run.
	commit string
}

// key is the baseline mode's name in every table, and its profiles' and log's file prefix.
func (bl baseline) key() string { return "lockstep@" + bl.commit }

// withBaseline resolves -baseline's revision and puts its mode right after lockstep's, so that the
// two meet the machine in as nearly the same state as one run allows.
func (o options) withBaseline(root string) (options, error) {
	if o.baseline.rev == "" {
		return o, nil
	}
	commit, err := harness.ShortRevision(root, o.baseline.rev)
	if err != nil {
		return o, fmt.Errorf("-baseline: %w", err)
	}
	o.baseline.commit = commit
	at := slices.Index(o.modes, "lockstep") + 1
	o.modes = slices.Insert(slices.Clone(o.modes), at, o.baseline.key())
	return o, nil
}

// lockstepBuild is a lockstep binary, or why it did not build: its mode is then reported as
// unavailable and the others run.
type lockstepBuild struct {
	bin string
	err error
}

// buildLockstep builds this tree's lockstep into dir when a mode runs it, and with -baseline the
// revision's beside it.
func buildLockstep(root, dir string, o options) (tree, base lockstepBuild) {
	if !slices.Contains(o.modes, "lockstep") {
		return tree, base
	}
	progress("building lockstep from ./cmd/extender")
	tree.bin, tree.err = harness.BuildExtender(root, dir, false)
	if o.baseline.rev != "" {
		progress("building lockstep at %s (%s) in a git worktree of its own", o.baseline.rev, o.baseline.commit)
		base.bin, base.err = harness.BuildExtenderAt(root, dir, o.baseline.commit)
	}
	return tree, base
}

// figure is one measure of one mode: as the tables print it ("-" when not measured), and its value
// for a ratio.
type figure struct {
	shown string
	value float64
}

// metric is one figure the comparison reads off both lockstep modes' results.
type metric struct {
	name string
	// higherBetter is true for rates and shares, false for times, CPU and memory.
	higherBetter bool
	of           func(result) figure
}

// uniformMetrics are the uniform workload's table's figures, and lockstep's own record of the
// longest partly bound gang.
var uniformMetrics = []metric{
	{"ordinary pods/s", true, func(r result) figure { return rateFigure(r.ordinary) }},
	{"gang pods/s", true, func(r result) figure { return rateFigure(r.gang) }},
	{"gang done p50", false, func(r result) figure { return pctFigure(r.gangDone, 50) }},
	{"gang done p99", false, func(r result) figure { return pctFigure(r.gangDone, 99) }},
	{"max partial gang", false, func(r result) figure { return durationFigure(r.maxPartial) }},
	{"max partial gang, lockstep's commit records", false, func(r result) figure { return durationFigure(r.commitPartial) }},
	{"idle gang p50", false, func(r result) figure { return pctFigure(r.idle, 50) }},
	{"idle gang p99", false, func(r result) figure { return pctFigure(r.idle, 99) }},
	{"CPU s", false, func(r result) figure { return cpuFigure(r.procs) }},
	{"peak MB", false, func(r result) figure { return peakFigure(r.procs) }},
}

// traceMetrics are the trace workload's table's figures that set two schedulers apart.
var traceMetrics = []metric{
	{"GPUs allocated", true, func(r result) figure { return shareFigure(r.trace.allocated, r.trace.capacity) }},
	{"gangs on fewest nodes", true, func(r result) figure { return shareFigure(r.trace.onFewest, r.trace.placedGangs) }},
	{"placed p50", false, func(r result) figure { return pctFigure(r.trace.placed, 50) }},
	{"placed p99", false, func(r result) figure { return pctFigure(r.trace.placed, 99) }},
	{"gang placed p50", false, func(r result) figure { return pctFigure(r.trace.gangPlaced, 50) }},
	{"gang placed p99", false, func(r result) figure { return pctFigure(r.trace.gangPlaced, 99) }},
	{"gang pods/s", true, func(r result) figure { return gangRateFigure(*r.trace) }},
	{"CPU s", false, func(r result) figure { return cpuFigure(r.procs) }},
	{"peak MB", false, func(r result) figure { return peakFigure(r.procs) }},
}

// printComparison sets this tree's lockstep (new) beside the baseline revision's, both measured in
// this one run: the figures of separate runs on a shared machine differ by more than most changes.
func printComparison(out io.Writer, bl baseline, results []result) {
	fmt.Fprintf(out, "\nlockstep, this tree (new) against lockstep at %s = %s (baseline), one after the other on this control plane;\n", bl.rev, bl.commit)
	fmt.Fprintln(out, "ratio > 1: new is better (baseline/new for times, CPU and memory; new/baseline for rates and shares).")
	news, base := resultOf(results, "lockstep"), resultOf(results, bl.key())
	for _, r := range []result{news, base} {
		if r.mode.unavailable != nil || len(r.costs) == 0 {
			fmt.Fprintf(out, "no comparison: %s did not run (see its error above)\n", r.mode.key)
			return
		}
	}
	metrics := uniformMetrics
	if news.trace != nil {
		metrics = traceMetrics
	}
	tw := tabwriter.NewWriter(out, 0, 0, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintln(tw, "metric\tnew\tbaseline\tratio\tratio is\t")
	for _, m := range metrics {
		n, b := m.of(news), m.of(base)
		if n.shown == "-" && b.shown == "-" {
			continue // neither measured it: -ordinary 0, -idle-samples 0
		}
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\t\n", m.name, n.shown, b.shown, m.ratio(n, b), m.direction())
	}
	_ = tw.Flush()
	for _, r := range []result{news, base} {
		if r.err != nil {
			fmt.Fprintf(out, "%s ended with an error (above): its figures may stop short\n", r.mode.key)
		}
	}
}

// resultOf is the result of the mode named key; a mode that did not run has key alone.
func resultOf(results []result, key string) result {
	if i := slices.IndexFunc(results, func(r result) bool { return r.mode.key == key }); i >= 0 {
		return results[i]
	}
	return result{mode: mode{key: key}}
}

// ratio is how many times better new did than the baseline: > 1 when new is better, whichever way
// the metric counts; "-" when either side measured nothing to divide by.
func (m metric) ratio(n, b figure) string {
	num, den := b.value, n.value
	if m.higherBetter {
		num, den = n.value, b.value
	}
	if num <= 0 || den <= 0 {
		return "-"
	}
	return strconv.FormatFloat(num/den, 'f', 2, 64)
}

func (m metric) direction() string {
	if m.higherBetter {
		return "new/baseline"
	}
	return "baseline/new"
}

func rateFigure(r rate) figure { return figure{perSecond(r), r.perSecond()} }

func pctFigure(d []time.Duration, p int) figure {
	return figure{pct(d, p), percentile(d, p).Seconds()}
}

func durationFigure(d time.Duration) figure { return figure{seconds(d), d.Seconds()} }

func cpuFigure(procs []usage) figure { return figure{cpuTotal(procs), cpuSeconds(procs)} }

func peakFigure(procs []usage) figure { return figure{peakTotal(procs), peakMB(procs)} }

func shareFigure(n, total int) figure {
	if total == 0 {
		return figure{share(n, total), 0}
	}
	return figure{share(n, total), float64(n) / float64(total)}
}

func gangRateFigure(tr traceResult) figure {
	if tr.gangSpan <= 0 {
		return figure{tr.gangRate(), 0}
	}
	return figure{tr.gangRate(), float64(tr.gangPods) / tr.gangSpan.Seconds()}
}
