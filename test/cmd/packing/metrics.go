package main

import (
	"fmt"
	"os"
	"sort"
	"strings"
	"text/tabwriter"

	"github.com/lockstep-sched/lockstep/gpu"
)

func describeNodes(nodes []traceNode) string {
	type key struct {
		model string
		gpus  int
	}
	count := map[key]int{}
	total := 0
	for _, n := range nodes {
		count[key{n.model, n.gpus}]++
		total += n.gpus
	}
	keys := make([]key, 0, len(count))
	for k := range count {
		keys = append(keys, k)
	}
	sort.Slice(keys, func(i, j int) bool {
		if keys[i].model != keys[j].model {
			return keys[i].model < keys[j].model
		}
		return keys[i].gpus < keys[j].gpus
	})
	var parts []string
	for _, k := range keys {
		parts = append(parts, fmt.Sprintf("%s x%d GPU: %d", k.model, k.gpus, count[k]))
	}
	return fmt.Sprintf("%d nodes, %d GPUs (%s)", len(nodes), total, strings.Join(parts, ", "))
}

func countBy[T any](xs []T, key func(T) int) string {
	count := map[int]int{}
	for _, x := range xs {
		count[key(x)]++
	}
	keys := make([]int, 0, len(count))
	for k := range count {
		keys = append(keys, k)
	}
	sort.Ints(keys)
	var parts []string
	for _, k := range keys {
		parts = append(parts, fmt.Sprintf("%d: %d", k, count[k]))
	}
	return strings.Join(parts, ", ")
}

func countGangs(gangs []gangSpec, key func(gangSpec) int) string { return countBy(gangs, key) }

func countGangsIf(gangs []gangSpec, keep func(gangSpec) bool, key func(gangSpec) int) string {
	var kept []gangSpec
	for _, g := range gangs {
		if keep(g) {
			kept = append(kept, g)
		}
	}
	return countBy(kept, key)
}

func sumGPUs(pods []tracePod) int {
	n := 0
	for _, p := range pods {
		n += p.numGPU
	}
	return n
}

func medianGPUs(pods []tracePod) int {
	ks := make([]int, len(pods))
	for i, p := range pods {
		ks[i] = p.numGPU
	}
	sort.Ints(ks)
	if len(ks) == 0 {
		return 0
	}
	return ks[(len(ks)-1)/2] // the lower median: a whole GPU count
}

// capable caches nvlinkCapable per topology and k.
var capable = map[struct {
	t *gpu.Topology
	k int
}]bool{}

func nvlinkCapableCached(t *gpu.Topology, k int) bool {
	key := struct {
		t *gpu.Topology
		k int
	}{t, k}
	v, ok := capable[key]
	if !ok {
		v = nvlinkCapable(t, k)
		capable[key] = v
	}
	return v
}

// nvlinkMiss is a lockstep placement of a k >= 2 pod on NVLink-capable hardware whose GPUs are
// not all NVLink-connected, with what the cluster looked like just before.
type nvlinkMiss struct {
	pod       tracePod
	gang      string
	gangSize  int
	member    int // 0-based position in the gang
	node      string
	model     string
	ids       []int
	freeThen  []int // the node's free GPUs before this member (after its gang mates placed so far)
	nodeCould bool  // an all-NVLink k-set was free on the node itself
	mates     int   // gang mates already on the node
	elsewhere int   // other nodes where the pod fit with an all-NVLink k-set free
}

