package gang

import (
	"fmt"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/klog/v2"

	"github.com/lockstep-sched/lockstep/gangspec"
	"github.com/lockstep-sched/lockstep/placement"
	"github.com/lockstep-sched/lockstep/wellknown"
)

// admission is filter's decision for a gang member before its gang has quorum: the gang waits
// with a reason, or the member passes exactly one node. Deciding only reads the ledger and the
// book; applyAdmission then makes the decision true, so each can be read on its own.
type admission struct {
	// wait is why the gang waits; the member fails every offered node with it.
	wait string
	// node is the one node the member passes, when it does not wait.
	node string
	// reserve is a new reservation for the gang's quorum, the member's slot first.
	reserve *reservation
	// slot is the member's place in its gang's live reservation: one it holds, a planned one it
	// takes, or (join) a new one for a member beyond the plan. It moves to node.
	slot *slot
	join bool
	// yield are lower-priority reservations the new one takes the capacity of.
	yield []*reservation
	// evict are the pods the new one needs gone, and cause why: lower priority (gang
	// preemption), members beyond other gangs' quorums, or what reclaim takes back for the
	// gang's queue below its fair share.
	evict []victimUnit
	cause evictCause
	// hold, when set, is a starving gang's new claim on capacity as it frees.
	hold *reservation
	// lacksMembers: the gang waits because too few of its members exist.
	lacksMembers bool
	// want, when not zero, is what the waiting gang's quorum asks: its queue is owed it (quota).
	want placement.Resources
}

// admit decides for a member whose gang has no quorum yet, through the gang's live reservation
// res, or by planning a new one when there is none.
func (m *Manager) admit(p *podInfo, g *gangInfo, spec *gangspec.Spec, res *reservation, offered []string) admission {
	if res != nil {
		return m.admitToReservation(p, g, res, offered)
	}
	members, wait := quorumMembers(p, g, spec)
	if wait != "" {
		return admission{wait: wait, lacksMembers: true}
	}
	if wait := m.coolDown(g, spec); wait > 0 {
		return admission{wait: fmt.Sprintf("gang %s: its reservation timed out; it plans again in %s so that other waiting gangs get the capacity first",
			g.key, wait.Truncate(time.Second)+time.Second)}
	}
	req := quorumRequests(members)
	if why := m.queueWait(g, p, req); why != "" {
		return admission{wait: why, want: req}
	}
	toPlace := m.planMembers(members, offered)
	in, plan, heldBy := m.planQuorum(g, toPlace, everyOther(g.key))
	if plan.OK {
		return admission{reserve: m.newReservation(g, spec, members, plan.Nodes), node: plan.Nodes[0]}
	}
	// Free capacity is not enough: take over lower-priority reservations, or else evict
	// lower-priority pods, whichever makes the whole quorum fit.
	if yield, taken := m.planTakeover(g, toPlace); taken.OK {
		return admission{reserve: m.newReservation(g, spec, members, taken.Nodes), node: taken.Nodes[0], yield: yield}
	}
	// Then evict, the cheapest first: other gangs' members beyond their quorums, lower-priority
	// pods, and what other queues hold above their fair share.
	evicting := func(victims []victimUnit, freed placement.Plan, cause evictCause) admission {
		return admission{reserve: m.newReservation(g, spec, members, freed.Nodes), node: freed.Nodes[0], evict: victims, cause: cause}
	}
	if m.mayTakeBackExtras(g) {
		if victims, freed := m.planTakeBack(g, toPlace); freed.OK {
			return evicting(victims, freed, evictCause{kind: forQuorum})
		}
	}
	if m.mayPreempt(g) && !m.cfg.NoPriorityPreemption {
		if victims, freed := m.planPreemption(g, toPlace); freed.OK {
			return evicting(victims, freed, evictCause{kind: byPriority})
		}
	}
	if m.mayReclaim(g, p) {
		if victims, freed, _ := m.planReclaim(g, p.queue, req, toPlace); freed.OK {
			return evicting(victims, freed, evictCause{kind: forQueue, queue: p.queue})
		}
	}
	why := m.shortfall(g, in, plan, heldBy)
	if h := m.liveHold(g.key); h != nil {
		return admission{wait: m.holdWords(g, h, why), want: req}
	}
	if h := m.planHold(g, members, toPlace); h != nil {
		return admission{wait: m.holdWords(g, h, why), hold: h, want: req}
	}
	return admission{wait: why, want: req}
}

// shortfall says why a quorum plan on free capacity failed: the required tier no domain holds,
// or what the members lack.
func (m *Manager) shortfall(g *gangInfo, in placement.Input, plan placement.Plan, heldBy map[string]placement.Resources) string {
	if why := m.requiredTierWait(g, in); why != "" {
		return why
	}
	return placement.Explain(g.key, in, plan.Failed, heldBy)
}

