package gang

import (
	"sort"

	"github.com/lockstep-sched/lockstep/gangspec"
	"github.com/lockstep-sched/lockstep/placement"
)

// Quorums before extras. A gang's members beyond its min-available (its extras: the workers an
// elastic job runs above its minimum) use capacity another gang of equal or higher priority may
// need for its quorum. Extras that reach filter while such a quorum waits leave room for it
// (protectedQuorums); but a user's jobs arrive milliseconds apart, and the scheduler binds the
// first job's extras before the next job's pods exist. So a gang whose quorum fits neither on
// free capacity nor by taking over lower-priority reservations takes extras back: it evicts
// bound members beyond their gang's quorum, of gangs of equal or lower priority, the youngest
// first, never a member a gang needs for its quorum (task minimums included), and only once a
// dry run shows its quorum then fits. Volcano's gang plugin likewise lets preemption take only
// tasks above minAvailable.
//
// The cost to an elastic job is the work its youngest extras did: its controller recreates
// them, and they wait as extras. They never take back in turn (only a gang short of its quorum
// does), so nothing ping-pongs. A member annotated lockstep.dev/keep-extras: "true" is never
// taken, and --take-back-extras=false turns the rule off.

// mayTakeBackExtras reports whether the gang may evict other gangs' extras for its quorum.
func (m *Manager) mayTakeBackExtras(g *gangInfo) bool {
	return !m.cfg.NoExtrasTakeBack && m.mayPreempt(g)
}

// extrasLocked lists the extras a gang at prio may take back, the cheapest first: the lowest
// priority, then the youngest. Where team queues are enforced it takes only inside its own queue,
// as priority preemption does: capacity moves between queues by their shares (reclaim.go).
func (m *Manager) extrasLocked(own *gangInfo, prio int32) []victimUnit {
	ownQueue, queues := own.oldest().queue, m.ledger.quota.Enforcing()
	var units []victimUnit
	for key, g := range m.ledger.gangs {
		if key == own.key || g.priority() > prio {
			continue
		}
		for _, p := range m.extrasOf(g) {
			if !queues || p.queue == "" || p.queue == ownQueue {
				units = append(units, victimUnit{pods: []*podInfo{p}, gang: key, extra: true, prio: p.priority, started: p.created})
			}
		}
	}
	sort.Slice(units, func(i, j int) bool { return cheaperExtra(units[i], units[j]) })
	return units
}

// cheaperExtra orders extras by priority, then the youngest first. Creation times tie within a
// second, and a controller makes its replicas in order, so the later name goes first: an elastic
// job, like a StatefulSet, loses its highest-numbered workers.
func cheaperExtra(a, b victimUnit) bool {
	if a.prio != b.prio {
		return a.prio < b.prio
	}
	if !a.started.Equal(b.started) {
		return a.started.After(b.started)
	}
	an, bn := a.pods[0].name, b.pods[0].name
	if len(an) != len(bn) {
		return len(an) > len(bn) // worker-10 after worker-9
	}
	return an > bn
}

// extrasOf are the gang's bound members it can lose and still hold its quorum, the youngest
// first. Members opted out, already going, or whose eviction was refused lately stay, and count
// toward the quorum. A gang that bound members never count for (only-waiting) has no extras.
func (m *Manager) extrasOf(g *gangInfo) []*podInfo {
	spec, _ := g.reference()
	if spec == nil || spec.Policy == gangspec.OnlyWaiting {
		return nil
	}
	var staying []*podInfo
	var t tally
	for _, p := range g.members {
		if p.holds() && !p.going() {
			staying = append(staying, p)
			t.add(p)
		}
	}
	if len(staying) <= spec.MinAvailable {
		return nil
	}
	sort.Slice(staying, func(i, j int) bool { return olderThan(staying[j], staying[i]) })
	var out []*podInfo
	for _, p := range staying {
		if p.keepExtras || m.evictRefusedLately(p) {
			continue
		}
		if t.remove(p); t.meets(spec) {
			out = append(out, p)
			continue
		}
		t.add(p)
	}
	return out
}

// planTakeBack chooses the extras to evict so that the gang's quorum fits, and the plan that then
// places it; plan.OK is false when taking back every extra is not enough. It evicts the shortest
// run of candidates, cheapest first, that makes the quorum fit, then puts back every one the plan
// does without, the most valuable first.
func (m *Manager) planTakeBack(g *gangInfo, members []placement.Member) ([]victimUnit, placement.Plan) {
	candidates := m.extrasLocked(g, g.priority())
	base, v := m.alreadyFreeing(), everyOther(g.key)
	fitsWith := func(n int) placement.Plan {
		_, plan, _ := m.planQuorumFreed(g, members, v, base.with(candidates[:n], -1))
		return plan
	}
	all := placement.Plan{}
	if len(candidates) > 0 {
		all = fitsWith(len(candidates))
	}
	if !all.OK {
		return nil, all
	}
	// Freeing more rarely makes a quorum fit less, so the shortest run is found by halving; the
	// planner is a heuristic, though, and a run it fails falls back to every candidate.
	n := sort.Search(len(candidates), func(n int) bool { return fitsWith(n + 1).OK }) + 1
	if plan := fitsWith(n); plan.OK {
		return m.putBackSpared(g, members, candidates[:n], plan)
	}
	return m.putBackSpared(g, members, candidates, all)
}
