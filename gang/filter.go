package gang

import (
	"fmt"
	"sort"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/klog/v2"

	"github.com/lockstep-sched/lockstep/wellknown"
)

// FilterResult is lockstep's answer to the scheduler's filter call. Every failure is one that
// preemption on that node would not cure (lockstep does not preempt for gangs), so the HTTP layer
// reports them as unresolvable.
type FilterResult struct {
	// Feasible are the passing nodes, in the order offered. When every offered node passes it is
	// the offered slice itself, which Filter never writes to: the usual answer on a cluster with
	// room costs no copy, and the HTTP layer can tell it apart.
	Feasible []string
	Failed   map[string]string
}

func failAll(nodes []string, reason string) FilterResult {
	failed := make(map[string]string, len(nodes))
	for _, n := range nodes {
		failed[n] = reason
	}
	return FilterResult{Failed: failed}
}

// Filter answers which of the offered nodes the pod may use.
//
// An ordinary pod (and a gang member once its gang has quorum) may use any node where it fits
// without touching capacity that gangs hold in reservations. A gang member before quorum passes
// only the one node its gang's reservation holds for it; when its gang has no reservation yet,
// lockstep first checks that min-available members fit at once and reserves all of them.
func (m *Manager) Filter(pod *corev1.Pod, nodes []string) FilterResult {
	spec, specErr := ParseSpec(pod)
	if spec == nil && specErr == nil {
		m.mu.RLock()
		defer m.mu.RUnlock()
		return m.filterByFreeCapacity(PodRequests(pod), "", nodes)
	}

	m.mu.Lock()
	defer m.mu.Unlock()
	p := m.state.upsertPod(pod)
	if specErr != nil {
		m.eventLocked(p, corev1.EventTypeWarning, wellknown.ReasonGangRejected, specErr.Error())
		return failAll(nodes, specErr.Error())
	}
	g := m.state.gangOf(p)
	ref, refPod := g.reference()
	if refPod != p {
		if err := disagreement(p.key(), *spec, *ref, refPod.key()); err != nil {
			m.eventLocked(p, corev1.EventTypeWarning, wellknown.ReasonGangRejected, err.Error())
			return failAll(nodes, err.Error())
		}
	}
	if g.boundCount() >= spec.MinAvailable {
		// Quorum is met: the rest of the gang schedules like ordinary pods.
		return m.filterByFreeCapacity(p.requests, g.key, nodes)
	}
	if res := m.liveReservation(g.key); res != nil {
		return m.filterReserved(p, g, res, nodes)
	}
	return m.admitGang(p, g, spec, nodes)
}

// filterByFreeCapacity passes the nodes where req fits beside bound pods and other gangs'
// reservations. ownGang's reservation, if any, is the pod's own to use.
func (m *Manager) filterByFreeCapacity(req Resources, ownGang string, nodes []string) FilterResult {
	reserved, _ := m.reservedByNode(ownGang)
	var out FilterResult
	for i, name := range nodes {
		reason := m.whyNotFree(req, ownGang, name, reserved)
		if reason == "" {
			if out.Failed != nil {
				out.Feasible = append(out.Feasible, name)
			}
			continue
		}
		if out.Failed == nil {
			// The first failure: from here on the passing nodes need a list of their own.
			out.Failed = map[string]string{}
			out.Feasible = append(make([]string, 0, len(nodes)-1), nodes[:i]...)
		}
		out.Failed[name] = reason
	}
	if out.Failed == nil {
		out.Feasible = nodes
	}
	return out
}

// whyNotFree says why req does not fit on a node beside bound pods and the reservations of gangs
// other than ownGang; "" when it fits.
func (m *Manager) whyNotFree(req Resources, ownGang, name string, reserved map[string]Resources) string {
	n, ok := m.state.nodes[name]
	if !ok || !n.known {
		return "lockstep has not seen this node yet"
	}
	free := n.free()
	if fits, short := req.FitsIn(free); !fits {
		return fmt.Sprintf("insufficient %s: needs %s, %s free", short,
			quantityNumber(short, req.Get(short)), quantityNumber(short, max(free.Get(short), 0)))
	}
	if held, ok := reserved[name]; ok {
		if fits, short := req.FitsIn(free.Sub(held)); !fits {
			return fmt.Sprintf("%s reserved for gang %s: needs %s, %s free outside reservations",
				FormatQuantity(short, held.Get(short)), m.holdersOn(name, ownGang), quantityNumber(short, req.Get(short)),
				quantityNumber(short, max(free.Sub(held).Get(short), 0)))
		}
	}
	return ""
}

