package decide

import (
	"fmt"
	"slices"
	"sort"
	"strings"

	corev1 "k8s.io/api/core/v1"
	corev1helpers "k8s.io/component-helpers/scheduling/corev1"
	"k8s.io/component-helpers/scheduling/corev1/nodeaffinity"
	"k8s.io/klog/v2"

	"github.com/lockstep-sched/lockstep/fabric"
	"github.com/lockstep-sched/lockstep/gangspec"
	"github.com/lockstep-sched/lockstep/gpu"
	"github.com/lockstep-sched/lockstep/placement"
)

// Planning a gang's quorum: which nodes its members may use, what each node has left, and how the
// network tiers narrow the choice. Every plan for a quorum goes through placeQuorum, so that none
// (a reservation, a hold, a protected place in line, an eviction) counts on capacity the gang's
// rules would not let it use.

// planView is the planner's picture of the cluster for one gang: every schedulable node (of only,
// when given) with what it has left after bound pods and held, and the nodes already holding the
// gang's bound members.
func (s *Snapshot) planView(g *Gang, held map[string]placement.Resources, only map[string]bool) placement.Input {
	in := placement.Input{Free: make(map[string]placement.Resources, len(s.Nodes)), GangNodes: map[string]bool{}}
	for name, n := range s.Nodes {
		if n.Known && !n.Unschedulable && (only == nil || only[name]) {
			in.Free[name] = n.Free().Sub(held[name])
		}
	}
	for _, q := range g.Members {
		if q.Holds() {
			in.GangNodes[q.Node] = true
		}
	}
	if class := gpuClassOf(g); class != "" {
		in.GPUWords = "devices of class " + class
	}
	memo := &gpu.Memo{} // one plan scores every node per member; most share a state
	in.NodeScore = func(node string, req placement.Resources) int {
		return memo.Score(&s.Nodes[node].GPUs, req.GPU, held[node].GPU)
	}
	return in
}

// gpuClassOf is the DeviceClass every member asking GPUs asks them of, "" when one asks
// nvidia.com/gpu or they differ.
func gpuClassOf(g *Gang) string {
	class := ""
	for _, q := range g.Members {
		switch {
		case q.Requests.GPU == 0:
		case q.GPUClass == "" || (class != "" && q.GPUClass != class):
			return ""
		default:
			class = q.GPUClass
		}
	}
	return class
}

// planQuorum places members beside bound pods and the reservations the view respects, as if freed
// (per node) were given back by pods about to go; heldBy is what those reservations hold per gang,
// for the reason the gang waits.
func (s *Snapshot) planQuorum(g *Gang, members []placement.Member, v View, freed map[string]placement.Resources) (placement.Input, placement.Plan, map[string]placement.Resources) {
	held, heldBy := s.Reservations.Held(v)
	for node, r := range freed {
		held[node] = held[node].Sub(r)
	}
	in := s.planView(g, held, nil)
	in.Members = members
	return in, s.placeQuorum(g, in), heldBy
}

// shortfall says why a quorum plan on free capacity failed: the required tier no domain holds, or
// what the members lack.
func (s *Snapshot) shortfall(g *Gang, in placement.Input, plan placement.Plan, heldBy map[string]placement.Resources) string {
	if why := s.requiredTierWait(g, in); why != "" {
		return why
	}
	return placement.Explain(g.Key, in, plan.Failed, heldBy)
}

// bestFreeNode picks, among allowed nodes, where req fits beside bound pods, other gangs'
// reservations, the gang's own slots other than the one at skip (-1 for none) and what protect
// sets aside; the planner's packing rules choose.
func (s *Snapshot) bestFreeNode(req placement.Resources, g *Gang, allowed map[string]bool, skip int, protect map[string]placement.Resources) string {
	held, _ := s.Reservations.Held(EveryOther(g.Key))
	for node, r := range protect {
		held[node] = held[node].Add(r)
	}
	if res := s.Reservations.Live(g.Key); res != nil {
		for i := range res.Slots {
			if sl := &res.Slots[i]; i != skip && sl.HoldsCapacity() {
				held[sl.Node] = held[sl.Node].Add(sl.Requests)
			}
		}
	}
	in := s.planView(g, held, allowed)
	in.Members = []placement.Member{{Requests: req, Allowed: allowed}}
	plan := placement.Place(in)
	if !plan.OK {
		return ""
	}
	return plan.Nodes[0]
}

