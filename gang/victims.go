package gang

import (
	"sort"
	"time"

	corev1 "k8s.io/api/core/v1"

	"github.com/lockstep-sched/lockstep/gangspec"
	"github.com/lockstep-sched/lockstep/placement"
)

// Gang preemption: when a gang's quorum fits neither on free capacity nor by taking over
// lower-priority reservations, lockstep looks for bound pods of lower priority whose eviction
// would let it fit. It evicts whole units only: an ordinary pod, or every bound member of a gang,
// never some of them. It prefers the lowest priority, then the fewest pods, then the least work
// lost (the units started last), and puts back every unit the plan turns out not to need.

// victimUnit is what lockstep evicts as one.
type victimUnit struct {
	pods []*podInfo
	// gang is the key of the gang the pods form; "" for an ordinary pod.
	gang string
	// extra: the unit is one member beyond its gang's quorum, not the gang (reclaim.go).
	extra bool
	prio  int32
	// started is when the unit's newest pod was created: the later, the less work is lost.
	started time.Time
}

func (u victimUnit) name() string {
	if u.extra {
		return "pod " + u.pods[0].key() + " beyond gang " + u.gang + "'s quorum"
	}
	if u.gang != "" {
		return "gang " + u.gang
	}
	return "pod " + u.pods[0].key()
}

// victimUnitsLocked lists what a gang at prio may preempt: bound pods of lower priority, a gang's
// bound members as one unit. Pods already going and pods whose eviction was refused lately are
// left out, and so is a gang with any member lockstep may not evict. Where team queues are
// enforced, priority preempts only inside the gang's own queue (and pods of no queue), as
// Volcano's preempt action does: capacity moves between queues by their shares (reclaim.go),
// not by priority.
func (m *Manager) victimUnitsLocked(own string, prio int32) []victimUnit {
	byGang := map[string]*victimUnit{}
	var units []victimUnit
	spoiled := map[string]bool{}
	ownQueue, queues := "", m.ledger.quota.Enforcing()
	if g := m.ledger.gangs[own]; g != nil && g.oldest() != nil {
		ownQueue = g.oldest().queue
	}
	for _, p := range m.ledger.pods {
		key := gangKeyOf(p)
		if !p.holds() || key == own || (queues && p.queue != "" && p.queue != ownQueue) {
			continue
		}
		ok := p.priority < prio && !p.going() && !m.evictRefusedLately(p)
		switch {
		case key == "" && ok:
			units = append(units, victimUnit{pods: []*podInfo{p}, prio: p.priority, started: p.created})
		case key != "" && !ok:
			spoiled[key] = true
		case key != "":
			u := byGang[key]
			if u == nil {
				u = &victimUnit{gang: key, prio: p.priority}
				byGang[key] = u
			}
			u.pods = append(u.pods, p)
			if p.created.After(u.started) {
				u.started = p.created
			}
		}
	}
	for key, u := range byGang {
		if !spoiled[key] {
			units = append(units, *u)
		}
	}
	sort.Slice(units, func(i, j int) bool { return preferredVictim(units[i], units[j]) })
	return units
}

func preferredVictim(a, b victimUnit) bool {
	if a.prio != b.prio {
		return a.prio < b.prio
	}
	if len(a.pods) != len(b.pods) {
		return len(a.pods) < len(b.pods)
	}
	if !a.started.Equal(b.started) {
		return a.started.After(b.started)
	}
	return a.name() < b.name()
}

// keepFirst orders victims for putting back: the most valuable first (highest priority, most
// pods, least capacity freed, most work done), so that the set left is cheap and small.
func keepFirst(a, b victimUnit) bool {
	if a.prio != b.prio {
		return a.prio > b.prio
	}
	if len(a.pods) != len(b.pods) {
		return len(a.pods) > len(b.pods)
	}
	if ga, gb := a.gpus(), b.gpus(); ga != gb {
		return ga < gb
	}
	if !a.started.Equal(b.started) {
		return a.started.Before(b.started)
	}
	return a.name() < b.name()
}

