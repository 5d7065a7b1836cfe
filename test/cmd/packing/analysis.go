package main

import (
	"fmt"
	"sort"
	"strings"
)

// explainStop says why a policy's replay stopped: which nodes could hold one member of the
// stopping gang when idle, why they cannot now, and what occupies them.
func explainStop(r *policyRun, nodes []traceNode) {
	g := r.stopGang
	if g == nil {
		return
	}
	// The most demanding member decides where the gang can go.
	p := g.pods[0]
	for _, q := range g.pods[1:] {
		if q.cpuMilli > p.cpuMilli || q.memMiB > p.memMiB {
			p = q
		}
	}
	idleFits := func(n traceNode) bool {
		return n.gpus >= p.numGPU && n.cpuMilli >= p.cpuMilli && n.memMiB >= p.memMiB
	}
	var eligible []*nodeState
	models := map[string]int{}
	for _, n := range r.c.nodes {
		if idleFits(n.traceNode) {
			eligible = append(eligible, n)
			models[n.model]++
		}
	}
	shortGPU, shortOther := 0, 0
	for _, n := range eligible {
		if n.freeGPUs < p.numGPU {
			shortGPU++
		} else if !n.fits(p) {
			shortOther++
		}
	}
	fmt.Printf("  %s stop: a member needs %d GPU, %d cpu, %d GiB memory; %d nodes hold one when idle (%s): %d now have fewer than %d GPUs free, "+
		"%d have the GPUs but not the cpu/memory\n",
		r.name, p.numGPU, p.cpuMilli/1000, p.memMiB>>10, len(eligible), modelCounts(models), shortGPU, p.numGPU, shortOther)

	// What occupies those nodes, by the shape of what is there.
	onNode := map[*nodeState][]placement{}
	for _, pl := range r.c.placed {
		onNode[pl.node] = append(onNode[pl.node], pl)
	}
	shapes := map[string]int{}
	wholeGangs, wholeGangNodes := map[string]int{}, 0
	var examples []string
	for _, n := range eligible {
		shapes[occupancy(onNode[n])]++
		if gs, ok := wholeGangOnly(onNode[n]); ok {
			wholeGangNodes++
			wholeGangs[fitsWholeOn(gs, nodes)]++
			if len(examples) < 4 {
				cpu, mem := gangTotals(gs)
				examples = append(examples, fmt.Sprintf("%s (%s..%s, %d cpu, %d GiB in all) on %s", gs.name, gs.pods[0].name, gs.pods[len(gs.pods)-1].name, cpu/1000, mem>>10, n.name))
			}
		}
	}
	type kv struct {
		k string
		v int
	}
	var list []kv
	for k, v := range shapes {
		list = append(list, kv{k, v})
	}
	sort.Slice(list, func(i, j int) bool {
		if list[i].v != list[j].v {
			return list[i].v > list[j].v
		}
		return list[i].k < list[j].k
	})
	for i, e := range list {
		if i == 5 {
			fmt.Printf("      ... %d more shapes\n", len(list)-5)
			break
		}
		fmt.Printf("      %3d of them hold: %s\n", e.v, e.k)
	}
	if wholeGangNodes > 0 {
		var parts []string
		for k, v := range wholeGangs {
			parts = append(parts, fmt.Sprintf("%d hold %s", v, k))
		}
		sort.Strings(parts)
		fmt.Printf("      %d of them hold exactly one multi-member gang, all of its members; %s\n",
			wholeGangNodes, strings.Join(parts, "; "))
		fmt.Printf("      e.g. %s\n", strings.Join(examples, "; "))
		if r.name == "lockstep" {
			fmt.Println("      lockstep's planner ranks a node that can hold all of a gang's remaining members (cpu and memory included) above the")
			fmt.Println("      topology score and the fit (gang/plan.go, rankNode and nodeRank.better, holdsRest), so these gangs went whole to the")
			fmt.Println("      only idle nodes big enough, the ones this member needed; best-fit put their pods on the fullest nodes instead")
		}
	}
}

func modelCounts(models map[string]int) string {
	var parts []string
	for m, c := range models {
		parts = append(parts, fmt.Sprintf("%s: %d", m, c))
	}
	sort.Strings(parts)
	return strings.Join(parts, ", ")
}

// occupancy describes a node's pods by gang: "gang of 8 x 1 GPU, all 8 here + pod of 8 GPU".
func occupancy(pls []placement) string {
	if len(pls) == 0 {
		return "nothing (idle)"
	}
	here := map[*gangSpec]int{}
	var order []*gangSpec
	for _, pl := range pls {
		if here[pl.gang] == 0 {
			order = append(order, pl.gang)
		}
		here[pl.gang]++
	}
	var parts []string
	for _, g := range order {
		switch {
		case len(g.pods) == 1:
			parts = append(parts, fmt.Sprintf("a single %d-GPU pod", g.numGPU))
		case here[g] == len(g.pods):
			parts = append(parts, fmt.Sprintf("a whole gang of %d x %d GPU", len(g.pods), g.numGPU))
		default:
			parts = append(parts, fmt.Sprintf("%d of a gang of %d x %d GPU", here[g], len(g.pods), g.numGPU))
		}
	}
	sort.Strings(parts)
	// Collapse repeats: "a single 1-GPU pod" x 5.
	var out []string
	for i := 0; i < len(parts); {
		j := i
		for j < len(parts) && parts[j] == parts[i] {
			j++
		}
		if j-i > 1 {
			out = append(out, fmt.Sprintf("%d x (%s)", j-i, parts[i]))
		} else {
			out = append(out, parts[i])
		}
		i = j
	}
	return strings.Join(out, " + ")
}

// wholeGangOnly reports whether a node holds exactly one gang of >= 2 members, all of them.
func wholeGangOnly(pls []placement) (*gangSpec, bool) {
	if len(pls) < 2 {
		return nil, false
	}
	g := pls[0].gang
	for _, pl := range pls {
		if pl.gang != g {
			return nil, false
		}
	}
	return g, len(pls) == len(g.pods)
}

// fitsWholeOn names the node shapes (model x GPUs) on which all of g fits at once when idle.
func gangTotals(g *gangSpec) (cpu, mem int64) {
	for _, p := range g.pods {
		cpu += p.cpuMilli
		mem += p.memMiB
	}
	return cpu, mem
}

func fitsWholeOn(g *gangSpec, nodes []traceNode) string {
	cpu, mem := gangTotals(g)
	models := map[string]int{}
	for _, n := range nodes {
		if n.gpus >= g.gpus() && n.cpuMilli >= cpu && n.memMiB >= mem {
			models[fmt.Sprintf("%s x%d GPU", n.model, n.gpus)]++
		}
	}
	if len(models) == 0 {
		return "nowhere"
	}
	var names []string
	for m := range models {
		names = append(names, m)
	}
	sort.Strings(names)
	return fmt.Sprintf("a gang of %d x %d GPU whose total request fits on one idle node of: %s", len(g.pods), g.numGPU, strings.Join(names, ", "))
}
