package gang

import (
	"fmt"
	"maps"
	"slices"
	"strings"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/klog/v2"

	"github.com/lockstep-sched/lockstep/decide"
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
		// its gang is planned here instead, gang preemption included (package decide).
		m.admitForPreemption(pod, ms)
	}
	req := placement.PodRequests(pod)
	m.mu.RLock()
	defer m.mu.RUnlock()
	out := PreemptResult{Dropped: make(map[string]string)}
	r := &review{ledger: m.ledger, rs: m.book.reservations()}
	var refused string
	if r.v, refused = r.preemptorView(pod, ms); refused != "" {
		klog.V(2).InfoS("Preemption refused", "pod", klog.KObj(pod), "candidates", len(candidates), "reason", refused)
		for node := range candidates {
			out.Dropped[node] = refused
		}
		return out
	}
	r.held, _ = r.rs.Held(r.v)
	for node, victims := range candidates {
		reason := r.whyNotEvict(req, node, victims)
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

// admitForPreemption is kube-scheduler's preemption reaching lockstep for a member of a gang
// without its quorum (its preempt verb): no node passed the scheduler's own filters for the pod,
// so lockstep's filter never saw it. A gang with no reservation is planned here as filter would
// plan it, on free capacity, then by taking over lower-priority reservations, then by evicting,
// with no node ruled out for the member. The scheduler itself evicts nothing for such a pod (see
// Preempt). A pod deleted meanwhile is not taken back in (takeInFromScheduler).
func (m *Manager) admitForPreemption(pod *corev1.Pod, ms gangspec.Membership) {
	info := newPodInfoOf(pod, ms)
	var fx effects
	m.locked(func() {
		p, err := m.ledger.takeInFromScheduler(info)
		if err != nil || !m.snapshots.current().PlansForPreemption(&p.Pod) {
			return
		}
		g := m.ledger.gangOf(p)
		fx.touched(g.key)
		m.catchUpExpiryLocked(g, &fx)
		s := m.snapshots.current()
		m.applyAdmissionLocked(p, g, s.Admit(s.Pods[p.UID], nil), &fx)
	})
	m.emit(&fx)
}

// review is the check of the scheduler's preemption candidates for one pod: which reservations its
// filter respects (v), what they hold per node, and the ledger the victims are read from. It only
// reads, under the shared lock.
type review struct {
	ledger *ledger
	rs     decide.Reservations
	v      decide.View
	held   map[string]placement.Resources
}

// preemptorView is the view of reservations the pod's filter respects (filterFree's), or why
// lockstep lets the scheduler evict nothing for it.
func (r *review) preemptorView(pod *corev1.Pod, ms gangspec.Membership) (decide.View, string) {
	if ms.Gang == "" {
		return decide.Above("", podPriority(pod)), ""
	}
	key := pod.Namespace + "/" + ms.Gang
	if g := r.ledger.gangs[key]; g != nil {
		view := g.view()
		if spec, _ := view.Reference(); spec != nil && view.Satisfied(spec) {
			return decide.Above(key, view.Priority()), ""
		}
	}
	return decide.View{}, fmt.Sprintf("gang %s has no quorum bound: lockstep places its members together, and lets the scheduler evict nothing for one of them", key)
}

// whyNotEvict says why the scheduler may not evict victims to make room for req on node; "" when
// it may.
func (r *review) whyNotEvict(req placement.Resources, node string, victims []types.UID) string {
	if len(victims) == 0 {
		// The scheduler refuses a kept candidate without victims; it never sends one.
		return "no victims named"
	}
	if reason := r.unbound(victims); reason != "" {
		return reason
	}
	evicted := r.bound(victims)
	if reason := r.members(evicted); reason != "" {
		return reason
	}
	var state placement.NodeState
	r.ledger.readNodeState(&state, node, r.held)
	for _, p := range evicted {
		if p.Node == node {
			state.Free = state.Free.Add(p.Requests)
		}
	}
	reason, refusal := placement.WhyNot(req, node, &state, func(node string) string { return r.rs.Holders(node, r.v) })
	switch refusal {
	case placement.Fits:
		return ""
	case placement.NotSeen:
		return reason
	}
	return "the pod does not fit even with its victims evicted: " + reason
}

// unbound refuses victims that are gang members lockstep has not seen bound: the scheduler counts
// a member on its node from the moment it sends it to bind, and lockstep holds it there until its
// quorum commits. Evicting it would take a member from a gang mid-commit, or from a reservation,
// and leave the gang partial or short.
func (r *review) unbound(victims []types.UID) string {
	for _, uid := range victims {
		if p, ok := r.ledger.pods[uid]; ok && !p.Holds() && p.Gang != "" && !p.Terminal {
			return fmt.Sprintf("gang %s: member %s is on its way to bind with its gang's quorum; evicting it would leave the gang partial", p.Gang, p.Key())
		}
	}
	return ""
}

// bound are the victims lockstep knows bound to a node, on whichever node its record has them:
// evicting a gang member breaks its gang wherever it runs, but frees only its own node.
func (r *review) bound(victims []types.UID) []*podInfo {
	var out []*podInfo
	for _, uid := range victims {
		if p, ok := r.ledger.pods[uid]; ok && p.Holds() {
			out = append(out, p)
		}
	}
	return out
}

// members says which gang evicting the pods would leave partial, and how; "" when none.
func (r *review) members(evicted []*podInfo) string {
	byGang := map[string][]*podInfo{}
	for _, p := range evicted {
		if p.Gang != "" {
			byGang[p.Gang] = append(byGang[p.Gang], p)
		}
	}
	for _, key := range slices.Sorted(maps.Keys(byGang)) {
		if g := r.ledger.gangs[key]; g != nil {
			if reason := r.from(g, byGang[key]); reason != "" {
				return reason
			}
		}
	}
	return ""
}

// from says why the evicted members may not leave gang g: its quorum would no longer be bound,
// its commit is binding it, or its rules are unknown, so lockstep cannot tell.
func (r *review) from(g *gangInfo, evicted []*podInfo) string {
	names := make([]string, len(evicted))
	for i, p := range evicted {
		names[i] = p.Key()
	}
	who := strings.Join(names, ", ")
	view := g.view()
	spec, _ := view.Reference()
	if spec == nil {
		return fmt.Sprintf("gang %s: its rules are unknown, so lockstep cannot tell whether evicting %s leaves it whole", g.key, who)
	}
	if res := r.rs[g.key]; res != nil && res.State == decide.Committing {
		return fmt.Sprintf("gang %s is binding its quorum; evicting %s would leave it partial", g.key, who)
	}
	if !view.Satisfied(spec) {
		return ""
	}
	if bound := view.BoundCount(); spec.DisruptAll && len(evicted) < bound {
		return fmt.Sprintf("gang %s: %s says its members go only together (disruptionMode all); evicting %s would leave the other %d",
			g.key, spec.Source, who, bound-len(evicted))
	}
	left := view.Counted(spec)
	for _, p := range evicted {
		if !p.Going() { // one going is not counted already
			leaving := p.Pod
			left.Remove(&leaving)
		}
	}
	if left.Meets(spec) {
		return ""
	}
	return fmt.Sprintf("gang %s: evicting %s would leave %d bound of its min-available %d%s; lockstep never lets a bound gang fall below its quorum",
		g.key, who, left.Total, spec.MinAvailable, left.TasksLacking(spec))
}