// holdersOn names, sorted, the gangs other than ownGang holding capacity on a node: the same
// message every time, so that the scheduler folds identical node reasons and lockstep's event
// de-duplication holds. Called only on the failure path.
func (m *Manager) holdersOn(node, ownGang string) string {
	var names []string
	for key, item := range m.reservations.Items() {
		if key == ownGang {
			continue
		}
		for _, s := range item.Object.(*reservation).slots {
			if s.node == node && s.holdsCapacity() {
				names = append(names, key)
				break
			}
		}
	}
	sort.Strings(names)
	return strings.Join(names, ", ")
}

// admitGang is the all-or-nothing check: can the members still needed for quorum all be placed
// on free capacity now? If so, every one of them gets a slot at once, so that a second gang can
// not take part of the capacity and leave both waiting.
func (m *Manager) admitGang(p *podInfo, g *gangInfo, spec *Spec, nodes []string) FilterResult {
	bound := g.boundCount()
	need := spec.MinAvailable - bound
	members := []*podInfo{p}
	gated := 0
	for _, q := range g.sortedMembers() {
		if len(members) == need {
			break
		}
		switch {
		case q == p || q.spec == nil || q.holds() || q.terminal:
		case disagreement(q.key(), *q.spec, *spec, p.key()) != nil:
			// Rejected at its own filter: it never comes to claim a place held for it.
		case q.gated:
			gated++
		default:
			members = append(members, q)
		}
	}
	if len(members) < need {
		reason := fmt.Sprintf("gang %s: waiting for members: %d of min-available %d exist", g.key, bound+len(members)+gated, spec.MinAvailable)
		if gated > 0 {
			reason += fmt.Sprintf(", %d of them held by scheduling gates", gated)
		}
		return m.wait(p, g, nodes, reason)
	}
	if old := g.reservation; old != nil && old.state == reserving {
		// go-cache hides an expired reservation at once but reports it only when sweepExpired
		// next runs; a new Set would replace it unreported. Expire it here so that its waiters
		// wake and the gang's time-out and cool-down are not skipped.
		writes, writer := m.expireLocked(g.key, old)
		m.writeConditions(writer, writes)
	}
	if wait := m.coolDown(g, spec); wait > 0 {
		return m.wait(p, g, nodes, fmt.Sprintf("gang %s: its reservation timed out; it plans again in %s so that other waiting gangs get the capacity first",
			g.key, wait.Truncate(time.Second)+time.Second))
	}

	reserved, heldBy := m.reservedByNode(g.key)
	in := m.planView(g, reserved, nil)
	allowed := nodeSet(nodes)
	for i, q := range members {
		pm := planMember{pod: q, name: q.key(), requests: q.requests}
		if i == 0 {
			pm.allowed = allowed
		}
		in.members = append(in.members, pm)
	}
	plan := makePlan(in)
	if !plan.ok {
		return m.wait(p, g, nodes, explainNoFit(g.key, in, plan.failed, heldBy))
	}

	waiting := spec.WaitingTime
	if waiting == 0 {
		waiting = m.cfg.DefaultWaitingTime
	}
	now := m.now()
	res := &reservation{gang: g.key, created: now, expires: now.Add(waiting), done: make(chan struct{})}
	for i, q := range members {
		s := &slot{plannedFor: q.uid, node: plan.nodes[i], requests: q.requests, state: slotPlanned}
		if q == p {
			s.pod, s.state = p, slotReserved
		}
		res.slots = append(res.slots, s)
	}
	m.reservations.Set(g.key, res, waiting)
	g.reservation = res
	g.timedOut = false
	g.lastReason = fmt.Sprintf("gang %s: %d %s reserved until %s; waiting for them to reach bind",
		g.key, need, plural(need, "member", "members"), res.expires.UTC().Format("15:04:05"))
	klog.V(2).InfoS("Gang reserved", "gang", g.key, "slots", len(res.slots), "expires", res.expires)
	m.eventLocked(p, corev1.EventTypeNormal, wellknown.ReasonGangReserved, g.lastReason)
	return passOnly(nodes, plan.nodes[0], fmt.Sprintf("gang %s: member reserved on node %s", g.key, plan.nodes[0]))
}

