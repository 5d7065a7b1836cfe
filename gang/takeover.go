package gang

import (
	"fmt"
	"strings"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/klog/v2"

	"github.com/lockstep-sched/lockstep/placement"
	"github.com/lockstep-sched/lockstep/wellknown"
)

// A reservation is a plan, not a binding: work of higher priority may take its capacity. A gang
// whose quorum does not fit only because lower-priority gangs hold reservations takes them over
// (planTakeover); an ordinary pod, or a member of a gang past quorum, passes filter where only
// such reservations stand in its way and takes them over at bind (takeNodeLocked). Equal priority
// never takes over: first come, first served. And nothing is released unless the taker then fits
// whole, so two gangs cannot take capacity back and forth.

// planTakeover finds the fewest lower-priority reservations whose release lets the gang's quorum
// fit: the lowest priority (then the newest) are added until the plan fits, then each is put back
// if the plan fits without releasing it. plan.OK is false when releasing them all is not enough.
func (m *Manager) planTakeover(g *gangInfo, members []placement.Member) (yield []*reservation, plan placement.Plan) {
	candidates := m.book.yielding(g.key, g.priority())
	v := everyOther(g.key)
	v.released = map[*reservation]bool{}
	for _, r := range candidates {
		v.released[r] = true
		if _, plan, _ = m.planQuorum(g, members, v); plan.OK {
			break
		}
	}
	if !plan.OK {
		return nil, plan
	}
	for i := len(candidates) - 1; i >= 0; i-- {
		r := candidates[i]
		if !v.released[r] {
			continue
		}
		delete(v.released, r)
		if _, p, _ := m.planQuorum(g, members, v); p.OK {
			plan = p
			continue
		}
		v.released[r] = true
	}
	for _, r := range candidates {
		if v.released[r] {
			yield = append(yield, r)
		}
	}
	return yield, plan
}

// takeNodeLocked makes room on node for p, about to bind there: filter let it pass lower-priority
// reservations (filterFree), and here they are given up, lowest priority first, until p fits
// beside what stays held.
func (m *Manager) takeNodeLocked(p *podInfo, node string, fx *effects) {
	n, ok := m.ledger.nodes[node]
	if !ok {
		return
	}
	own := gangKeyOf(p)
	fits := func() bool {
		held, _ := m.book.held(everyOther(own))
		ok, _ := p.requests.FitsIn(n.free().Sub(held[node]))
		return ok
	}
	// The usual bind fits beside every reservation: one look at the book, and nothing to sort.
	if fits() {
		return
	}
	for _, r := range m.book.yielding(own, p.priority) {
		if !r.holdsOn(node) {
			continue
		}
		m.yieldLocked(r, "pod "+p.key(), p.priority, fx)
		if fits() {
			return
		}
	}
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
		if !p.holds() && !p.terminal {
			fx.podEvent(p, corev1.EventTypeWarning, wellknown.ReasonGangReservationYielded, g.lastReason)
		}
	}
	m.wakeLocked(g, wellknown.ConditionReasonReservationYielded, g.lastReason, fx)
}

// takenFrom words, for the taker's reason, whose reservations it took over; "" for none.
func takenFrom(yield []*reservation) string {
	if len(yield) == 0 {
		return ""
	}
	names := make([]string, len(yield))
	for i, r := range yield {
		names[i] = fmt.Sprintf("%s (priority %d)", r.gang, r.priority)
	}
	return "; took over the reservations of lower-priority " + plural(len(yield), "gang ", "gangs ") + strings.Join(names, ", ")
}

// startBinding counts an ordinary bind on its way to node; endBinding, once it is answered
// (markBound has then counted it, or it failed).
func (l *ledger) startBinding(node string, req placement.Resources) {
	n := l.node(node)
	n.binding = n.binding.Add(req)
}

func (l *ledger) endBinding(node string, req placement.Resources) {
	n := l.node(node)
	n.binding = n.binding.Sub(req)
	l.dropNodeIfUnused(n)
}
