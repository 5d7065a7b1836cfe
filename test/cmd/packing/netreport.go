package main

import (
	"cmp"
	"fmt"
	"os"
	"slices"
	"text/tabwriter"
)

// gangNet is what a gang could do on the fabric, whatever the policy: the same gangs are then
// counted for every policy.
type gangNet struct {
	// multiNode: >= 2 members and no idle node holds them all (GPUs, cpu and memory in all), so
	// its members talk over the network under any policy.
	multiNode bool
	// rackFit: multi-node, and its members all fit at once on the idle nodes of some rack.
	rackFit bool
	// gpuFit: multi-node, and its GPU total is at most the largest rack's GPUs (a weaker test:
	// it ignores how the GPUs are split between nodes).
	gpuFit bool
}

func classifyGangs(gangs []gangSpec, nodes []traceNode, f *netFabric) map[*gangSpec]gangNet {
	largest := 0
	for _, r := range f.racks {
		largest = max(largest, rackGPUs(r))
	}
	out := make(map[*gangSpec]gangNet, len(gangs))
	for i := range gangs {
		g := &gangs[i]
		if len(g.pods) < 2 || oneNodeHolds(g, nodes) {
			continue
		}
		k := gangNet{multiNode: true, gpuFit: g.gpus() <= largest}
		for _, r := range f.racks {
			if k.rackFit = fitsOn(g, r.nodes); k.rackFit {
				break
			}
		}
		out[g] = k
	}
	return out
}

func oneNodeHolds(g *gangSpec, nodes []traceNode) bool {
	cpu, mem := gangTotals(g)
	for _, n := range nodes {
		if n.gpus >= g.gpus() && n.cpuMilli >= cpu && n.memMiB >= mem {
			return true
		}
	}
	return false
}

// fitsOn reports whether every member of g fits at once on the idle nodes: members by cpu, then
// memory, largest first, each on the first node with room (first-fit decreasing). A gang's
// members ask the same GPUs, so on GPUs alone this is exact; with cpu and memory a cleverer
// packing could find a fit it misses, and such a gang would not count as rack-fit.
func fitsOn(g *gangSpec, nodes []traceNode) bool {
	members := slices.Clone(g.pods)
	slices.SortFunc(members, func(a, b tracePod) int {
		return cmp.Or(cmp.Compare(b.cpuMilli, a.cpuMilli), cmp.Compare(b.memMiB, a.memMiB))
	})
	free := make([]traceNode, len(nodes))
	copy(free, nodes)
	for _, p := range members {
		i := slices.IndexFunc(free, func(n traceNode) bool {
			return n.gpus >= p.numGPU && n.cpuMilli >= p.cpuMilli && n.memMiB >= p.memMiB
		})
		if i < 0 {
			return false
		}
		free[i].gpus -= p.numGPU
		free[i].cpuMilli -= p.cpuMilli
		free[i].memMiB -= p.memMiB
	}
	return true
}

// netStats are one policy's network metrics over the multi-node gangs it placed.
type netStats struct {
	gangs            int // multi-node gangs placed
	oneRack          int
	oneBlock         int
	racks            int // racks spanned, summed over those gangs
	rackFit          int // of them, rack-fit
	rackFitInOne     int // rack-fit and placed in one rack
	allocated, total int
}

func measureNetwork(c *cluster, f *netFabric, kind map[*gangSpec]gangNet) netStats {
	racks := map[*gangSpec]map[int]bool{}
	for _, pl := range c.placed {
		if !kind[pl.gang].multiNode {
			continue
		}
		if racks[pl.gang] == nil {
			racks[pl.gang] = map[int]bool{}
		}
		racks[pl.gang][f.rackOf[pl.node.name]] = true
	}
	var s netStats
	for g, rs := range racks {
		blocks := map[string]bool{}
		for r := range rs {
			blocks[f.racks[r].block] = true
		}
		s.gangs++
		s.racks += len(rs)
		s.oneRack += b2i(len(rs) == 1)
		s.oneBlock += b2i(len(blocks) == 1)
		if kind[g].rackFit {
			s.rackFit++
			s.rackFitInOne += b2i(len(rs) == 1)
		}
	}
	for _, n := range c.nodes {
		s.total += n.gpus
		s.allocated += n.gpus - n.freeGPUs
	}
	return s
}

