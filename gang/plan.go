package gang

import (
	"fmt"
	"sort"

	corev1 "k8s.io/api/core/v1"

	"github.com/lockstep-sched/lockstep/wellknown"
)

// The planner decides whether a set of gang members can all be placed at once, member by member on
// concrete nodes. Summing free capacity over the cluster is not enough: four nodes with one free
// GPU each hold no 2-GPU member, and plans built on sums are what make other gang schedulers loop
// between admitting and rejecting a gang forever.

// planMember is one member to place.
type planMember struct {
	pod      *podInfo // nil for a slot planned for a member lockstep has not seen at filter yet
	name     string   // namespace/name, for reasons
	requests Resources
	// allowed restricts the member to the nodes the scheduler offered for it; nil means any node.
	allowed map[string]bool
}

// planInput is a snapshot of what may be used.
type planInput struct {
	members []planMember
	// free is what each schedulable node has left after bound pods and other gangs' reservations.
	free map[string]Resources
	// gangNodes are nodes already holding members of this gang; packing prefers them.
	gangNodes map[string]bool
	// nodeScore breaks ties between otherwise equal nodes (the GPU-topology scorer); may be nil.
	nodeScore func(node string, req Resources) int
}

// planResult places members[i] on nodes[i]. When ok is false, failed is the index of the first
// member that found no node.
type planResult struct {
	nodes  []string
	ok     bool
	failed int
}

// makePlan places the most constrained members first (those the scheduler restricted), then the
// largest, each on the best node by rankNode. It is greedy: it can miss a placement an exhaustive
// search would find, but it never claims a placement that does not exist.
func makePlan(in planInput) planResult {
	order := make([]int, len(in.members))
	for i := range order {
		order[i] = i
	}
	sort.SliceStable(order, func(a, b int) bool {
		ma, mb := in.members[order[a]], in.members[order[b]]
		if (ma.allowed != nil) != (mb.allowed != nil) {
			return ma.allowed != nil
		}
		return larger(ma.requests, mb.requests)
	})

	free := make(map[string]Resources, len(in.free))
	for n, r := range in.free {
		free[n] = r
	}
	used := map[string]bool{}
	for n := range in.gangNodes {
		used[n] = true
	}
	remaining := Resources{}
	for _, m := range in.members {
		remaining = remaining.Add(m.requests)
	}

	res := planResult{nodes: make([]string, len(in.members)), ok: true}
	for _, idx := range order {
		m := in.members[idx]
		best := ""
		var bestRank nodeRank
		for node, f := range free {
			if m.allowed != nil && !m.allowed[node] {
				continue
			}
			if ok, _ := m.requests.FitsIn(f); !ok {
				continue
			}
			r := rankNode(node, f, m.requests, remaining, used, in.nodeScore)
			if best == "" || r.better(bestRank) {
				best, bestRank = node, r
			}
		}
		if best == "" {
			return planResult{ok: false, failed: idx}
		}
		res.nodes[idx] = best
		free[best] = free[best].Sub(m.requests)
		used[best] = true
		remaining = remaining.Sub(m.requests)
	}
	return res
}

// nodeRank orders candidate nodes for one member. Fields are compared in declaration order.
type nodeRank struct {
	name string
	// holdsGang: the node already holds members of this gang (bound or planned). Packing a gang on
	// few nodes keeps its traffic off the network.
	holdsGang bool
	// holdsRest: the GPUs of everything still to place fit here, so the gang can finish on this node.
	holdsRest bool
	// fit is larger for a better fit: when the rest fits, the tightest node (best fit, keeps big
	// nodes whole for big gangs); when it does not, the roomiest (fewest nodes overall).
	fitGPU, fitCPU int64
	// topology is the GPU-topology score of the node's best free set for the member.
	topology int
}

func rankNode(name string, free, req, remaining Resources, used map[string]bool, score func(string, Resources) int) nodeRank {
	r := nodeRank{name: name, holdsGang: used[name]}
	// GPUs only: counting cpu and memory too steered gangs of small pods onto the scarce nodes
	// big enough for their summed cpu, exactly the ones later 8-GPU pods needed (measured on the
	// openb trace with make bench-packing: 0.58 of GPUs allocated at the first failure, against
	// 0.70 with this rule).
	r.holdsRest = remaining.GPU <= free.GPU
	if r.holdsRest {
		r.fitGPU, r.fitCPU = -free.GPU, -free.MilliCPU
	} else {
		r.fitGPU, r.fitCPU = free.GPU, -free.MilliCPU
	}
	if score != nil && req.GPU > 0 {
		r.topology = score(name, req)
	}
	return r
}

