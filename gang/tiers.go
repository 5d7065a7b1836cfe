package gang

import (
	"fmt"
	"slices"
	"sort"
	"strings"

	"github.com/lockstep-sched/lockstep/fabric"
	"github.com/lockstep-sched/lockstep/gangspec"
	"github.com/lockstep-sched/lockstep/placement"

	"github.com/lockstep-sched/lockstep/views"
)

// Network tiers. A multi-node gang spends its life in all-reduce between its nodes, so its
// quorum goes to the narrowest single domain that holds it (a clique, then a rack, then a block
// ...), and among domains of that tier to the tightest fit, so that whole domains stay free for
// the next big gang. A gang that already has members bound prefers their domain. A gang may ask
// for a tier (topologyRule): preferred, tiers up to it are tried before the whole cluster;
// required, the quorum waits until one domain of that tier or a narrower one holds it.

// topologyRule is what a gang's members ask of the network: a tier by its label key, and whether
// the quorum must fit in one of its domains. The zero rule prefers the narrowest tier that holds
// the quorum and falls back to the whole cluster.
type topologyRule struct {
	// key names the tier by its node label key, or by its short name (fabric.Short); tier, when
	// not 0, by its place counting from 1 for the narrowest (Volcano's highestTierAllowed).
	key      string
	tier     int
	required bool
	// layers name several tiers at once (gangspec.Topology.Layers).
	layers []string
	// source is where it came from, for messages.
	source string
}

func ruleOf(t gangspec.Topology) topologyRule {
	return topologyRule{key: t.Key, tier: t.Tier, required: t.Required, layers: t.Layers, source: t.Source}
}

func (r topologyRule) set() bool { return r.key != "" || r.tier > 0 || len(r.layers) > 0 }

// same reports whether two members ask the same, whichever annotation each wrote it in.
func (r topologyRule) same(o topologyRule) bool {
	return r.key == o.key && r.tier == o.tier && r.required == o.required && slices.Equal(r.layers, o.layers)
}

// tierIndex is the configured tier the rule names, -1 when it names none of them.
func (m *Manager) tierIndex(r topologyRule) int {
	if r.tier > 0 {
		if r.tier <= len(m.cfg.Tiers) {
			return r.tier - 1
		}
		return -1
	}
	if len(r.layers) == 0 {
		return m.cfg.Tiers.Find(r.key)
	}
	best := -1
	for _, layer := range r.layers {
		i := m.cfg.Tiers.Find(layer)
		if i >= 0 && (best < 0 || (r.required && i < best) || (!r.required && i > best)) {
			best = i
		}
	}
	return best
}

// tierError refuses the members of a gang that requires a tier lockstep was not configured with:
// nothing could ever satisfy it. A preferred one is only a preference, and counts as none.
func (m *Manager) tierError(p *podInfo, g *gangInfo) error {
	r := g.topology()
	if !r.required || m.tierIndex(r) >= 0 {
		return nil
	}
	asked := r.name()
	if r.tier == 0 && len(r.layers) == 0 {
		asked = fmt.Sprintf("%q", r.key)
	}
	return fmt.Errorf("pod %s: %s requires %s: not one of lockstep's --topology-tiers (%s); name one of those (by label key, short name, or the name a tier is given as name=key), or prefer the tier instead of requiring it",
		p.key(), r.source, asked, m.cfg.Tiers)
}

// name is the tier or tiers the rule asks for, as the gang wrote them.
func (r topologyRule) name() string {
	switch {
	case r.tier > 0:
		return fmt.Sprintf("tier %d", r.tier)
	case len(r.layers) > 0:
		return strings.Join(r.layers, " or ")
	}
	return r.key
}

func (r topologyRule) String() string {
	switch {
	case !r.set():
		return ""
	case r.required:
		return "required " + r.name()
	}
	return "preferred " + r.name()
}

// topology is the rule of the gang's reference member, which every member must share, or failing
// that its group object's.
func (g *gangInfo) topology() topologyRule {
	spec, ref := g.reference()
	switch {
	case ref == nil:
		return topologyRule{}
	case ref.topology.set():
		return ref.topology
	}
	return ruleOf(spec.Topology)
}

// widestTier is the last tier a gang's plan tries one domain of, -1 without tiers. A rule naming
// a label key that is not a tier counts as none (a required one refuses the member; see
// memberError).
func (m *Manager) widestTier(rule topologyRule) int {
	last := len(m.cfg.Tiers) - 1
	if i := m.tierIndex(rule); i >= 0 {
		last = i
	}
	return last
}