// --- members' own node rules -----------------------------------------------------------------

// A member's own node rules. lockstep plans a gang's quorum on nodes of its choosing, and
// kube-scheduler then checks each member against its own rules at filter. A plan that puts a
// member where its nodeSelector, required node affinity or a taint rules it out reserves (and
// holds, and evicts for) capacity the member can never take, and two such gangs block each other
// until their reservations time out. So plans keep to the nodes these rules allow. What else the
// scheduler checks (ports, volumes, inter-pod affinity) still rules out a reserved node only at
// filter, where the member's slot then moves (admitToReservation).

// NodeRules are one gang member's nodeSelector, required node affinity and tolerations.
type NodeRules struct {
	affinity    nodeaffinity.RequiredNodeAffinity
	tolerations []corev1.Toleration
}

// NodeRulesOf reads a member's node rules.
func NodeRulesOf(pod *corev1.Pod) *NodeRules {
	return &NodeRules{affinity: nodeaffinity.GetRequiredNodeAffinity(pod), tolerations: pod.Spec.Tolerations}
}

// allows reports whether the rules let the member run on the node.
func (r *NodeRules) allows(n *Node) bool {
	if ok, err := r.affinity.Match(n.Object); err != nil || !ok {
		return false
	}
	_, untolerated := corev1helpers.FindMatchingUntoleratedTaint(klog.Background(), n.HardTaints, r.tolerations, nil, false)
	return !untolerated
}

// allowedNodes are the nodes the member's rules allow and DRA's allocator did not refuse it, nil
// when that is every node: the planner then considers them all without a set to look in.
func (s *Snapshot) allowedNodes(p *Pod) map[string]bool {
	allowed := s.ruledNodes(p)
	if len(p.DevicesRefused) == 0 {
		return allowed
	}
	out := make(map[string]bool, len(s.Nodes))
	for name, n := range s.Nodes {
		if n.Known && (allowed == nil || allowed[name]) && p.DevicesRefused[name] == "" {
			out[name] = true
		}
	}
	return out
}

// ruledNodes are the nodes a member's node rules allow, nil for all.
func (s *Snapshot) ruledNodes(p *Pod) map[string]bool {
	if p.Rules == nil {
		return nil
	}
	var out map[string]bool
	denied := false
	for name, n := range s.Nodes {
		if !n.Known {
			continue
		}
		if !p.Rules.allows(n) {
			denied = true
			continue
		}
		if out == nil {
			out = make(map[string]bool, len(s.Nodes))
		}
		out[name] = true
	}
	if !denied {
		return nil
	}
	if out == nil {
		return map[string]bool{} // no node at all: the plan fails, as the scheduler would
	}
	return out
}

// planMembers are the members of a new reservation as the planner takes them, each kept to the
// nodes its own rules allow; the first, the member at filter, also to the nodes the scheduler
// offered (any, when offered is nil).
func (s *Snapshot) planMembers(members []*Pod, offered []string) []placement.Member {
	out := make([]placement.Member, len(members))
	for i, q := range members {
		out[i] = placement.Member{Name: q.Key(), Requests: q.Requests, Allowed: s.allowedNodes(q)}
	}
	if offered != nil {
		out[0].Allowed = allowedBoth(NodeSet(offered), out[0].Allowed)
	}
	return out
}

// allowedBoth is a ∩ b, where a nil b means every node.
func allowedBoth(a, b map[string]bool) map[string]bool {
	if b == nil {
		return a
	}
	out := make(map[string]bool, len(a))
	for n := range a {
		if b[n] {
			out[n] = true
		}
	}
	return out
}

// NodeSet is the set of nodes named.
func NodeSet(nodes []string) map[string]bool {
	set := make(map[string]bool, len(nodes))
	for _, n := range nodes {
		set[n] = true
	}
	return set
}

