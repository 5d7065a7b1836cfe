package placement

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

// Member is one pod to place.
type Member struct {
	Name     string // namespace/name, for reasons
	Requests Resources
	// Allowed restricts the member to the nodes the scheduler offered for it; nil means any node.
	Allowed map[string]bool
}

// Input is a snapshot of what may be used.
type Input struct {
	Members []Member
	// Free is what each schedulable node has left after bound pods and other gangs' reservations.
	Free map[string]Resources
	// GangNodes are nodes already holding members of this gang; packing prefers them.
	GangNodes map[string]bool
	// NodeScore breaks ties between otherwise equal nodes (the GPU-topology scorer); may be nil.
	NodeScore func(node string, req Resources) int
	// Prefer breaks the ties left after every other rule, higher first, before node names (the
	// network tiers' fuller racks first); may be nil.
	Prefer func(node string) int
	// GPUWords name the members' GPUs in reasons when they are not nvidia.com/gpu: "devices of
	// class gpu.nvidia.com" for GPUs the members' ResourceClaims ask.
	GPUWords string
}

// Need is what the members request in all.
func (in Input) Need() Resources {
	var need Resources
	for _, m := range in.Members {
		need = need.Add(m.Requests)
	}
	return need
}

// Plan places Members[i] on Nodes[i]. When OK is false, Failed is the index of the first member
// that found no node.
type Plan struct {
	Nodes  []string
	OK     bool
	Failed int
}

// Place puts the most constrained members first (those the scheduler restricted), then the
// largest, each on the best node by rankNode. It is greedy: it can miss a placement an exhaustive
// search would find, but it never claims a placement that does not exist.
func Place(in Input) Plan {
	order := make([]int, len(in.Members))
	for i := range order {
		order[i] = i
	}
	sort.SliceStable(order, func(a, b int) bool {
		ma, mb := in.Members[order[a]], in.Members[order[b]]
		if (ma.Allowed != nil) != (mb.Allowed != nil) {
			return ma.Allowed != nil
		}
		return larger(ma.Requests, mb.Requests)
	})

	free := make(map[string]Resources, len(in.Free))
	for n, r := range in.Free {
		free[n] = r
	}
	used := map[string]bool{}
	for n := range in.GangNodes {
		used[n] = true
	}
	remaining := in.Need()

	res := Plan{Nodes: make([]string, len(in.Members)), OK: true}
	for _, idx := range order {
		m := in.Members[idx]
		best := ""
		var bestRank nodeRank
		for node, f := range free {
			if m.Allowed != nil && !m.Allowed[node] {
				continue
			}
			if ok, _ := m.Requests.FitsIn(f); !ok {
				continue
			}
			r := rankNode(node, f, m.Requests, remaining, used, in.NodeScore)
			if in.Prefer != nil {
				r.prefer = in.Prefer(node)
			}
			if best == "" || r.better(bestRank) {
				best, bestRank = node, r
			}
		}
		if best == "" {
			return Plan{OK: false, Failed: idx}
		}
		res.Nodes[idx] = best
		free[best] = free[best].Sub(m.Requests)
		used[best] = true
		remaining = remaining.Sub(m.Requests)
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
	// prefer is Input.Prefer's say.
	prefer int
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
	if r.prefer != o.prefer {
		return r.prefer > o.prefer
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

// Explain says, for a human, why the members do not fit: either the cluster does not have
// enough of a resource in total, or it does but not on any one node for some member. heldByOthers
// names capacity other gangs hold in reservations, since that is the usual reason a gang that fit
// yesterday waits today.
func Explain(gang string, in Input, failed int, heldByOthers map[string]Resources) string {
	need := in.Need()
	total := Resources{}
	for _, f := range in.Free {
		total = total.Add(nonNegative(f))
	}
	n := len(in.Members)
	for _, name := range []corev1.ResourceName{wellknown.ResourceGPU, corev1.ResourceCPU, corev1.ResourceMemory, corev1.ResourcePods} {
		if need.Get(name) > total.Get(name) {
			return fmt.Sprintf("gang %s: %d %s need %s, %s free%s", gang, n, plural(n, "member", "members"),
				in.quantity(name, need.Get(name)), Amount(name, total.Get(name)), heldNote(name, heldByOthers))
		}
	}
	m := in.Members[failed]
	short := shortestResource(in, m)
	largest, largestOn := largestFree(in, m, short)
	where := "no node has any free"
	switch {
	case largestOn != "" && largest >= m.Requests.Get(short):
		// A node had room before the plan gave it to the gang's other members.
		where = fmt.Sprintf("the nodes with room (up to %s free, on %s) went to the gang's other members", Amount(short, largest), largestOn)
	case largestOn != "" && largest > 0:
		where = fmt.Sprintf("at most %s free on one node (%s)", Amount(short, largest), largestOn)
	}
	return fmt.Sprintf("gang %s: %d %s fit in total, but member %s needs %s on one node after placing the others: %s%s",
		gang, n, plural(n, "member", "members"), m.Name, in.quantity(short, m.Requests.Get(short)), where, heldNote(short, heldByOthers))
}

// quantity is FormatQuantity, GPUs in the members' own words.
func (in Input) quantity(name corev1.ResourceName, v int64) string {
	if name == wellknown.ResourceGPU && in.GPUWords != "" {
		return Amount(name, v) + " " + in.GPUWords
	}
	return FormatQuantity(name, v)
}

// shortestResource is the resource no single node has enough of for m; when each exists somewhere
// but never all on one node, GPUs are the most useful to name.
func shortestResource(in Input, m Member) corev1.ResourceName {
	for _, name := range []corev1.ResourceName{wellknown.ResourceGPU, corev1.ResourceCPU, corev1.ResourceMemory, corev1.ResourcePods} {
		if v := m.Requests.Get(name); v > 0 {
			if largest, _ := largestFree(in, m, name); largest < v {
				return name
			}
		}
	}
	if m.Requests.GPU == 0 {
		return corev1.ResourceCPU
	}
	return wellknown.ResourceGPU
}

// largestFree is the most of one resource free on a node m may use, and that node (the first by
// name on ties).
func largestFree(in Input, m Member, name corev1.ResourceName) (int64, string) {
	largest, on := int64(0), ""
	for node, f := range in.Free {
		if m.Allowed != nil && !m.Allowed[node] {
			continue
		}
		if v := f.Get(name); v > largest || (v == largest && v > 0 && node < on) {
			largest, on = v, node
		}
	}
	return largest, on
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
	note := fmt.Sprintf("; gang %s holds %s in reservations", hs[0].gang, Amount(name, hs[0].v))
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
