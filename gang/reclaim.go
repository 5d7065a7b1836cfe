package gang

import (
	"sort"

	"github.com/lockstep-sched/lockstep/placement"
	"github.com/lockstep-sched/lockstep/quota"
)

// Reclaim (Config.QueueReclaim): a gang whose queue is below its fair share, and whose quorum
// fits neither free capacity nor by taking over or preempting inside its own queue, takes
// capacity back from queues above their share. Unlike Volcano's task-by-task reclaim (#4607,
// #4950) it never cuts a gang below its quorum: a victim is a member beyond its gang's
// min-available (the youngest first), or a gang whole once none of its extras is left; and it
// evicts only after a dry run shows the waiting quorum then fits. Package quota says how much
// each queue may lose: never below its share, guarantee or min, and only from queues that let
// others reclaim.

// reclaimUnit is a victimUnit of reclaim, with the queue it is taken from.
type reclaimUnit struct {
	victimUnit
	queue string
	// core: the members of a gang that has extras (victimUnit.extra) other than those, which
	// may go only after every one of them.
	core bool
}

func (u reclaimUnit) requests() placement.Resources { return quorumRequests(u.pods) }

// reclaimUnitsLocked lists what a gang of queue may reclaim from other queues, cheapest first:
// lowest priority, then members beyond quorum before whole gangs, then the youngest.
func (m *Manager) reclaimUnitsLocked(queue string) []reclaimUnit {
	var units []reclaimUnit
	gangs := map[string][]*podInfo{}
	spoiled := map[string]bool{}
	for _, p := range m.ledger.pods {
		if !p.holds() || p.queue == "" || p.queue == queue {
			continue
		}
		ok := !p.going() && !m.evictRefusedLately(p)
		key := gangKeyOf(p)
		switch {
		case key == "" && ok:
			units = append(units, reclaimUnit{victimUnit: victimUnit{pods: []*podInfo{p}, prio: p.priority, started: p.created}, queue: p.queue})
		case key != "" && !ok:
			spoiled[key] = true
		case key != "":
			gangs[key] = append(gangs[key], p)
		}
	}
	for key, pods := range gangs {
		if !spoiled[key] {
			units = append(units, m.gangReclaimUnits(key, pods)...)
		}
	}
	sort.Slice(units, func(i, j int) bool { return reclaimFirst(units[i], units[j]) })
	return units
}

// gangReclaimUnits splits a gang's bound members into its extras, one unit each, youngest
// first, and the rest; without extras the gang is one unit.
func (m *Manager) gangReclaimUnits(key string, pods []*podInfo) []reclaimUnit {
	sort.Slice(pods, func(i, j int) bool { return olderThan(pods[i], pods[j]) })
	need := 0
	if g := m.ledger.gangs[key]; g != nil {
		need = g.minAvailable()
	}
	extras := max(len(pods)-max(need, 1), 0)
	core := pods[:len(pods)-extras]
	var out []reclaimUnit
	for _, p := range pods[len(pods)-extras:] {
		out = append(out, reclaimUnit{victimUnit: victimUnit{pods: []*podInfo{p}, gang: key, extra: true, prio: p.priority, started: p.created}, queue: p.queue})
	}
	whole := reclaimUnit{victimUnit: victimUnit{pods: core, gang: key, prio: core[0].priority}, queue: core[0].queue, core: extras > 0}
	for _, p := range core {
		if p.created.After(whole.started) {
			whole.started = p.created
		}
	}
	return append(out, whole)
}

func reclaimFirst(a, b reclaimUnit) bool {
	if a.prio != b.prio {
		return a.prio < b.prio
	}
	if a.extra != b.extra {
		return a.extra
	}
	return preferredVictim(a.victimUnit, b.victimUnit)
}

// planReclaim chooses what to take back from other queues so that the gang's quorum, asking
// req in its queue, fits; plan.OK is false, with why, when it may not or cannot.
func (m *Manager) planReclaim(g *gangInfo, queue string, req placement.Resources, members []placement.Member) ([]victimUnit, placement.Plan, string) {
	rc, why := m.ledger.quota.StartReclaim(quota.Question{Queue: queue, Gang: g.key, Request: req,
		Held: m.queueHeldBesides(g.key), Capacity: m.ledger.queueCapacity()})
	if rc == nil {
		return nil, placement.Plan{}, why
	}
	base, v := m.alreadyFreeing(), everyOther(g.key)
	var chosen []reclaimUnit
	extrasLeft := map[string]int{}
	units := m.reclaimUnitsLocked(queue)
	for _, u := range units {
		if u.extra {
			extrasLeft[u.gang]++
		}
	}
	var plan placement.Plan
	for _, u := range units {
		if (u.core && extrasLeft[u.gang] > 0) || !rc.MayTake(u.queue, u.requests()) {
			continue
		}
		rc.Take(u.queue, u.requests())
		chosen = append(chosen, u)
		if u.extra {
			extrasLeft[u.gang]--
		}
		if _, plan, _ = m.planQuorumFreed(g, members, v, base.with(victimsOf(chosen), -1)); plan.OK {
			break
		}
	}
	if !plan.OK {
		return nil, plan, "taking back what other queues hold above their fair share would not be enough"
	}
	chosen, plan = m.keepWhatReclaimSpares(g, members, chosen, plan, rc)
	return victimsOf(chosen), plan, ""
}

// keepWhatReclaimSpares puts back every chosen unit the plan does without, most valuable first;
// a gang's extra stays taken while its core is.
func (m *Manager) keepWhatReclaimSpares(g *gangInfo, members []placement.Member, chosen []reclaimUnit, plan placement.Plan, rc *quota.Reclaim) ([]reclaimUnit, placement.Plan) {
	sort.Slice(chosen, func(i, j int) bool { return keepFirst(chosen[i].victimUnit, chosen[j].victimUnit) })
	base, v := m.alreadyFreeing(), everyOther(g.key)
	coreTaken := map[string]bool{}
	for _, u := range chosen {
		coreTaken[u.gang] = coreTaken[u.gang] || u.core
	}
	for i := 0; i < len(chosen); {
		u := chosen[i]
		if u.extra && coreTaken[u.gang] {
			i++
			continue
		}
		if _, p, _ := m.planQuorumFreed(g, members, v, base.with(victimsOf(chosen), i)); p.OK {
			plan = p
			rc.Give(u.queue, u.requests())
			chosen = append(chosen[:i], chosen[i+1:]...)
			if u.core {
				coreTaken[u.gang] = false
			}
			continue
		}
		i++
	}
	return chosen, plan
}

func victimsOf(units []reclaimUnit) []victimUnit {
	out := make([]victimUnit, len(units))
	for i, u := range units {
		out[i] = u.victimUnit
	}
	return out
}

// mayReclaim reports whether the gang may take capacity back for its queue: reclaim is on, the
// gang is in an enforced queue, and its members may evict at all.
func (m *Manager) mayReclaim(g *gangInfo, p *podInfo) bool {
	return m.cfg.QueueReclaim && p.queue != "" && m.ledger.quota.Enforcing() && m.mayPreempt(g)
}
