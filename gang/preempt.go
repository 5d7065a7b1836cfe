package gang

import (
	"fmt"
	"maps"
	"slices"
	"strings"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/klog/v2"

	"github.com/lockstep-sched/lockstep/gangspec"
	"github.com/lockstep-sched/lockstep/placement"
)

// PreemptResult is lockstep's word on the candidate nodes kube-scheduler's preemption chose for a
// pod: the nodes where it may evict the victims it chose, and why not on the others.
type PreemptResult struct {
	// Kept are the candidates whose victims may go, sorted.
	Kept []string
	// Dropped gives each other candidate's reason.
	Dropped map[string]string
}

// Preempt reviews the scheduler's preemption candidates for pod: each node with the pods (by UID)
// it would evict there. A node is kept only when evicting its victims leaves every gang whose
// quorum is bound at its quorum, and makes room for the pod beside the pods that stay and the
// reservations its filter respects: evicting pods cannot free what a reservation holds. Victims
// lockstep does not know free nothing.
//
// A member of a gang without its quorum bound keeps no node at all: lockstep places such gangs
// whole, itself, and an eviction for one member would make room for that member alone.
func (m *Manager) Preempt(pod *corev1.Pod, candidates map[string][]types.UID) PreemptResult {
	ms := readMembership(m.cfg.Reader, pod)
	if ms.Gang != "" {
		// No node took this member in the scheduler's eyes, so lockstep's filter never saw it:
		// its gang is planned here instead, gang preemption included (victims.go).
		m.admitForPreemption(pod, ms)
	}
	req := placement.PodRequests(pod)
	m.mu.RLock()
	defer m.mu.RUnlock()
	out := PreemptResult{Dropped: make(map[string]string)}
	v, refused := m.preemptorView(pod, ms)
	if refused != "" {
		klog.V(2).InfoS("Preemption refused", "pod", klog.KObj(pod), "candidates", len(candidates), "reason", refused)
		for node := range candidates {
			out.Dropped[node] = refused
		}
		return out
	}
	held, _ := m.book.held(v)
	for node, victims := range candidates {
		reason := m.whyNotEvict(req, node, victims, v, held)
		if reason == "" {
			out.Kept = append(out.Kept, node)
			continue
		}
		out.Dropped[node] = reason
		klog.V(2).InfoS("Preemption candidate dropped", "pod", klog.KObj(pod), "node", node, "reason", reason)
	}
	slices.Sort(out.Kept)
	return out
}

// preemptorView is the view of reservations the pod's filter respects (filterFree's), or why
// lockstep lets the scheduler evict nothing for it.
func (m *Manager) preemptorView(pod *corev1.Pod, ms gangspec.Membership) (view, string) {
	if ms.Gang == "" {
		return above("", podPriority(pod)), ""
	}
	key := pod.Namespace + "/" + ms.Gang
	if g := m.ledger.gangs[key]; g != nil {
		if spec, _ := g.reference(); spec != nil && g.satisfied(spec) {
			return above(key, g.priority()), ""
		}
	}
	return view{}, fmt.Sprintf("gang %s has no quorum bound: lockstep places its members together, and lets the scheduler evict nothing for one of them", key)
}

// whyNotEvict says why the scheduler may not evict victims to make room for req on node; "" when
// it may. held is what the reservations v respects hold, per node.
func (m *Manager) whyNotEvict(req placement.Resources, node string, victims []types.UID, v view, held map[string]placement.Resources) string {
	if len(victims) == 0 {
		// The scheduler refuses a kept candidate without victims; it never sends one.
		return "no victims named"
	}
	if reason := m.whyNotEvictUnbound(victims); reason != "" {
		return reason
	}
	evicted := m.boundVictims(victims)
	if reason := m.whyNotEvictMembers(evicted); reason != "" {
		return reason
	}
	var state placement.NodeState
	m.ledger.readNodeState(&state, node, held)
	for _, p := range evicted {
		if p.node == node {
			state.Free = state.Free.Add(p.requests)
		}
	}
	reason, refusal := placement.WhyNot(req, node, &state, func(node string) string { return m.book.holders(node, v) })
	switch refusal {
	case placement.Fits:
		return ""
	case placement.NotSeen:
		return reason
	}
	return "the pod does not fit even with its victims evicted: " + reason
}

// whyNotEvictUnbound refuses victims that are gang members lockstep has not seen bound: the
// scheduler counts a member on its node from the moment it sends it to bind, and lockstep holds
// it there until its quorum commits. Evicting it would take a member from a gang mid-commit, or
// from a reservation, and leave the gang partial or short.
func (m *Manager) whyNotEvictUnbound(victims []types.UID) string {
	for _, uid := range victims {
		if p, ok := m.ledger.pods[uid]; ok && !p.holds() && gangKeyOf(p) != "" && !p.terminal {
			return fmt.Sprintf("gang %s: member %s is on its way to bind with its gang's quorum; evicting it would leave the gang partial", gangKeyOf(p), p.key())
		}
	}
	return ""
}

// boundVictims are the victims lockstep knows bound to a node, on whichever node its record has
// them: evicting a gang member breaks its gang wherever it runs, but frees only its own node.
func (m *Manager) boundVictims(victims []types.UID) []*podInfo {
	var out []*podInfo
	for _, uid := range victims {
		if p, ok := m.ledger.pods[uid]; ok && p.holds() {
			out = append(out, p)
		}
	}
	return out
}

// whyNotEvictMembers says which gang evicting the pods would leave partial, and how; "" when none.
func (m *Manager) whyNotEvictMembers(evicted []*podInfo) string {
	byGang := map[string][]*podInfo{}
	for _, p := range evicted {
		if key := gangKeyOf(p); key != "" {
			byGang[key] = append(byGang[key], p)
		}
	}
	for _, key := range slices.Sorted(maps.Keys(byGang)) {
		if g := m.ledger.gangs[key]; g != nil {
			if reason := m.whyNotEvictFrom(g, byGang[key]); reason != "" {
				return reason
			}
		}
	}
	return ""
}

// whyNotEvictFrom says why the evicted members may not leave gang g: its quorum would no longer be
// bound, its commit is binding it, or its rules are unknown, so lockstep cannot tell.
func (m *Manager) whyNotEvictFrom(g *gangInfo, evicted []*podInfo) string {
	names := make([]string, len(evicted))
	for i, p := range evicted {
		names[i] = p.key()
	}
	who := strings.Join(names, ", ")
	spec, _ := g.reference()
	if spec == nil {
		return fmt.Sprintf("gang %s: its rules are unknown, so lockstep cannot tell whether evicting %s leaves it whole", g.key, who)
	}
	if res := m.book.live(g.key); res != nil && res.state == committing {
		return fmt.Sprintf("gang %s is binding its quorum; evicting %s would leave it partial", g.key, who)
	}
	if !g.satisfied(spec) {
		return ""
	}
	left := g.counted(spec)
	for _, p := range evicted {
		if !p.going() { // one going is not counted already
			left.remove(p)
		}
	}
	if left.meets(spec) {
		return ""
	}
	return fmt.Sprintf("gang %s: evicting %s would leave %d bound of its min-available %d%s; lockstep never lets a bound gang fall below its quorum",
		g.key, who, left.total, spec.MinAvailable, left.tasksLacking(spec))
}

// remove takes a counted member that is to be evicted back out of the tally: add, undone.
func (t *tally) remove(p *podInfo) {
	t.total--
	if p.task != "" {
		t.byTask[p.task]--
	}
}
