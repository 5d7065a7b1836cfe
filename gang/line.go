package gang

import (
	"fmt"
	"sort"
	"time"

	"github.com/lockstep-sched/lockstep/placement"
	"github.com/lockstep-sched/lockstep/quota"

	"github.com/lockstep-sched/lockstep/views"
)

// The line is the order lockstep gives the gangs waiting for capacity: higher priority first,
// then the gang that has waited longer (its oldest member was created earlier), the order
// kube-scheduler's own queue takes pods in. Where team queues are enforced, the queues' order
// comes first (package quota: queue priority, then the queue furthest below its fair share),
// as in Volcano, whose queues are served before the jobs inside them. It decides whose quorum the members of gangs past
// quorum must leave room for (protectedQuorums), and /debug/gangs shows each gang's place in it.

// waitingGang is a gang in the line, with the members its quorum would be planned for.
type waitingGang struct {
	g       *gangInfo
	quorum  []*podInfo
	prio    int32
	since   time.Time // the oldest member's creation
	waiting bool      // it could be reserved now if capacity allowed: members exist and none is gated out
	// queue is its team queue's rank; the zero rank for every gang where no queue is enforced.
	queue quota.Rank
}

// lineLocked lists the gangs without a quorum bound and without a reservation, in line order.
func (m *Manager) lineLocked() []waitingGang {
	var line []waitingGang
	rank := m.queueRanker()
	for key, g := range m.ledger.gangs {
		spec, _ := g.reference()
		if spec == nil || g.satisfied(spec) || m.liveReservation(key) != nil {
			continue
		}
		w := waitingGang{g: g, prio: g.priority(), since: g.oldest().created, queue: rank(g.oldest().queue)}
		if first := firstUnplaced(g); first != nil {
			w.quorum, _ = quorumMembers(first, g, spec)
			w.waiting = w.quorum != nil
		}
		line = append(line, w)
	}
	sort.Slice(line, func(i, j int) bool { return inLineBefore(line[i], line[j]) })
	return line
}

func inLineBefore(a, b waitingGang) bool {
	if a.queue != b.queue {
		return a.queue.Before(b.queue)
	}
	if a.prio != b.prio {
		return a.prio > b.prio
	}
	if !a.since.Equal(b.since) {
		return a.since.Before(b.since)
	}
	return a.g.key < b.g.key
}

// firstUnplaced is the oldest member a reservation could start from, nil when none can.
func firstUnplaced(g *gangInfo) *podInfo {
	for _, p := range g.sortedMembers() {
		if !p.holds() && !p.terminal && !p.gated && p.spec != nil && p.specErr == nil {
			return p
		}
	}
	return nil
}

// protectedQuorums is the capacity, per node, that members beyond their gang's quorum must leave
// alone: where the quorums of the waiting gangs at priority at least prio (other than own) would
// be placed now, in line order, each beside bound pods, reservations and the quorums before it.
// A quorum that does not fit now protects nothing: the gang cannot use the capacity yet. of names
// the gangs protected on each node.
func (m *Manager) protectedQuorums(own string, prio int32) (protected map[string]placement.Resources, of map[string][]string) {
	for _, w := range m.lineLocked() {
		if w.g.key == own || w.prio < prio || !w.waiting || m.liveHold(w.g.key) != nil {
			continue // a starving gang's hold already keeps its quorum's capacity
		}
		held, _ := m.book.held(everyOther(w.g.key))
		for node, r := range protected {
			held[node] = held[node].Add(r)
		}
		in := m.planView(w.g, held, nil)
		in.Members = m.planMembers(w.quorum, nil)
		plan := m.placeQuorum(w.g, in)
		if !plan.OK {
			continue
		}
		if protected == nil {
			protected, of = map[string]placement.Resources{}, map[string][]string{}
		}
		for i, node := range plan.Nodes {
			protected[node] = protected[node].Add(w.quorum[i].requests)
			if names := of[node]; len(names) == 0 || names[len(names)-1] != w.g.key {
				of[node] = append(names, w.g.key)
			}
		}
	}
	return protected, of
}

// holdersIn names what holds capacity on a node in the view: reservations, and the quorums of
// waiting gangs that members beyond their own quorum leave alone.
func (m *Manager) holdersIn(node string, v view) string {
	names := m.book.holders(node, v)
	for _, g := range v.quorumsOf[node] {
		if names != "" {
			names += ", "
		}
		names += g + " (waiting for its quorum)"
	}
	return names
}

// placesLocked gives every waiting gang its place in line, with the reason for it.
func (m *Manager) placesLocked() map[string]*views.LineStatus {
	line := m.lineLocked()
	out := make(map[string]*views.LineStatus, len(line))
	higher, equal := 0, 0
	for i, w := range line {
		if i > 0 && line[i-1].prio != w.prio {
			higher, equal = i, 0
		}
		why := fmt.Sprintf("priority %d; behind %d %s of higher priority and %d of equal priority waiting longer",
			w.prio, higher, plural(higher, "gang", "gangs"), equal)
		if !w.waiting {
			why += "; it cannot be planned yet (members missing or gated)"
		}
		out[w.g.key] = &views.LineStatus{Place: i + 1, Of: len(line), Why: why}
		equal++
	}
	return out
}
