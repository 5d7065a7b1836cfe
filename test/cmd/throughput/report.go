package main

import (
	"fmt"
	"io"
	"slices"
	"strconv"
	"strings"
	"text/tabwriter"
	"time"
)

// printResults writes the throughput table, the per-phase CPU table, the targets and what went
// wrong, to out.
func printResults(out io.Writer, w workload, results []result) {
	tw := tabwriter.NewWriter(out, 0, 0, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintln(tw, "mode\tordinary pods/s\tgang pods/s\tgang done p50\tgang done p99\tmax partial gang\t"+
		"idle gang p50\tidle gang p99\tCPU s\tpeak MB\tstalls\tfalse binds\t")
	for _, r := range results {
		if r.err != nil && r.ordinary.total == 0 {
			fmt.Fprintf(tw, "%s\t(did not run: see below)\t\t\t\t\t\t\t\t\t\t\t\n", r.mode.label)
			continue
		}
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%d\t%s\t\n", r.mode.label,
			perSecond(r.ordinary), perSecond(r.gang),
			pct(r.gangDone, 50), pct(r.gangDone, 99), seconds(r.maxPartial),
			pct(r.idle, 50), pct(r.idle, 99),
			cpuTotal(r.procs), peakTotal(r.procs), len(r.stalls), falseBinds(r.falseBinds))
	}
	_ = tw.Flush()
	fmt.Fprintln(out, "CPU s and peak MB: the mode's own processes together (scheduler, lockstep or the floor extender, Volcano's controller-manager) over the whole mode,")
	fmt.Fprintln(out, "each from its readiness to its stop (start-up left out); peak MB adds each process's highest resident memory. Each process")
	fmt.Fprintln(out, "on its own is in the table below.")
	printProcesses(out, results)
	fmt.Fprintf(out, "pods/s: pods bound / (last bind - scheduler ready); * = not all %d ordinary or %d gang pods bound (see stalls).\n",
		w.ordinary, w.gangs*w.gangSize)
	fmt.Fprintln(out, "gang done: scheduler ready to the gang's last bind. partial: first to min-available-th bind of one gang "+
		"(idle gangs included). idle gang: last member's Create returned to last member bound, nothing else pending.")
	for _, r := range results {
		if r.maxPartialGang != "" {
			fmt.Fprintf(out, "longest partly bound, %s: %s for %s\n", r.mode.key, r.maxPartialGang, seconds(r.maxPartial))
		}
		if r.commitPartialGang != "" {
			fmt.Fprintf(out, "longest partly bound by lockstep's own commit records (/debug/gangs lastCommit.partlyBoundFor), %s: %s for %s\n",
				r.mode.key, r.commitPartialGang, seconds(r.commitPartial))
		}
	}
	printCosts(out, results)
	printAPIWork(out, results)
	printTargets(out, w, results)
	printProblems(out, results)
}

// printCosts shows where each phase's CPU went: on two cores, a phase whose processes together
// use close to 2 CPU seconds per second is CPU-bound, and the largest user is what limits it.
func printCosts(out io.Writer, results []result) {
	fmt.Fprintln(out, "\nCPU seconds per phase: ordinary and gangs from scheduler ready to the last bind; idle over all samples,")
	fmt.Fprintln(out, "including the waits for a quiet machine before each. cores busy = all CPU seconds / wall seconds (at most 2 here).")
	tw := tabwriter.NewWriter(out, 0, 0, 2, ' ', tabwriter.AlignRight)
	columns := costColumns(results)
	fmt.Fprintf(tw, "mode\tphase\tpods bound\twall s\t%s\tcores busy\t\n", strings.Join(columns, "\t"))
	for _, r := range results {
		for _, c := range r.costs {
			cells, total := c.cells(columns, func(s float64) string { return strconv.FormatFloat(s, 'f', 1, 64) })
			fmt.Fprintf(tw, "%s\t%s\t%d\t%.1f\t%s\t%.2f\t\n", c.mode, c.phase, c.pods, c.wall.Seconds(),
				strings.Join(cells, "\t"), total/c.wall.Seconds())
		}
	}
	_ = tw.Flush()
	printCostsPerPod(out, results)
}