func (r nodeRank) better(o nodeRank) bool {
	if r.holdsGang != o.holdsGang {
		return r.holdsGang
	}
	if r.holdsRest != o.holdsRest {
		return r.holdsRest
	}
	// The topology score already prefers the tighter fit among equally well linked GPU sets;
	// link quality outranks fit, so a member inside one NVLink island beats a tighter node
	// that would split it across islands.
	if r.topology != o.topology {
		return r.topology > o.topology
	}
	if r.fitGPU != o.fitGPU {
		return r.fitGPU > o.fitGPU
	}
	if r.fitCPU != o.fitCPU {
		return r.fitCPU > o.fitCPU
	}
	return r.name < o.name
}

func larger(a, b Resources) bool {
	if a.GPU != b.GPU {
		return a.GPU > b.GPU
	}
	if a.MilliCPU != b.MilliCPU {
		return a.MilliCPU > b.MilliCPU
	}
	return a.Memory > b.Memory
}

// explainNoFit says, for a human, why the members do not fit: either the cluster does not have
// enough of a resource in total, or it does but not on any one node for some member. heldByOthers
// names capacity other gangs hold in reservations, since that is the usual reason a gang that fit
// yesterday waits today.
func explainNoFit(gang string, in planInput, failed int, heldByOthers map[string]Resources) string {
	need := Resources{}
	for _, m := range in.members {
		need = need.Add(m.requests)
	}
	total := Resources{}
	for _, f := range in.free {
		total = total.Add(nonNegative(f))
	}
	n := len(in.members)
	for _, name := range []corev1.ResourceName{wellknown.ResourceGPU, corev1.ResourceCPU, corev1.ResourceMemory, corev1.ResourcePods} {
		if need.Get(name) > total.Get(name) {
			return fmt.Sprintf("gang %s: %d %s need %s, %s free%s", gang, n, plural(n, "member", "members"),
				FormatQuantity(name, need.Get(name)), quantityNumber(name, total.Get(name)), heldNote(name, heldByOthers))
		}
	}
	m := in.members[failed]
	largestFree := func(name corev1.ResourceName) (int64, string) {
		largest, on := int64(0), ""
		for node, f := range in.free {
			if m.allowed != nil && !m.allowed[node] {
				continue
			}
			if v := f.Get(name); v > largest || (v == largest && v > 0 && node < on) {
				largest, on = v, node
			}
		}
		return largest, on
	}
	// Name the resource no single node has enough of; when each exists somewhere but never all on
	// one node, GPUs are the most useful to name.
	short := corev1.ResourceName("")
	for _, name := range []corev1.ResourceName{wellknown.ResourceGPU, corev1.ResourceCPU, corev1.ResourceMemory, corev1.ResourcePods} {
		if v := m.requests.Get(name); v > 0 {
			if largest, _ := largestFree(name); largest < v {
				short = name
				break
			}
		}
	}
	if short == "" {
		short = wellknown.ResourceGPU
		if m.requests.GPU == 0 {
			short = corev1.ResourceCPU
		}
	}
	largest, largestOn := largestFree(short)
	where := "no node has any free"
	switch {
	case largestOn != "" && largest >= m.requests.Get(short):
		// A node had room before the plan gave it to the gang's other members.
		where = fmt.Sprintf("the nodes with room (up to %s free, on %s) went to the gang's other members", quantityNumber(short, largest), largestOn)
	case largestOn != "" && largest > 0:
		where = fmt.Sprintf("at most %s free on one node (%s)", quantityNumber(short, largest), largestOn)
	}
	return fmt.Sprintf("gang %s: %d %s fit in total, but member %s needs %s on one node after placing the others: %s%s",
		gang, n, plural(n, "member", "members"), m.name, FormatQuantity(short, m.requests.Get(short)), where, heldNote(short, heldByOthers))
}

func nonNegative(r Resources) Resources {
	clamp := func(v int64) int64 { return max(v, 0) }
	return Resources{clamp(r.MilliCPU), clamp(r.Memory), clamp(r.GPU), clamp(r.Pods)}
}

func heldNote(name corev1.ResourceName, held map[string]Resources) string {
	type holder struct {
		gang string
		v    int64
	}
	var hs []holder
	for g, r := range held {
		if v := r.Get(name); v > 0 {
			hs = append(hs, holder{g, v})
		}
	}
	if len(hs) == 0 {
		return ""
	}
	sort.Slice(hs, func(i, j int) bool {
		if hs[i].v != hs[j].v {
			return hs[i].v > hs[j].v
		}
		return hs[i].gang < hs[j].gang
	})
	note := fmt.Sprintf("; gang %s holds %s in reservations", hs[0].gang, quantityNumber(name, hs[0].v))
	if len(hs) > 1 {
		note += fmt.Sprintf(" (and %d more gangs)", len(hs)-1)
	}
	return note
}

func plural(n int, one, many string) string {
	if n == 1 {
		return one
	}
	return many
}
