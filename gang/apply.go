package gang

import (
	"fmt"
	"strings"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/klog/v2"

	"github.com/lockstep-sched/lockstep/decide"
	"github.com/lockstep-sched/lockstep/wellknown"
)

// Applying a decision. package decide says what to do, reading the snapshot; the functions here
// make it true in the live state (the ledger, the book, the gang's record) and collect the effects
// to emit once the lock is let go. They expect the manager's lock held for writing.

// applyAdmissionLocked makes an admission true for member p of gang g: it gives the member its
// place in the gang's live reservation, or books the new reservation (taking over the
// reservations it yields to and marking the pods it evicts), or books a starving gang's hold; and
// it records why the gang waits.
func (m *Manager) applyAdmissionLocked(p *podInfo, g *gangInfo, a decide.Admission, fx *effects) {
	if a.Join || a.Slot >= 0 {
		m.takePlaceLocked(p, g, a)
	}
	switch {
	case a.Wait != "":
		g.lastReason = a.Wait
		g.attempts++
		g.lackedMembers = g.lackedMembers || a.LacksMembers
		g.turnedAway = m.now()
		if a.Hold != nil {
			m.holdLocked(g, a.Hold, a.Wait)
		}
		if !a.Want.IsZero() {
			m.ledger.want(g.key, p.Queue, a.Want)
		}
		fx.podEvent(p, corev1.EventTypeWarning, wellknown.ReasonGangWaiting, a.Wait)
	case a.Reserve != nil:
		m.reserveLocked(p, g, a, fx)
	}
}

// takePlaceLocked gives the member its place in its gang's live reservation: the slot decided,
// or a new one beyond the plan (Join), moved to the node decided.
func (m *Manager) takePlaceLocked(p *podInfo, g *gangInfo, a decide.Admission) {
	res := m.snapshots.live[g.key]
	var s *slot
	if a.Join {
		s = &slot{plannedFor: p.UID, node: a.Node, requests: p.Requests, state: decide.SlotPlanned}
		res.slots = append(res.slots, s)
		res.changed()
	} else {
		s = res.slots[a.Slot]
	}
	if s.state == decide.SlotPlanned {
		if s.plannedFor != p.UID {
			// Another member takes the place: the one it was planned for is no longer expected
			// there.
			m.nominations.withdraw(s)
		}
		res.take(s, p)
	}
	if a.Node != "" && a.Node != s.node {
		// Moved only while reserved: a committing binding reads its slot's node unlocked.
		s.node = a.Node
		res.changed()
		m.nominations.withdraw(s)
	}
}

// reserveLocked books the gang's new reservation for its quorum, with what it takes over and
// evicts.
func (m *Manager) reserveLocked(p *podInfo, g *gangInfo, a decide.Admission, fx *effects) {
	r := newReservation(a.Reserve, p)
	for _, y := range a.Yield {
		if taken := m.snapshots.live[y.Gang]; taken != nil {
			m.yieldLocked(taken, "gang "+g.key, r.priority, fx)
		}
	}
	if h := m.book.hold(g.key); h != nil {
		m.book.release(h) // the quorum fits: the hold has done its job
	}
	m.book.add(r, r.expires.Sub(r.created))
	m.ledger.quota.Unwant(g.key)
	// Should this reservation go without binding, the gang waits again from now.
	h := g.History
	h.TimedOut, h.WaitingSince = false, r.created
	m.ledger.setHistory(g, h)
	g.reservation, g.takenBy = r, ""
	g.arrivals.gathered = 0 // should it lack members again, it may gather again
	g.lastReason = a.Reserved
	klog.V(2).InfoS("Gang reserved", "gang", g.key, "slots", len(r.slots), "expires", r.expires)
	fx.podEvent(p, corev1.EventTypeNormal, wellknown.ReasonGangReserved, g.lastReason)
	if len(a.Evict) > 0 {
		m.preemptLocked(g, r, a, fx)
		return
	}
	// Not while evicting: nominated to nodes still taken by the pods going, members would fail
	// there first and then filter every node anyway. Nor recalled: the victims' deletions bring
	// them back.
	m.nominations.nominate(r)
	m.wake.noteParked(r)
}

// holdLocked books a starving gang's hold; reason is why the gang waits, the hold included.
func (m *Manager) holdLocked(g *gangInfo, plan *decide.Reservation, reason string) {
	res := newReservation(plan, nil)
	m.book.add(res, res.expires.Sub(res.created))
	g.lastReason = reason
	klog.InfoS("Starving gang holds capacity", "gang", g.key, "slots", len(res.slots), "waited", m.now().Sub(g.view().WaitedSince()))
}

// yieldLocked releases a reservation to higher-priority work (taker, at priority): its held binds
// fail saying who took the capacity, its members are told, and its gang plans again.
func (m *Manager) yieldLocked(r *reservation, taker string, priority int32, fx *effects) {
	r.yieldedTo = fmt.Sprintf("%s (priority %d)", taker, priority)
	m.book.release(r)
	m.metrics.observeYield()
	g, ok := m.ledger.gangs[r.gang]
	if !ok {
		return
	}
	fx.touched(g.key)
	g.takenBy = fmt.Sprintf("%s, at %s", r.yieldedTo, m.now().UTC().Format("15:04:05"))
	g.lastReason = fmt.Sprintf("gang %s: its reservation (priority %d) was given up to higher-priority %s; it plans again",
		g.key, r.priority, r.yieldedTo)
	klog.InfoS("Gang reservation yielded", "gang", g.key, "priority", r.priority, "to", r.yieldedTo)
	for _, p := range g.sortedMembers() {
		if !p.Holds() && !p.Terminal {
			fx.podEvent(p, corev1.EventTypeWarning, wellknown.ReasonGangReservationYielded, g.lastReason)
		}
	}
	m.wake.gang(g, wellknown.ConditionReasonReservationYielded, g.lastReason, fx)
}

// preemptLocked records a preemption the gang's new reservation r depends on: the reasons, the
// Events naming victims and preemptor to each other, and the evictions to make.
func (m *Manager) preemptLocked(g *gangInfo, r *reservation, a decide.Admission, fx *effects) {
	g.lastReason = a.Preempting
	names := make([]string, len(a.Evict))
	e := eviction{preemptor: g, res: r, cause: a.Cause}
	for i, u := range a.Evict {
		names[i] = fmt.Sprintf("%s (priority %d)", u.Name(), u.Priority)
		v := victim{gang: u.Gang, extra: u.Extra}
		for _, q := range u.Pods {
			if p := m.ledger.pods[q.UID]; p != nil {
				m.ledger.setEvicting(p, true)
				fx.podEvent(p, corev1.EventTypeWarning, wellknown.ReasonPreempted, u.Why)
			}
			v.pods = append(v.pods, podRef{namespace: q.Namespace, name: q.Name, uid: q.UID})
		}
		e.victims = append(e.victims, v)
	}
	klog.InfoS("Gang preempting", "gang", g.key, "priority", r.priority, "victims", strings.Join(names, ", "), "cause", a.Cause.Kind, "queue", a.Cause.Queue)
	for _, s := range r.slots {
		if s.pod != nil {
			fx.podEvent(s.pod, corev1.EventTypeNormal, wellknown.ReasonGangPreempting, g.lastReason)
		}
	}
	fx.evictions = append(fx.evictions, e)
}