// checkNVLink is called for each lockstep member before it is recorded in c.
func checkNVLink(c *cluster, g *gangSpec, member int, n *nodeState, ids []int) (nvlinkMiss, bool) {
	p := g.pods[member]
	k := p.numGPU
	if k < 2 || !nvlinkCapableCached(n.topo, k) || allNVLink(n.topo, ids) {
		return nvlinkMiss{}, false
	}
	miss := nvlinkMiss{pod: p, node: n.name, model: n.model, ids: ids, freeThen: n.freeIndices()}
	set, q, ok := n.topo.BestSet(miss.freeThen, k)
	miss.nodeCould = ok && q.WeakestLink.IsNVLink() && allNVLink(n.topo, set)
	miss.gang, miss.gangSize, miss.member = g.name, len(g.pods), member
	for _, pl := range c.placed[len(c.placed)-member:] {
		if pl.node == n {
			miss.mates++
		}
	}
	for _, o := range c.nodes {
		if o == n || !o.fits(p) || !nvlinkCapableCached(o.topo, k) {
			continue
		}
		if set, q, ok := o.topo.BestSet(o.freeIndices(), k); ok && q.WeakestLink.IsNVLink() && allNVLink(o.topo, set) {
			miss.elsewhere++
		}
	}
	return miss, true
}

// stats are one policy's metrics at its stop point.
type stats struct {
	allocated, total   int
	pods               int
	strandedMedian     int
	freeTotal          int
	strandedStop       int // free GPUs on nodes with fewer free than the stopping gang's per-member request
	nvGood, nvEligible int
	fewGood, fewTotal  int
}

func measure(r *policyRun, median int) stats {
	var s stats
	for _, n := range r.c.nodes {
		s.total += n.gpus
		s.allocated += n.gpus - n.freeGPUs
		s.freeTotal += n.freeGPUs
		if n.freeGPUs < median {
			s.strandedMedian += n.freeGPUs
		}
		if r.stopGang != nil && n.freeGPUs < r.stopGang.numGPU {
			s.strandedStop += n.freeGPUs
		}
	}
	s.pods = len(r.c.placed)
	gangNodes := map[*gangSpec]map[*nodeState]bool{}
	for _, pl := range r.c.placed {
		k := pl.pod.numGPU
		if k >= 2 && nvlinkCapableCached(pl.node.topo, k) {
			s.nvEligible++
			if allNVLink(pl.node.topo, pl.gpuIDs) {
				s.nvGood++
			}
		}
		if len(pl.gang.pods) >= 2 {
			if gangNodes[pl.gang] == nil {
				gangNodes[pl.gang] = map[*nodeState]bool{}
			}
			gangNodes[pl.gang][pl.node] = true
		}
	}
	for g, ns := range gangNodes {
		s.fewTotal++
		if len(ns) == (g.gpus()+7)/8 {
			s.fewGood++
		}
	}
	return s
}

func pct(a, b int) string {
	if b == 0 {
		return "n/a"
	}
	return fmt.Sprintf("%.1f%%", 100*float64(a)/float64(b))
}

func ratio(a, b int) float64 {
	if b == 0 {
		return 0
	}
	return float64(a) / float64(b)
}

// stopLine says where a policy's replay stopped and why.
func stopLine(r *policyRun) string {
	g := r.stopGang
	if g == nil {
		return fmt.Sprintf("  %-8s stopped: end of the list, every gang placed", r.name)
	}
	return fmt.Sprintf("  %-8s stopped at %s (%d x %d GPU, pods %s..%s): %s", r.name, g.name, len(g.pods), g.numGPU,
		g.pods[0].name, g.pods[len(g.pods)-1].name, r.stopWhy)
}