// placeQuorum plans a gang's quorum in in.Members: by the network tiers when lockstep has them.
// Every plan for a quorum goes through it, so that none (a hold, a protected place in line)
// counts on capacity the gang's rule would not let it use.
func (m *Manager) placeQuorum(g *gangInfo, in placement.Input) placement.Plan {
	if len(m.cfg.Tiers) > 0 {
		return m.placeByTiers(g, in)
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
func (m *Manager) placeByTiers(g *gangInfo, in placement.Input) placement.Plan {
	in.Prefer = m.fullerRacksFirst(in.Free)
	flat := placement.Place(in)
	rule := g.topology()
	if flat.OK && (oneNode(flat.Nodes) || (!rule.set() && oneNodeHolds(in))) {
		return flat
	}
	for tier := 0; tier <= m.widestTier(rule); tier++ {
		if plan, ok := m.bestDomain(in, tier); ok {
			return plan
		}
	}
	if rule.required && m.tierIndex(rule) >= 0 {
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
func (m *Manager) fullerRacksFirst(free map[string]placement.Resources) func(string) int {
	idle := map[string]*idleNodes{}
	for name, f := range free {
		n := m.ledger.nodes[name]
		if n == nil || len(n.domains) == 0 || n.allocatable.GPU <= 0 || f.GPU != n.allocatable.GPU {
			continue
		}
		d := idle[n.domains[0]]
		if d == nil {
			d = &idleNodes{shapes: map[placement.Resources]int{}}
			idle[n.domains[0]] = d
		}
		d.gpus += n.allocatable.GPU
		d.shapes[n.allocatable]++
	}
	return func(node string) int {
		n := m.ledger.nodes[node]
		if n == nil || len(n.domains) == 0 {
			return 0
		}
		d := idle[n.domains[0]]
		if d == nil {
			return 0
		}
		return -(d.biggerThan(n.allocatable)<<32 + int(d.gpus))
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
func (m *Manager) bestDomain(in placement.Input, tier int) (placement.Plan, bool) {
	need := in.Need()
	var best domainFit
	found := false
	for name, nodes := range m.domainsAt(in.Free, tier) {
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
func (m *Manager) domainsAt(free map[string]placement.Resources, tier int) map[string][]string {
	out := map[string][]string{}
	for name := range free {
		if n := m.ledger.nodes[name]; n != nil && tier < len(n.domains) {
			out[n.domains[tier]] = append(out[n.domains[tier]], name)
		}
	}
	return out
}

// requiredTierWait is why a gang whose rule requires a tier waits when no domain of it holds its
// quorum, naming the tier and the domain with the most free; "" when the rule requires nothing.
func (m *Manager) requiredTierWait(g *gangInfo, in placement.Input) string {
	rule := g.topology()
	tier := m.tierIndex(rule)
	if !rule.required || tier < 0 {
		return ""
	}
	key := m.cfg.Tiers[tier].Key
	same := true
	for _, mb := range in.Members {
		same = same && mb.Requests.GPU == in.Members[0].Requests.GPU
	}
	asked := fmt.Sprintf("%d members (%d nvidia.com/gpu in all)", len(in.Members), in.Need().GPU)
	if same {
		asked = fmt.Sprintf("%d members x %d nvidia.com/gpu", len(in.Members), in.Members[0].Requests.GPU)
	}
	largest, where := int64(-1), ""
	domains := m.domainsAt(in.Free, tier)
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
		return fmt.Sprintf("gang %s: %s need one %s (%s); no node has the label", g.key, asked, short, key)
	}
	return fmt.Sprintf("gang %s: %s need one %s (%s); the largest %s has %d free (%s)", g.key, asked, short, key, short, largest, where)
}

// domainsOf lists, per tier, the domains of the nodes the members are bound or reserved on.
func (m *Manager) domainsOf(members []views.MemberStatus) []views.TierDomains {
	if len(m.cfg.Tiers) == 0 {
		return nil
	}
	out := make([]views.TierDomains, 0, len(m.cfg.Tiers))
	for i, tier := range m.cfg.Tiers {
		seen := map[string]bool{}
		td := views.TierDomains{Tier: tier.Key, Domains: []string{}}
		for _, mb := range members {
			n := m.ledger.nodes[mb.Node]
			if mb.Node == "" || n == nil || i >= len(n.domains) || seen[n.domains[i]] {
				continue
			}
			seen[n.domains[i]] = true
			td.Domains = append(td.Domains, n.domains[i])
		}
		sort.Strings(td.Domains)
		out = append(out, td)
	}
	return out
}