// --- network tiers ---------------------------------------------------------------------------

// Network tiers. A multi-node gang spends its life in all-reduce between its nodes, so its
// quorum goes to the narrowest single domain that holds it (a clique, then a rack, then a block
// ...), and among domains of that tier to the tightest fit, so that whole domains stay free for
// the next big gang. A gang that already has members bound prefers their domain. A gang may ask
// for a tier (topologyRule): preferred, tiers up to it are tried before the whole cluster;
// required, the quorum waits until one domain of that tier or a narrower one holds it.

// topologyRule is what a gang's members ask of the network: a tier by its label key or short name
// (fabric.Short), or by Tier, its place counting from 1 for the narrowest; Layers name several
// tiers at once. The zero rule prefers the narrowest tier that holds the quorum and falls back to
// the whole cluster.
type topologyRule gangspec.Topology

func rule(t gangspec.Topology) topologyRule { return topologyRule(t) }

func (r topologyRule) set() bool { return r.Key != "" || r.Tier > 0 || len(r.Layers) > 0 }

// same reports whether two members ask the same, whichever annotation each wrote it in.
func (r topologyRule) same(o topologyRule) bool {
	return r.Key == o.Key && r.Tier == o.Tier && r.Required == o.Required && slices.Equal(r.Layers, o.Layers)
}

// name is the tier or tiers the rule asks for, as the gang wrote them.
func (r topologyRule) name() string {
	switch {
	case r.Tier > 0:
		return fmt.Sprintf("tier %d", r.Tier)
	case len(r.Layers) > 0:
		return strings.Join(r.Layers, " or ")
	}
	return r.Key
}

func (r topologyRule) String() string {
	switch {
	case !r.set():
		return ""
	case r.Required:
		return "required " + r.name()
	}
	return "preferred " + r.name()
}

// Topology words what the gang's members ask of the network ("required example.com/rack"), ""
// for nothing.
func (g *Gang) Topology() string { return g.topology().String() }

// topology is the rule of the gang's reference member, which every member must share, or failing
// that its group object's.
func (g *Gang) topology() topologyRule {
	spec, ref := g.Reference()
	switch {
	case ref == nil:
		return topologyRule{}
	case rule(ref.Topology).set():
		return rule(ref.Topology)
	}
	return rule(spec.Topology)
}

// tierIndex is the configured tier the rule names, -1 when it names none of them.
func tierIndex(tiers fabric.Tiers, r topologyRule) int {
	if r.Tier > 0 {
		if r.Tier <= len(tiers) {
			return r.Tier - 1
		}
		return -1
	}
	if len(r.Layers) == 0 {
		return tiers.Find(r.Key)
	}
	best := -1
	for _, layer := range r.Layers {
		i := tiers.Find(layer)
		if i >= 0 && (best < 0 || (r.Required && i < best) || (!r.Required && i > best)) {
			best = i
		}
	}
	return best
}

// tierError refuses the members of a gang that requires a tier lockstep was not configured with:
// nothing could ever satisfy it. A preferred one is only a preference, and counts as none.
func (s *Snapshot) tierError(p *Pod, g *Gang) error {
	r := g.topology()
	if !r.Required || tierIndex(s.Rules.Tiers, r) >= 0 {
		return nil
	}
	asked := r.name()
	if r.Tier == 0 && len(r.Layers) == 0 {
		asked = fmt.Sprintf("%q", r.Key)
	}
	return fmt.Errorf("pod %s: %s requires %s: not one of lockstep's --topology-tiers (%s); name one of those (by label key, short name, or the name a tier is given as name=key), or prefer the tier instead of requiring it",
		p.Key(), r.Source, asked, s.Rules.Tiers)
}

// widestTier is the last tier a gang's plan tries one domain of, -1 without tiers. A rule naming
// a label key that is not a tier counts as none (a required one refuses the member; see
// MemberError).
func (s *Snapshot) widestTier(r topologyRule) int {
	last := len(s.Rules.Tiers) - 1
	if i := tierIndex(s.Rules.Tiers, r); i >= 0 {
		last = i
	}
	return last
}