// filterReserved answers for a member whose gang already holds a reservation.
func (m *Manager) filterReserved(p *podInfo, g *gangInfo, res *reservation, nodes []string) FilterResult {
	allowed := nodeSet(nodes)
	s := res.slotOf(p.uid)
	if s == nil && res.state == reserving {
		s = res.claim(p)
	}
	if s == nil {
		// A member beyond the plan (total-number above min-available) joins the reservation when
		// free capacity holds it; otherwise it waits to schedule as an ordinary pod after quorum.
		node := m.bestFreeNode(p.requests, g, allowed, nil)
		if node == "" || res.state != reserving {
			return m.wait(p, g, nodes, fmt.Sprintf("gang %s: its %d reserved places are taken by other members; this member schedules once the gang is bound",
				g.key, len(res.slots)))
		}
		s = &slot{pod: p, plannedFor: p.uid, node: node, requests: p.requests, state: slotReserved}
		res.slots = append(res.slots, s)
	}
	if !allowed[s.node] {
		// The scheduler's own filters rule the reserved node out for this pod (taints, affinity,
		// ports: things lockstep does not model). Move the slot if another offered node has room.
		if s.state != slotReserved {
			return m.wait(p, g, nodes, fmt.Sprintf("gang %s: member %s is waiting for quorum on node %s, which the scheduler no longer offers", g.key, p.key(), s.node))
		}
		moveTo := m.bestFreeNode(p.requests, g, allowed, s)
		if moveTo == "" {
			return m.wait(p, g, nodes, fmt.Sprintf("gang %s: member %s's reserved node %s is ruled out by the scheduler's other filters and no offered node has room for %s",
				g.key, p.key(), s.node, p.requests))
		}
		s.node = moveTo
	}
	return passOnly(nodes, s.node, fmt.Sprintf("gang %s: member reserved on node %s", g.key, s.node))
}

// bestFreeNode picks, among allowed nodes, where req fits beside bound pods, other gangs'
// reservations and the gang's own slots other than skip; the planner's packing rules choose.
func (m *Manager) bestFreeNode(req Resources, g *gangInfo, allowed map[string]bool, skip *slot) string {
	reserved, _ := m.reservedByNode(g.key)
	if res := m.liveReservation(g.key); res != nil {
		for _, s := range res.slots {
			if s != skip && s.holdsCapacity() {
				reserved[s.node] = reserved[s.node].Add(s.requests)
			}
		}
	}
	in := m.planView(g, reserved, allowed)
	in.members = []planMember{{requests: req, allowed: allowed}}
	plan := makePlan(in)
	if !plan.ok {
		return ""
	}
	return plan.nodes[0]
}

// planView is the planner's picture of the cluster for one gang: every schedulable node (of only,
// when given) with what it has left after bound pods and reserved, and the nodes already holding
// the gang's bound members.
func (m *Manager) planView(g *gangInfo, reserved map[string]Resources, only map[string]bool) planInput {
	in := planInput{free: make(map[string]Resources, len(m.state.nodes)), gangNodes: map[string]bool{}}
	for name, n := range m.state.nodes {
		if n.known && !n.unschedulable && (only == nil || only[name]) {
			in.free[name] = n.free().Sub(reserved[name])
		}
	}
	for _, q := range g.members {
		if q.holds() {
			in.gangNodes[q.node] = true
		}
	}
	memo := &scoreMemo{} // one plan scores every node per member; most share a state
	in.nodeScore = func(node string, req Resources) int {
		return memo.gpuScore(m.state.nodes[node], req.GPU, reserved[node].GPU)
	}
	return in
}

func nodeSet(nodes []string) map[string]bool {
	set := make(map[string]bool, len(nodes))
	for _, n := range nodes {
		set[n] = true
	}
	return set
}

// wait records why a gang waits, tells its member, and fails every offered node with the reason:
// the scheduler folds identical node messages into one FailedScheduling line.
func (m *Manager) wait(p *podInfo, g *gangInfo, nodes []string, reason string) FilterResult {
	g.lastReason = reason
	g.attempts++
	m.eventLocked(p, corev1.EventTypeWarning, wellknown.ReasonGangWaiting, reason)
	return failAll(nodes, reason)
}

func passOnly(nodes []string, keep, otherReason string) FilterResult {
	out := FilterResult{Feasible: []string{keep}, Failed: make(map[string]string, len(nodes))}
	for _, n := range nodes {
		if n != keep {
			out.Failed[n] = otherReason
		}
	}
	return out
}

// coolDown is how long a gang whose reservation expired must wait before reserving again. Without
// it a gang that can never complete (a member the scheduler cannot place) would take the capacity
// back on its next retry, every time, and starve the gangs waiting behind it. It lasts one waiting
// time, long enough for every waiting pod to be retried (the scheduler's backoff is at most 10s by
// default).
func (m *Manager) coolDown(g *gangInfo, spec *Spec) time.Duration {
	if !g.timedOut {
		return 0
	}
	waiting := spec.WaitingTime
	if waiting == 0 {
		waiting = m.cfg.DefaultWaitingTime
	}
	return g.timedOutAt.Add(waiting).Sub(m.now())
}