// planQuorum places members beside bound pods and the reservations the view respects; heldBy is
// what those hold per gang, for the reason the gang waits.
func (m *Manager) planQuorum(g *gangInfo, members []placement.Member, v view) (placement.Input, placement.Plan, map[string]placement.Resources) {
	return m.planQuorumFreed(g, members, v, nil)
}

// planQuorumFreed is planQuorum as if freed (per node) were given back by pods about to go.
func (m *Manager) planQuorumFreed(g *gangInfo, members []placement.Member, v view, freed map[string]placement.Resources) (placement.Input, placement.Plan, map[string]placement.Resources) {
	held, heldBy := m.book.held(v)
	for node, r := range freed {
		held[node] = held[node].Sub(r)
	}
	in := m.planView(g, held, nil)
	in.Members = members
	return in, m.placeQuorum(g, in), heldBy
}

// quorumMembers are the members a new reservation is for: the one at filter first, then the
// oldest others that can come to claim a place, as many as the quorum still needs (first those
// of tasks short of their minimum, then any). Too few gives the reason the gang waits instead.
func quorumMembers(p *podInfo, g *gangInfo, spec *gangspec.Spec) (members []*podInfo, wait string) {
	t := g.counted(spec)
	t.add(p)
	members = []*podInfo{p}
	var candidates []*podInfo
	gated := 0
	for _, q := range g.sortedMembers() {
		switch {
		case q == p || q.spec == nil || q.holds() || q.terminal:
		case gangspec.Disagreement(q.key(), q.spec, spec, p.key()) != nil || q.priority != p.priority:
			// Rejected at its own filter: it never comes to claim a place held for it.
		case q.gated:
			gated++
		default:
			candidates = append(candidates, q)
		}
	}
	taken := make([]bool, len(candidates))
	for i, q := range candidates {
		if t.short(q, spec) {
			t.add(q)
			members, taken[i] = append(members, q), true
		}
	}
	for i, q := range candidates {
		if !taken[i] && t.total < spec.MinAvailable {
			t.add(q)
			members = append(members, q)
		}
	}
	if t.meets(spec) {
		return members, ""
	}
	wait = fmt.Sprintf("gang %s: waiting for members: %d of min-available %d exist%s", g.key, t.total+gated, spec.MinAvailable, t.tasksLacking(spec))
	if gated > 0 {
		wait += fmt.Sprintf(", %d of them held by scheduling gates", gated)
	}
	return nil, wait
}

// newReservation is a reservation of members[i] on nodes[i]; the first member, the one at filter,
// holds its slot already.
func (m *Manager) newReservation(g *gangInfo, spec *gangspec.Spec, members []*podInfo, nodes []string) *reservation {
	now := m.now()
	res := &reservation{gang: g.key, priority: g.priority(), queue: members[0].queue, created: now, expires: now.Add(m.waitingTime(spec)), done: make(chan struct{})}
	for i, q := range members {
		s := &slot{plannedFor: q.uid, node: nodes[i], requests: q.requests, state: slotPlanned}
		if i == 0 {
			s.pod, s.state = q, slotReserved
		}
		res.slots = append(res.slots, s)
	}
	return res
}

// admitToReservation decides for a member whose gang already holds a reservation.
func (m *Manager) admitToReservation(p *podInfo, g *gangInfo, res *reservation, offered []string) admission {
	allowed := nodeSet(offered)
	s, join := res.slotOf(p.uid), false
	if s == nil && res.state == reserving {
		s = res.claimable(p)
	}
	if s == nil {
		// A member beyond the plan (total-number above min-available) joins the reservation when
		// free capacity holds it, beside the quorums of waiting gangs at its priority or above;
		// otherwise it waits to schedule as an ordinary pod after quorum.
		protect, _ := m.protectedQuorums(g.key, g.priority())
		node := m.bestFreeNode(p.requests, g, allowed, nil, protect)
		if node == "" || res.state != reserving {
			return admission{wait: fmt.Sprintf("gang %s: its %d reserved places are taken by other members, and members beyond its quorum leave free capacity to the quorums of waiting gangs; this member schedules once the gang is bound",
				g.key, len(res.slots))}
		}
		s, join = &slot{plannedFor: p.uid, node: node, requests: p.requests, state: slotPlanned}, true
	}
	if allowed[s.node] {
		return admission{slot: s, join: join, node: s.node}
	}
	// The scheduler's own filters rule the reserved node out for this pod (taints, affinity,
	// ports: things lockstep does not model). Move the slot if another offered node has room.
	if s.state > slotReserved {
		return admission{slot: s, wait: fmt.Sprintf("gang %s: member %s is waiting for quorum on node %s, which the scheduler no longer offers", g.key, p.key(), s.node)}
	}
	moveTo := m.bestFreeNode(p.requests, g, allowed, s, nil)
	if moveTo == "" {
		return admission{slot: s, wait: fmt.Sprintf("gang %s: member %s's reserved node %s is ruled out by the scheduler's other filters and no offered node has room for %s",
			g.key, p.key(), s.node, p.requests)}
	}
	return admission{slot: s, join: join, node: moveTo}
}