// placeQuorum plans a gang's quorum in in.Members: by the network tiers when lockstep has them.
func (s *Snapshot) placeQuorum(g *Gang, in placement.Input) placement.Plan {
	if len(s.Rules.Tiers) > 0 {
		return s.placeByTiers(g, in)
	}
	return placement.Place(in)
}

// placeByTiers places the quorum in in.Members in the narrowest domain that holds it, tier by
// tier up to the gang's widest; failing that, across the cluster unless the rule requires a tier.
//
// Two kinds of quorum keep the planner's own plan, measured on the openb replay (make
// bench-packing, docs/packing-network.md). One the planner puts on one node needs no network.
// One whose whole request some single node could hold is small: re-placed in the tightest rack
// it went to that rack's last idle nodes, which are the big-cpu ones every other plan leaves for
// the pods that need them, and the replay ran out of those first; unless its members ask for a
// tier, such a gang keeps the plan. Both still fill the racks most in use first
// (fullerRacksFirst), which keeps whole racks free for multi-node gangs.
func (s *Snapshot) placeByTiers(g *Gang, in placement.Input) placement.Plan {
	in.Prefer = s.fullerRacksFirst(in.Free)
	flat := placement.Place(in)
	r := g.topology()
	if flat.OK && (oneNode(flat.Nodes) || (!r.set() && oneNodeHolds(in))) {
		return flat
	}
	for tier := 0; tier <= s.widestTier(r); tier++ {
		if plan, ok := s.bestDomain(in, tier); ok {
			return plan
		}
	}
	if r.Required && tierIndex(s.Rules.Tiers, r) >= 0 {
		return placement.Plan{Failed: 0}
	}
	return flat
}

// oneNodeHolds reports whether some node has room for the members' whole request.
func oneNodeHolds(in placement.Input) bool {
	need := in.Need()
	for _, free := range in.Free {
		if ok, _ := need.FitsIn(free); ok {
			return true
		}
	}
	return false
}

// fullerRacksFirst breaks the planner's last ties between equally good nodes by the node's
// narrowest-tier domain (its rack, say), in two steps:
//   - away from a domain where an idle node bigger than this one waits (as many GPUs, cpu and
//     memory, and more of one of those): a gang with one big member needs that node and idle nodes
//     beside it, and opening the small nodes around it strands it for such gangs;
//   - then toward the domain with the fewest GPUs on idle nodes: a pod that must open an idle node
//     opens one where others are open already, so that racks stay whole for the gangs that need
//     one.
//
// Both come after the fit in GPUs and cpu: earlier, they sent pods to the big-cpu nodes of busy
// racks, and the openb replay stopped sooner (0.85 of GPUs allocated against 0.96).
func (s *Snapshot) fullerRacksFirst(free map[string]placement.Resources) func(string) int {
	idle := map[string]*idleNodes{}
	for name, f := range free {
		n := s.Nodes[name]
		if n == nil || len(n.Domains) == 0 || n.Allocatable.GPU <= 0 || f.GPU != n.Allocatable.GPU {
			continue
		}
		d := idle[n.Domains[0]]
		if d == nil {
			d = &idleNodes{shapes: map[placement.Resources]int{}}
			idle[n.Domains[0]] = d
		}
		d.gpus += n.Allocatable.GPU
		d.shapes[n.Allocatable]++
	}
	return func(node string) int {
		n := s.Nodes[node]
		if n == nil || len(n.Domains) == 0 {
			return 0
		}
		d := idle[n.Domains[0]]
		if d == nil {
			return 0
		}
		return -(d.biggerThan(n.Allocatable)<<32 + int(d.gpus))
	}
}

// idleNodes are one domain's idle GPU nodes, counted by shape: a cluster has few node shapes, so
// that comparing a node with them is cheap however large the domain.
type idleNodes struct {
	gpus   int64
	shapes map[placement.Resources]int
}