// costColumns are the costComponents some result measured, in the table's order: a process no
// mode of the run started gets no column.
func costColumns(results []result) []string {
	var columns []string
	for _, name := range costComponents {
		for _, r := range results {
			if slices.ContainsFunc(r.costs, func(c cost) bool { _, ok := c.cpu[name]; return ok }) {
				columns = append(columns, name)
				break
			}
		}
	}
	return columns
}

// cells formats each column's CPU seconds ("-" for a process the mode does not run) and sums
// them.
func (c cost) cells(columns []string, format func(seconds float64) string) (cells []string, total float64) {
	cells = make([]string, len(columns))
	for i, name := range columns {
		cells[i] = "-"
		if v, ok := c.cpu[name]; ok {
			cells[i] = format(v)
			total += v
		}
	}
	return cells, total
}

// printCostsPerPod is the same CPU per pod bound, which compares modes whose phases took different
// times: what one more pod costs each process.
func printCostsPerPod(out io.Writer, results []result) {
	fmt.Fprintln(out, "\nCPU milliseconds per pod bound, same phases:")
	tw := tabwriter.NewWriter(out, 0, 0, 2, ' ', tabwriter.AlignRight)
	columns := costColumns(results)
	fmt.Fprintf(tw, "mode\tphase\t%s\tall\t\n", strings.Join(columns, "\t"))
	for _, r := range results {
		for _, c := range r.costs {
			if c.pods == 0 {
				continue
			}
			perPod := func(s float64) string { return strconv.FormatFloat(1000*s/float64(c.pods), 'f', 2, 64) }
			cells, total := c.cells(columns, perPod)
			fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t\n", c.mode, c.phase, strings.Join(cells, "\t"), perPod(total))
		}
	}
	_ = tw.Flush()
}

// printTargets reports the targets. They are reported, not asserted: a miss is a finding.
func printTargets(out io.Writer, w workload, results []result) {
	byKey := map[string]result{}
	for _, r := range results {
		byKey[r.mode.key] = r
	}
	fmt.Fprintln(out, "\nTargets (reported, not asserted):")
	verdict := func(ok bool, target, got string) {
		v := "MISS"
		if ok {
			v = "PASS"
		}
		fmt.Fprintf(out, "%s  %s: %s\n", v, target, got)
	}
	var clean []string
	allClean := true
	for _, r := range results {
		fb := 0
		if r.falseBinds != nil {
			fb = *r.falseBinds
		}
		clean = append(clean, fmt.Sprintf("%s %d stalls, %s false binds", r.mode.key, len(r.stalls), falseBinds(r.falseBinds)))
		allClean = allClean && r.err == nil && len(r.stalls) == 0 && fb == 0
	}
	verdict(allClean, "0 false binds and 0 stalls in every mode", strings.Join(clean, "; "))
	ls, lsOK := byKey["lockstep"]
	if !lsOK || ls.err != nil {
		return
	}
	verdict(ls.maxPartial <= time.Second, "no gang partly bound for more than 1s with lockstep",
		fmt.Sprintf("%s as the bench's watch saw it; %s by lockstep's own commit records", seconds(ls.maxPartial), seconds(ls.commitPartial)))
	if stock, ok := byKey["stock"]; ok && stock.err == nil {
		ratio := ls.ordinary.perSecond() / stock.ordinary.perSecond()
		verdict(ratio >= 0.95, fmt.Sprintf("ordinary pods/s with lockstep >= 95%% of kube-scheduler alone (%d nodes)", w.nodes),
			fmt.Sprintf("%.0f%% (%s vs %s)", 100*ratio, perSecond(ls.ordinary), perSecond(stock.ordinary)))
	}
	for _, peer := range []string{"coscheduling", "volcano", "koordinator"} {
		if p, ok := byKey[peer]; ok && p.err == nil {
			verdict(ls.gang.perSecond() > p.gang.perSecond(), "gang pods/s with lockstep ahead of "+p.mode.label,
				fmt.Sprintf("%s vs %s", perSecond(ls.gang), perSecond(p.gang)))
			if len(ls.idle) > 0 && len(p.idle) > 0 {
				verdict(percentile(ls.idle, 99) < percentile(p.idle, 99),
					"idle gang latency p99 with lockstep ahead of "+p.mode.label, fmt.Sprintf("%s vs %s", pct(ls.idle, 99), pct(p.idle, 99)))
			}
		}
	}
	if len(ls.idle) > 0 { // -idle-samples 0 measures none
		verdict(percentile(ls.idle, 99) < time.Second, "idle gang latency p99 < 1s with lockstep", pct(ls.idle, 99))
		verdict(percentile(ls.idle, 90) < 100*time.Millisecond, "idle gang latency p90 < 100ms with lockstep", pct(ls.idle, 90))
	}
	if vc, ok := byKey["volcano"]; ok && vc.err == nil && len(ls.gangDone) > 0 && len(vc.gangDone) > 0 {
		for _, p := range []int{50, 99} {
			verdict(percentile(ls.gangDone, p) <= percentile(vc.gangDone, p),
				fmt.Sprintf("gang done p%d (scheduler ready to the gang's last bind) with lockstep no later than %s", p, vc.mode.label),
				fmt.Sprintf("%s vs %s", pct(ls.gangDone, p), pct(vc.gangDone, p)))
		}
	}
}

