package main

import (
	"fmt"
	"io"
	"strings"
	"text/tabwriter"
)

// printTraceResults writes the trace workload's table, what each process cost, and what went
// wrong, to out.
func printTraceResults(out io.Writer, o traceOptions, results []result) {
	tw := tabwriter.NewWriter(out, 0, 0, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintln(tw, "mode\tpods created\tgangs placed\tpartly bound\tfirst not placed\tseen at\tGPUs allocated\t"+
		"gangs on fewest nodes\tplaced p50\tplaced p99\tgang placed p50\tgang placed p99\tgang pods/s\tCPU s\tpeak MB\t")
	for _, r := range results {
		tr := r.trace
		if tr == nil {
			fmt.Fprintf(tw, "%s\t(did not run: see below)\t\t\t\t\t\t\t\t\t\t\t\t\t\t\n", r.mode.label)
			continue
		}
		fmt.Fprintf(tw, "%s\t%d\t%d/%d\t%d\t%s\t%.0fs\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t\n", r.mode.label,
			tr.pods, tr.placedGangs, tr.gangs, tr.partial, tr.stopName(), tr.stopAt.Seconds(), tr.allocation(),
			share(tr.onFewest, tr.placedGangs), pct(tr.placed, 50), pct(tr.placed, 99), pct(tr.gangPlaced, 50), pct(tr.gangPlaced, 99),
			tr.gangRate(), cpuTotal(r.procs), peakTotal(r.procs))
	}
	_ = tw.Flush()
	fmt.Fprintf(out, "first not placed: the first gang, or ordinary pod (a gang of one, as bench-packing counts), still not wholly bound %s after it\n", o.placeWait)
	fmt.Fprintln(out, "  arrived; the replay stops when it is seen (seen at: from the scheduler's start), or when the trace runs out (none).")
	fmt.Fprintln(out, "GPUs allocated: GPUs of the pods bound at that moment, of all the nodes' GPUs; the pods that arrived after that item and were")
	fmt.Fprintln(out, "  bound by then are counted, and given beside it. partly bound: gangs with some but not all members bound at that moment.")
	fmt.Fprintln(out, "gangs on fewest nodes: of the gangs placed, those on as few nodes as their GPUs need (members per node = GPUs per node / GPUs")
	fmt.Fprintln(out, "  per member). placed p50/p99: each placed item (gang or pod), its last member's Create returned to its last member bound;")
	fmt.Fprintln(out, "  gang placed: gangs alone. gang pods/s: members of placed gangs over the first gang's creation to the last gang's bind, at")
	fmt.Fprintln(out, "  most the arrival rate: a scheduler that keeps up shows the rate they came at.")
	for _, r := range results {
		if tr := r.trace; tr != nil && tr.stop != nil {
			fmt.Fprintf(out, "%s stopped at %s: %s\n", r.mode.key, tr.stop.name, tr.why)
		}
	}
	printProcesses(out, results)
	printCosts(out, results)
	printProblems(out, results)
}

// gangRate is the placed gangs' pods per second while gangs came, "-" without any.
func (tr traceResult) gangRate() string {
	if tr.gangSpan <= 0 {
		return "-"
	}
	return fmt.Sprintf("%.1f", float64(tr.gangPods)/tr.gangSpan.Seconds())
}

func (tr traceResult) stopName() string {
	if tr.stop == nil {
		return "none"
	}
	return fmt.Sprintf("%s (%s)", tr.stop.name, tr.stop.shape())
}

// allocation is the GPU share at the stop, with how much of it came from later arrivals.
func (tr traceResult) allocation() string {
	s := share(tr.allocated, tr.capacity)
	if tr.stop != nil {
		s += fmt.Sprintf(" (%d pods later)", tr.lateBound)
	}
	return s
}

// summary is one line for the progress log.
func (tr *traceResult) summary() string {
	if tr == nil {
		return "no replay"
	}
	return fmt.Sprintf("%d pods, stop %s at %.0fs, GPUs allocated %s, gangs on fewest nodes %s",
		tr.pods, tr.stopName(), tr.stopAt.Seconds(), share(tr.allocated, tr.capacity), share(tr.onFewest, tr.placedGangs))
}

// share is n of total as a percentage, "-" of nothing.
func share(n, total int) string {
	if total == 0 {
		return "-"
	}
	return fmt.Sprintf("%.1f%%", 100*float64(n)/float64(total))
}

// describeItems counts the items by kind and shape, for the load line.
func describeItems(items []traceItem) string {
	pods, gangs, gpus := 0, 0, 0
	shapes := map[int]int{}
	for _, it := range items {
		pods += it.size
		gpus += it.size * it.gpus
		if it.isGang() {
			gangs++
			shapes[it.gpus]++
		}
	}
	var parts []string
	for _, g := range []int{1, 2, 4, 8} {
		if shapes[g] > 0 {
			parts = append(parts, fmt.Sprintf("%d of %d GPU members", shapes[g], g))
		}
	}
	return fmt.Sprintf("%d items: %d ordinary pods and %d gangs (%s), %d pods, %d GPUs in all", len(items), len(items)-gangs, gangs,
		strings.Join(parts, ", "), pods, gpus)
}