// applyAdmission makes a decision true: it books the new reservation, or gives the member its
// slot, and records why the gang waits.
func (m *Manager) applyAdmission(p *podInfo, g *gangInfo, res *reservation, a admission, fx *effects) {
	if a.slot != nil {
		if a.join {
			res.slots = append(res.slots, a.slot)
		}
		if a.slot.state == slotPlanned {
			if a.slot.plannedFor != p.uid {
				// Another member takes the place: the one it was planned for is no longer
				// expected there.
				m.withdrawLocked(a.slot)
			}
			res.take(a.slot, p)
		}
		if a.node != "" && a.node != a.slot.node {
			// Moved only while reserved: a committing binding reads its slot's node unlocked.
			a.slot.node = a.node
			m.withdrawLocked(a.slot)
		}
	}
	switch {
	case a.wait != "":
		g.lastReason = a.wait
		g.attempts++
		g.lackedMembers = g.lackedMembers || a.lacksMembers
		g.turnedAway = m.now()
		if a.hold != nil {
			m.holdLocked(g, a.hold, a.wait)
		}
		if !a.want.IsZero() {
			m.wantLocked(g, p, a.want)
		}
		fx.podEvent(p, corev1.EventTypeWarning, wellknown.ReasonGangWaiting, a.wait)
	case a.reserve != nil:
		r := a.reserve
		for _, y := range a.yield {
			m.yieldLocked(y, "gang "+g.key, r.priority, fx)
		}
		if h := m.liveHold(g.key); h != nil {
			m.book.release(h) // the quorum fits: the hold has done its job
		}
		m.book.add(r, r.expires.Sub(r.created))
		m.unwantLocked(g.key)
		// Should this reservation go without binding, the gang waits again from now.
		g.reservation, g.timedOut, g.waitingSince, g.takenBy = r, false, r.created, ""
		g.arrivals.gathered = 0 // should it lack members again, it may gather again
		need := len(r.slots)
		g.lastReason = fmt.Sprintf("gang %s: %d %s reserved until %s; waiting for them to reach bind%s",
			g.key, need, plural(need, "member", "members"), r.expires.UTC().Format("15:04:05"), takenFrom(a.yield))
		klog.V(2).InfoS("Gang reserved", "gang", g.key, "slots", need, "expires", r.expires)
		fx.podEvent(p, corev1.EventTypeNormal, wellknown.ReasonGangReserved, g.lastReason)
		if len(a.evict) > 0 {
			m.preemptLocked(g, r, a.evict, a.cause, fx)
		} else {
			// Not while evicting: nominated to nodes still taken by the pods going, members
			// would fail there first and then filter every node anyway. Nor recalled: the
			// victims' deletions bring them back.
			m.nominateLocked(r)
			m.noteParkedLocked(r)
		}
	}
}

// answer is the decision as the scheduler reads it.
func (a admission) answer(offered []string) FilterResult {
	if a.wait != "" {
		return failAll(offered, a.wait)
	}
	return passOnly(a.node)
}

// bestFreeNode picks, among allowed nodes, where req fits beside bound pods, other gangs'
// reservations, the gang's own slots other than skip and what protect sets aside; the planner's
// packing rules choose.
func (m *Manager) bestFreeNode(req placement.Resources, g *gangInfo, allowed map[string]bool, skip *slot, protect map[string]placement.Resources) string {
	held, _ := m.book.held(everyOther(g.key))
	for node, r := range protect {
		held[node] = held[node].Add(r)
	}
	if res := m.liveReservation(g.key); res != nil {
		for _, s := range res.slots {
			if s != skip && s.holdsCapacity() {
				held[s.node] = held[s.node].Add(s.requests)
			}
		}
	}
	in := m.planView(g, held, allowed)
	in.Members = []placement.Member{{Requests: req, Allowed: allowed}}
	plan := placement.Place(in)
	if !plan.OK {
		return ""
	}
	return plan.Nodes[0]
}

// planView is the planner's picture of the cluster for one gang: every schedulable node (of only,
// when given) with what it has left after bound pods and held, and the nodes already holding the
// gang's bound members.
func (m *Manager) planView(g *gangInfo, held map[string]placement.Resources, only map[string]bool) placement.Input {
	in := placement.Input{Free: make(map[string]placement.Resources, len(m.ledger.nodes)), GangNodes: map[string]bool{}}
	for name, n := range m.ledger.nodes {
		if n.known && !n.unschedulable && (only == nil || only[name]) {
			in.Free[name] = n.free().Sub(held[name])
		}
	}
	for _, q := range g.members {
		if q.holds() {
			in.GangNodes[q.node] = true
		}
	}
	memo := &scoreMemo{} // one plan scores every node per member; most share a state
	in.NodeScore = func(node string, req placement.Resources) int {
		return memo.gpuScore(m.ledger.nodes[node], req.GPU, held[node].GPU)
	}
	return in
}

func plural(n int, one, many string) string {
	if n == 1 {
		return one
	}
	return many
}
