package gang

import (
	"fmt"
	"sort"
	"strings"
	"time"

	"k8s.io/klog/v2"

	"github.com/lockstep-sched/lockstep/placement"
)

// The starvation rule. A big gang waits for its whole quorum to be free at once; a stream of
// small gangs and pods of the same priority takes every bit of capacity as it frees, and the big
// gang could wait forever. So once a gang has waited Config.StarvationThreshold for capacity (and
// its last reservation, if any, did not time out), and
// its quorum fits the cluster's capacity were nothing of lower or equal priority running, lockstep
// holds capacity for it: it picks the nodes where the quorum would go (those with the most free
// now first) and keeps everything that frees there for the gang, until the quorum fits and the
// gang reserves as usual. Only the first starving gang in line holds at a time, so that two holds
// can never each wait for the other. Work of higher priority is not held back: a hold yields to
// it like a reservation. Its bound: the gang binds once the pods running on the held nodes when
// the hold began have finished (or were preempted).

// waitedSince is when the gang began waiting for capacity: its last reservation, or before its
// first its oldest member's creation.
func (g *gangInfo) waitedSince() time.Time {
	if !g.waitingSince.IsZero() || len(g.members) == 0 {
		return g.waitingSince
	}
	return g.oldest().created
}

// starving reports whether the gang has waited past the threshold. A gang whose last reservation
// timed out does not qualify until it reserves again: its members did not all come to bind (one
// the scheduler cannot place, say), and holding capacity for it would starve everyone else.
func (m *Manager) starving(g *gangInfo) bool {
	t := m.cfg.StarvationThreshold
	return t > 0 && !g.timedOut && m.now().Sub(g.waitedSince()) >= t
}

// holdForStarvingLocked gives the first starving gang in line its hold, unless some gang holds
// already. It runs on the expiry sweep's tick as well as at filter: a starving gang's members
// may never reach lockstep's filter (no node has room for one of them in the scheduler's eyes),
// and it is exactly then that the capacity freeing must be held for it.
func (m *Manager) holdForStarvingLocked(fx *effects) {
	if m.cfg.StarvationThreshold <= 0 || !m.anyStarvingLocked() || m.book.holder() != "" {
		return
	}
	for _, w := range m.lineLocked() {
		if !w.waiting || !m.starving(w.g) {
			continue
		}
		toPlace := m.planMembers(w.quorum, nil)
		if h := m.planHold(w.g, w.quorum, toPlace); h != nil {
			in, plan, heldBy := m.planQuorum(w.g, toPlace, everyOther(w.g.key))
			m.holdLocked(w.g, h, m.holdWords(w.g, h, m.shortfall(w.g, in, plan, heldBy)))
			fx.touched(w.g.key)
			return
		}
	}
}

// anyStarvingLocked is the sweep's cheap look before it builds the line, which plans every
// waiting gang's quorum: it runs every tick under the lock, and nearly always finds no one.
func (m *Manager) anyStarvingLocked() bool {
	for key, g := range m.ledger.gangs {
		if spec, _ := g.reference(); spec != nil && !g.satisfied(spec) && m.liveReservation(key) == nil && m.starving(g) {
			return true
		}
	}
	return false
}

// planHold is a hold for a starving gang's quorum, nil when the rule does not apply: the gang is
// not starving, another gang holds already, or the quorum would not fit even then.
func (m *Manager) planHold(g *gangInfo, members []*podInfo, toPlace []placement.Member) *reservation {
	if !m.starving(g) || m.book.holder() != "" || !m.queueMayHold(g, members) {
		return nil
	}
	prio := g.priority()
	in := placement.Input{Free: map[string]placement.Resources{}, GangNodes: map[string]bool{}, Members: toPlace}
	held, _ := m.book.held(above(g.key, prio))
	staying := m.ledger.requestedAbove(prio)
	for name, n := range m.ledger.nodes {
		if n.known && !n.unschedulable {
			in.Free[name] = n.allocatable.Sub(staying[name]).Sub(held[name])
		}
	}
	// Among nodes that would hold it, those with the most free now fill first.
	in.NodeScore = func(node string, _ placement.Resources) int {
		if n := m.ledger.nodes[node]; n != nil {
			return int(n.free().GPU)
		}
		return 0
	}
	plan := m.placeQuorum(g, in)
	if !plan.OK {
		return nil
	}
	now := m.now()
	// It lives one waiting time and is then planned afresh: nodes come and go meanwhile.
	spec, _ := g.reference()
	res := &reservation{gang: g.key, priority: prio, queue: members[0].queue, created: now, expires: now.Add(m.waitingTime(spec)), state: holding, done: make(chan struct{})}
	for i, q := range members {
		res.slots = append(res.slots, &slot{plannedFor: q.uid, node: plan.Nodes[i], requests: q.requests, state: slotPlanned})
	}
	return res
}

// holdWords says, for the gang's reason, why it still waits (shortfall's words) and what the
// hold is: a user reading "holds nodes" alone would not learn what the gang lacks.
func (m *Manager) holdWords(g *gangInfo, res *reservation, why string) string {
	var need, free placement.Resources
	nodes := map[string]bool{}
	for _, s := range res.slots {
		need = need.Add(s.requests)
		nodes[s.node] = true
	}
	names := make([]string, 0, len(nodes))
	for n := range nodes {
		names = append(names, n)
		if node := m.ledger.nodes[n]; node != nil { // a node deleted since the hold was planned
			free = free.Add(node.free())
		}
	}
	sort.Strings(names)
	return fmt.Sprintf("%s; it has waited %s for capacity, past --starvation-threshold %s, so lockstep holds nodes %s for its quorum as capacity frees there (%d of %d nvidia.com/gpu free now), keeping pods of equal or lower priority off it",
		why, m.now().Sub(g.waitedSince()).Round(time.Second), m.cfg.StarvationThreshold, strings.Join(names, ", "), max(free.GPU, 0), need.GPU)
}

// holdLocked books a starving gang's hold; reason is holdWords'.
func (m *Manager) holdLocked(g *gangInfo, res *reservation, reason string) {
	m.book.add(res, res.expires.Sub(res.created))
	g.lastReason = reason
	klog.InfoS("Starving gang holds capacity", "gang", g.key, "slots", len(res.slots), "waited", m.now().Sub(g.waitedSince()))
}

// requestedAbove sums, per node, what bound pods of priority above prio request: what a gang at
// prio cannot count on seeing freed for it.
func (l *ledger) requestedAbove(prio int32) map[string]placement.Resources {
	out := map[string]placement.Resources{}
	for _, p := range l.pods {
		if p.holds() && p.priority > prio {
			out[p.node] = out[p.node].Add(p.requests)
		}
	}
	return out
}

// liveReservation is the gang's reservation for members on their way, nil when it has none; a
// starving gang's hold is not one.
func (m *Manager) liveReservation(key string) *reservation {
	if res := m.book.live(key); res != nil && res.state != holding {
		return res
	}
	return nil
}

// liveHold is the gang's hold under the starvation rule, nil when it has none.
func (m *Manager) liveHold(key string) *reservation {
	if res := m.book.live(key); res != nil && res.state == holding {
		return res
	}
	return nil
}