func printProblems(out io.Writer, results []result) {
	for _, r := range results {
		for _, s := range r.stalls {
			fmt.Fprintf(out, "stall: %s: %s\n", r.mode.key, s)
		}
		if r.err != nil {
			fmt.Fprintf(out, "error: %s: %v\n", r.mode.key, r.err)
		}
	}
}

// percentile of unsorted durations (nearest rank); 0 when there are none.
func percentile(d []time.Duration, p int) time.Duration {
	if len(d) == 0 {
		return 0
	}
	s := slices.Clone(d)
	slices.Sort(s)
	return s[min(len(s)-1, len(s)*p/100)]
}

func perSecond(r rate) string {
	if r.total == 0 {
		return "-"
	}
	s := strconv.FormatFloat(r.perSecond(), 'f', 1, 64)
	if r.bound < r.total {
		s += "*"
	}
	return s
}

// pct formats a percentile of durations, "-" when there are none.
func pct(d []time.Duration, p int) string {
	if len(d) == 0 {
		return "-"
	}
	return seconds(percentile(d, p))
}

func seconds(d time.Duration) string {
	return strconv.FormatFloat(d.Seconds(), 'f', 3, 64) + "s"
}

// printProcesses is what each process of each mode cost over the mode: its CPU seconds over all
// its runs (a scheduler runs once per phase) and the most resident memory one run reached.
func printProcesses(out io.Writer, results []result) {
	fmt.Fprintln(out, "\nEach mode's own processes over the whole mode, every run from its readiness to its stop (a scheduler runs once per phase):")
	tw := tabwriter.NewWriter(out, 0, 0, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintln(tw, "mode\tprocess\tCPU s\tpeak MB\t")
	for _, r := range results {
		for _, p := range r.procs {
			fmt.Fprintf(tw, "%s\t%s\t%.1f\t%.0f\t\n", r.mode.key, p.name, p.cpu, p.peakMB)
		}
	}
	_ = tw.Flush()
}

func cpuTotal(procs []usage) string {
	if len(procs) == 0 {
		return "-"
	}
	return strconv.FormatFloat(cpuSeconds(procs), 'f', 1, 64)
}

func cpuSeconds(procs []usage) float64 {
	total := 0.0
	for _, p := range procs {
		total += p.cpu
	}
	return total
}

func peakTotal(procs []usage) string {
	if len(procs) == 0 {
		return "-"
	}
	return strconv.FormatFloat(peakMB(procs), 'f', 0, 64)
}

// peakMB adds each process's highest resident memory.
func peakMB(procs []usage) float64 {
	total := 0.0
	for _, p := range procs {
		total += max(0, p.peakMB)
	}
	return total
}

func falseBinds(n *int) string {
	if n == nil {
		return "-"
	}
	return strconv.Itoa(*n)
}