func b2i(b bool) int {
	if b {
		return 1
	}
	return 0
}

// netOrder is the network table's order: the policy under test first, then what it is measured
// against.
var netOrder = []string{"lockstep+tiers", "lockstep", "best-fit", "spread"}

func reportNetwork(gangs []gangSpec, runs []*policyRun, nodes []traceNode, f *netFabric) {
	kind := classifyGangs(gangs, nodes, f)
	byName := map[string]*policyRun{}
	for _, r := range runs {
		byName[r.name] = r
	}
	st := map[string]netStats{}
	fmt.Println("network: racks of 8 nodes, blocks of 4 racks, then the cluster (see the network line at the top)")
	w := tabwriter.NewWriter(os.Stdout, 0, 0, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintln(w, "policy\tgangs placed\tmulti-node gangs placed\tin one rack\tin one block\tracks per gang (mean)\track-fit gangs in one rack\tallocation ratio\t")
	for _, name := range netOrder {
		r := byName[name]
		if r == nil {
			continue
		}
		s := measureNetwork(r.c, f, kind)
		st[name] = s
		fmt.Fprintf(w, "%s\t%d/%d\t%d\t%d/%d = %s\t%d/%d = %s\t%.2f\t%d/%d = %s\t%.4f\t\n",
			name, r.gangs, len(gangs), s.gangs, s.oneRack, s.gangs, pct(s.oneRack, s.gangs), s.oneBlock, s.gangs, pct(s.oneBlock, s.gangs),
			ratio(s.racks, s.gangs), s.rackFitInOne, s.rackFit, pct(s.rackFitInOne, s.rackFit), ratio(s.allocated, s.total))
	}
	w.Flush()
	if r := byName["lockstep+tiers"]; r != nil {
		fmt.Println(stopLine(r))
		explainStop(r, nodes)
	}
	explainNetwork(gangs, kind)
	tiered, plain := st["lockstep+tiers"], st["lockstep"]
	fmt.Printf("  target: lockstep+tiers places > 90%% of the rack-fit gangs it placed in one rack: %d/%d = %s: %s\n",
		tiered.rackFitInOne, tiered.rackFit, pct(tiered.rackFitInOne, tiered.rackFit), passMiss(10*tiered.rackFitInOne > 9*tiered.rackFit))
	fmt.Printf("  target: lockstep+tiers allocation ratio >= lockstep's without tiers: %.4f vs %.4f: %s\n",
		ratio(tiered.allocated, tiered.total), ratio(plain.allocated, plain.total), passMiss(tiered.allocated*plain.total >= plain.allocated*tiered.total))
}

// explainNetwork defines the columns, with the list's counts of the gangs they are about.
func explainNetwork(gangs []gangSpec, kind map[*gangSpec]gangNet) {
	multi, rackFit, gpuFit := 0, 0, 0
	for _, k := range kind {
		multi += b2i(k.multiNode)
		rackFit += b2i(k.rackFit)
		gpuFit += b2i(k.gpuFit)
	}
	var multiGangs []gangSpec
	for i := range gangs {
		if kind[&gangs[i]].multiNode {
			multiGangs = append(multiGangs, gangs[i])
		}
	}
	fmt.Printf("  multi-node gang: >= 2 members that no idle node holds whole (GPUs, cpu, memory in all): %d of the list's %d gangs; "+
		"by size: %s; by GPUs per member: %s\n", multi, len(gangs),
		countGangs(multiGangs, func(g gangSpec) int { return len(g.pods) }), countGangs(multiGangs, func(g gangSpec) int { return g.numGPU }))
	fmt.Printf("  rack-fit: a multi-node gang whose members all fit at once on the idle nodes of one rack (GPUs, cpu, memory per node; "+
		"first-fit decreasing): %d of the %d; by GPU total alone (<= the largest rack's GPUs): %d\n", rackFit, multi, gpuFit)
	fmt.Println("  in one rack / block: multi-node gangs placed with all members in one rack / one block; racks per gang: racks its members span;")
	fmt.Println("    each policy counts the gangs it placed before its replay stopped")
	fmt.Println("  allocation ratio: GPUs allocated / GPUs, when the policy's replay stopped, as in the table above")
}

func passMiss(ok bool) string {
	if ok {
		return "PASS"
	}
	return "MISS"
}