func report(pods []tracePod, gangs []gangSpec, runs []*policyRun, showMisses int, nodes []traceNode) {
	median := medianGPUs(pods)
	st := map[string]stats{}
	w := tabwriter.NewWriter(os.Stdout, 0, 0, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintln(w, "policy\tgangs placed\tpods placed\tGPUs allocated\tallocation ratio\t"+
		fmt.Sprintf("stranded (free < %d)\t", median)+"stranded for stop request\tNVLink where possible\tgangs on fewest nodes\ttime\t")
	for _, r := range runs {
		s := measure(r, median)
		st[r.name] = s
		stop := "-"
		if r.stopGang != nil {
			stop = fmt.Sprintf("%d (%s of free)", s.strandedStop, pct(s.strandedStop, s.freeTotal))
		}
		fmt.Fprintf(w, "%s\t%d/%d\t%d/%d\t%d/%d\t%.4f\t%d (%s of free)\t%s\t%d/%d = %s\t%d/%d = %s\t%s\t\n",
			r.name, r.gangs, len(gangs), s.pods, len(pods), s.allocated, s.total, ratio(s.allocated, s.total),
			s.strandedMedian, pct(s.strandedMedian, s.freeTotal), stop,
			s.nvGood, s.nvEligible, pct(s.nvGood, s.nvEligible), s.fewGood, s.fewTotal, pct(s.fewGood, s.fewTotal),
			r.elapsed.Round(1e6))
	}
	w.Flush()
	for _, r := range runs {
		fmt.Println(stopLine(r))
		explainStop(r, nodes)
	}
	fmt.Printf("  stranded (free < %d): free GPUs on nodes with fewer free than the median num_gpu (%d) of the replayed pods;\n", median, median)
	if median <= 1 {
		fmt.Println("    (with a median of 1 only nodes with no free GPU count, so this is 0 by construction on this list)")
	}
	fmt.Println("    stranded for stop request: free GPUs on nodes with fewer free than one member of the gang that stopped the replay")
	fmt.Println("  NVLink where possible: pods with >= 2 GPUs on nodes whose idle topology has an all-NVLink set of that size,")
	fmt.Println("    share whose GPUs are pairwise NVLink-connected; gangs on fewest nodes: gangs of >= 2 members on ceil(GPUs/8) nodes")

	ls, bf := st["lockstep"], st["best-fit"]
	allocOK := ls.allocated*bf.total >= bf.allocated*ls.total
	fmt.Printf("  target: lockstep allocation ratio >= best-fit's: %.4f vs %.4f: %s\n", ratio(ls.allocated, ls.total), ratio(bf.allocated, bf.total), passMiss(allocOK))
	fmt.Printf("  target: lockstep 100%% NVLink where possible: %d/%d = %s: %s\n", ls.nvGood, ls.nvEligible, pct(ls.nvGood, ls.nvEligible), passMiss(ls.nvGood == ls.nvEligible))

	for _, r := range runs {
		if r.lockstep == nil {
			continue
		}
		if r.lockstep.noIDs > 0 {
			fmt.Printf("  note: lockstep bound %d pods without choosing GPU indices (modelled as the lowest free ones)\n", r.lockstep.noIDs)
		}
		if len(r.misses) == 0 {
			continue
		}
		onNode, forcedByMates, elsewhere, nowhere := 0, 0, 0, 0
		for _, m := range r.misses {
			switch {
			case m.nodeCould:
				onNode++
			case m.mates > 0:
				forcedByMates++
			case m.elsewhere > 0:
				elsewhere++
			default:
				nowhere++
			}
		}
		fmt.Printf("  lockstep NVLink misses: %d: node had an all-NVLink set free but another was chosen: %d; node chosen beside gang mates "+
			"and had none left: %d; chosen node had none while another node that fit did: %d; no node that fit had one: %d\n",
			len(r.misses), onNode, forcedByMates, elsewhere, nowhere)
		for i, m := range r.misses {
			if i == showMisses {
				fmt.Printf("    ... %d more\n", len(r.misses)-showMisses)
				break
			}
			fmt.Printf("    %s (%d GPU, member %d of %s, %d members) on %s (%s): GPUs %v, free before %v; gang mates already there: %d; "+
				"NVLink set free on that node: %v; other fitting nodes with one: %d\n",
				m.pod.name, m.pod.numGPU, m.member+1, m.gang, m.gangSize, m.node, m.model, m.ids, m.freeThen, m.mates, m.nodeCould, m.elsewhere)
		}
	}
}