// biggerThan counts the idle nodes with at least node's GPUs, cpu and memory, and more cpu or
// memory.
func (d *idleNodes) biggerThan(node placement.Resources) int {
	n := 0
	for s, count := range d.shapes {
		if s.GPU >= node.GPU && s.MilliCPU >= node.MilliCPU && s.Memory >= node.Memory &&
			(s.MilliCPU > node.MilliCPU || s.Memory > node.Memory) {
			n += count
		}
	}
	return n
}

func oneNode(nodes []string) bool {
	for _, n := range nodes {
		if n != nodes[0] {
			return false
		}
	}
	return true
}

// domainFit is one domain's plan for a quorum, with what ranks it.
type domainFit struct {
	name     string
	plan     placement.Plan
	gangHere bool  // it holds members of the gang already
	leftover int64 // GPUs free in the domain after the quorum: the tightest fit wins
}

func (a domainFit) better(b domainFit) bool {
	if a.gangHere != b.gangHere {
		return a.gangHere
	}
	if a.leftover != b.leftover {
		return a.leftover < b.leftover
	}
	return a.name < b.name
}

// bestDomain is the best plan for in.Members inside one domain of the tier; ok is false when no
// domain holds them.
func (s *Snapshot) bestDomain(in placement.Input, tier int) (placement.Plan, bool) {
	need := in.Need()
	var best domainFit
	found := false
	for name, nodes := range s.domainsAt(in.Free, tier) {
		sub := in
		sub.Free = make(map[string]placement.Resources, len(nodes))
		var free int64
		for _, n := range nodes {
			sub.Free[n] = in.Free[n]
			free += max(in.Free[n].GPU, 0)
		}
		if free < need.GPU {
			continue // cannot hold it: spare the plan
		}
		plan := placement.Place(sub)
		if !plan.OK {
			continue
		}
		fit := domainFit{name: name, plan: plan, leftover: free - need.GPU}
		for _, n := range nodes {
			fit.gangHere = fit.gangHere || in.GangNodes[n]
		}
		if !found || fit.better(best) {
			best, found = fit, true
		}
	}
	return best.plan, found
}

// domainsAt groups the nodes of free by their domain at a tier.
func (s *Snapshot) domainsAt(free map[string]placement.Resources, tier int) map[string][]string {
	out := map[string][]string{}
	for name := range free {
		if n := s.Nodes[name]; n != nil && tier < len(n.Domains) {
			out[n.Domains[tier]] = append(out[n.Domains[tier]], name)
		}
	}
	return out
}

// requiredTierWait is why a gang whose rule requires a tier waits when no domain of it holds its
// quorum, naming the tier and the domain with the most free; "" when the rule requires nothing.
func (s *Snapshot) requiredTierWait(g *Gang, in placement.Input) string {
	r := g.topology()
	tier := tierIndex(s.Rules.Tiers, r)
	if !r.Required || tier < 0 {
		return ""
	}
	key := s.Rules.Tiers[tier].Key
	same := true
	for _, mb := range in.Members {
		same = same && mb.Requests.GPU == in.Members[0].Requests.GPU
	}
	asked := fmt.Sprintf("%d members (%d nvidia.com/gpu in all)", len(in.Members), in.Need().GPU)
	if same {
		asked = fmt.Sprintf("%d members x %d nvidia.com/gpu", len(in.Members), in.Members[0].Requests.GPU)
	}
	largest, where := int64(-1), ""
	domains := s.domainsAt(in.Free, tier)
	names := make([]string, 0, len(domains))
	for name := range domains {
		names = append(names, name)
	}
	sort.Strings(names)
	for _, name := range names {
		var free int64
		for _, n := range domains[name] {
			free += max(in.Free[n].GPU, 0)
		}
		if free > largest {
			largest, where = free, name
		}
	}
	short := fabric.Short(key)
	if where == "" {
		return fmt.Sprintf("gang %s: %s need one %s (%s); no node has the label", g.Key, asked, short, key)
	}
	return fmt.Sprintf("gang %s: %s need one %s (%s); the largest %s has %d free (%s)", g.Key, asked, short, key, short, largest, where)
}
