package gang

import (
	corev1 "k8s.io/api/core/v1"

	"github.com/lockstep-sched/lockstep/placement"
	corev1helpers "k8s.io/component-helpers/scheduling/corev1"
	"k8s.io/component-helpers/scheduling/corev1/nodeaffinity"
	"k8s.io/klog/v2"
)

// A member's own node rules. lockstep plans a gang's quorum on nodes of its choosing, and
// kube-scheduler then checks each member against its own rules at filter. A plan that puts a
// member where its nodeSelector, required node affinity or a taint rules it out reserves (and
// holds, and evicts for) capacity the member can never take, and two such gangs block each other
// until their reservations time out. So plans keep to the nodes these rules allow. What else the
// scheduler checks (ports, volumes, inter-pod affinity) still rules out a reserved node only at
// filter, where the member's slot then moves (admitToReservation).

// nodeRules are the rules of one gang member.
type nodeRules struct {
	affinity    nodeaffinity.RequiredNodeAffinity
	tolerations []corev1.Toleration
}

func nodeRulesOf(pod *corev1.Pod) *nodeRules {
	return &nodeRules{affinity: nodeaffinity.GetRequiredNodeAffinity(pod), tolerations: pod.Spec.Tolerations}
}

// allows reports whether the rules let the member run on the node.
func (r *nodeRules) allows(n *nodeInfo) bool {
	if ok, err := r.affinity.Match(n.object); err != nil || !ok {
		return false
	}
	_, untolerated := corev1helpers.FindMatchingUntoleratedTaint(klog.Background(), n.hardTaints, r.tolerations, nil, false)
	return !untolerated
}

// allowedNodes are the nodes the member's rules allow, nil when they allow every node: the
// planner then considers them all without a set to look in.
func (l *ledger) allowedNodes(p *podInfo) map[string]bool {
	if p.nodeRules == nil {
		return nil
	}
	var out map[string]bool
	denied := false
	for name, n := range l.nodes {
		if !n.known {
			continue
		}
		if !p.nodeRules.allows(n) {
			denied = true
			continue
		}
		if out == nil {
			out = make(map[string]bool, len(l.nodes))
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
func (m *Manager) planMembers(members []*podInfo, offered []string) []placement.Member {
	out := make([]placement.Member, len(members))
	for i, q := range members {
		out[i] = placement.Member{Name: q.key(), Requests: q.requests, Allowed: m.ledger.allowedNodes(q)}
	}
	if offered != nil {
		out[0].Allowed = allowedBoth(nodeSet(offered), out[0].Allowed)
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