func (u victimUnit) gpus() int64 {
	var n int64
	for _, p := range u.pods {
		n += p.requests.GPU
	}
	return n
}

// freeing is what pods already being deleted will give back, per node, and what evicting units
// adds to it.
type freeing map[string]placement.Resources

func (m *Manager) alreadyFreeing() freeing {
	out := freeing{}
	for _, p := range m.ledger.pods {
		if p.holds() && p.going() {
			out[p.node] = out[p.node].Add(p.requests)
		}
	}
	return out
}

func (f freeing) with(units []victimUnit, skip int) map[string]placement.Resources {
	out := make(map[string]placement.Resources, len(f))
	for node, r := range f {
		out[node] = r
	}
	for i, u := range units {
		if i == skip {
			continue
		}
		for _, p := range u.pods {
			out[p.node] = out[p.node].Add(p.requests)
		}
	}
	return out
}

// planPreemption chooses the units to evict so that the gang's quorum fits, and the plan that
// then places it; plan.OK is false when evicting every candidate is not enough. It finds the
// lowest priority level up to which evicting everything is enough, then puts back every unit the
// plan does without, most valuable first.
func (m *Manager) planPreemption(g *gangInfo, members []placement.Member) (victims []victimUnit, plan placement.Plan) {
	candidates := m.victimUnitsLocked(g.key, g.priority())
	base, v := m.alreadyFreeing(), everyOther(g.key)
	n := 0
	for n < len(candidates) && !plan.OK {
		level := candidates[n].prio
		for n < len(candidates) && candidates[n].prio == level {
			n++
		}
		_, plan, _ = m.planQuorumFreed(g, members, v, base.with(candidates[:n], -1))
	}
	if !plan.OK {
		return nil, plan
	}
	return m.putBackSpared(g, members, candidates[:n], plan)
}

// putBackSpared keeps back every chosen victim the quorum's plan does without, the most valuable
// first, so that the set left is cheap and small; plan is the one with every victim gone.
func (m *Manager) putBackSpared(g *gangInfo, members []placement.Member, chosen []victimUnit, plan placement.Plan) ([]victimUnit, placement.Plan) {
	base, v := m.alreadyFreeing(), everyOther(g.key)
	victims := append([]victimUnit(nil), chosen...)
	sort.Slice(victims, func(i, j int) bool { return keepFirst(victims[i], victims[j]) })
	for i := 0; i < len(victims); {
		if _, p, _ := m.planQuorumFreed(g, members, v, base.with(victims, i)); p.OK {
			plan = p
			victims = append(victims[:i], victims[i+1:]...)
			continue
		}
		i++
	}
	return victims, plan
}

// admitForPreemption is kube-scheduler's preemption reaching lockstep for a member of a gang
// without its quorum (its preempt verb): no node passed the scheduler's own filters for the pod,
// so lockstep's filter never saw it. A gang with no reservation is planned here as filter would
// plan it, on free capacity, then by taking over lower-priority reservations, then by evicting
// lower-priority pods, with no node ruled out for the member. The scheduler itself evicts nothing
// for such a pod (see Preempt). A pod deleted meanwhile is not taken back in (takeInFromScheduler).
func (m *Manager) admitForPreemption(pod *corev1.Pod, ms gangspec.Membership) {
	info := newPodInfoOf(pod, ms)
	var fx effects
	m.locked(func() {
		if p, err := m.ledger.takeInFromScheduler(info); err == nil {
			m.admitForPreemptionLocked(p, &fx)
		}
	})
	m.apply(&fx)
}

func (m *Manager) admitForPreemptionLocked(p *podInfo, fx *effects) {
	if g := m.ledger.gangOf(p); g != nil && memberError(p, g) == nil && p.spec != nil &&
		!g.satisfied(p.spec) && m.liveReservation(g.key) == nil {
		fx.touched(g.key)
		m.catchUpExpiryLocked(g, fx)
		m.applyAdmission(p, g, nil, m.admit(p, g, p.spec, nil, nil), fx)
	}
}
