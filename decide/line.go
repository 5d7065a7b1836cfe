package decide

import (
	"fmt"
	"sort"
	"time"

	"github.com/lockstep-sched/lockstep/quota"
	"github.com/lockstep-sched/lockstep/views"
)

// The line is the order lockstep gives the gangs waiting for capacity: higher priority first,
// then the gang that has waited longer (its oldest member was created earlier), the order
// kube-scheduler's own queue takes pods in. Where team queues are enforced, the queues' order
// comes first (package quota: queue priority, then the queue furthest below its fair share), as
// in Volcano, whose queues are served before the jobs inside them. It decides whose quorum the
// members of gangs past quorum must leave room for (ProtectedQuorums), which starving gang holds
// capacity first, and /debug/gangs shows each gang's place in it.

// Waiting is a gang in the line, with the members its quorum would be planned for.
type Waiting struct {
	Gang *Gang
	// Quorum are the members a reservation would be planned for, the first one to start from
	// first; nil when it cannot be planned yet.
	Quorum []*Pod
	prio   int32
	since  time.Time // the oldest member's creation
	// Plannable: it could be reserved now if capacity allowed: members exist and none is gated
	// out.
	Plannable bool
	// queue is its team queue's rank; the zero rank for every gang where no queue is enforced.
	queue quota.Rank
}

// Line lists the gangs without a quorum bound and without a reservation, in line order.
func (s *Snapshot) Line() []Waiting {
	var line []Waiting
	rank := s.queues().ranker()
	for key, g := range s.Gangs {
		spec, _ := g.Reference()
		if spec == nil || g.Satisfied(spec) || s.Reservations.Live(key) != nil {
			continue
		}
		w := Waiting{Gang: g, prio: g.Priority(), since: g.Oldest().Created, queue: rank(g.Oldest().Queue)}
		if first := firstUnplaced(g); first != nil {
			w.Quorum, _ = quorumMembers(first, g, spec)
			w.Plannable = w.Quorum != nil
		}
		line = append(line, w)
	}
	sort.Slice(line, func(i, j int) bool { return inLineBefore(line[i], line[j]) })
	return line
}

func inLineBefore(a, b Waiting) bool {
	if a.queue != b.queue {
		return a.queue.Before(b.queue)
	}
	if a.prio != b.prio {
		return a.prio > b.prio
	}
	if !a.since.Equal(b.since) {
		return a.since.Before(b.since)
	}
	return a.Gang.Key < b.Gang.Key
}

// firstUnplaced is the oldest member a reservation could start from, nil when none can.
func firstUnplaced(g *Gang) *Pod {
	for _, p := range g.Members {
		if !p.Holds() && !p.Terminal && !p.Gated && p.Spec != nil && p.SpecErr == nil {
			return p
		}
	}
	return nil
}

// Places gives every waiting gang its place in line, with the reason for it.
func (s *Snapshot) Places() map[string]*views.LineStatus {
	line := s.Line()
	out := make(map[string]*views.LineStatus, len(line))
	higher, equal := 0, 0
	for i, w := range line {
		if i > 0 && line[i-1].prio != w.prio {
			higher, equal = i, 0
		}
		why := fmt.Sprintf("priority %d; behind %d %s of higher priority and %d of equal priority waiting longer",
			w.prio, higher, plural(higher, "gang", "gangs"), equal)
		if !w.Plannable {
			why += "; it cannot be planned yet (members missing or gated)"
		}
		out[w.Gang.Key] = &views.LineStatus{Place: i + 1, Of: len(line), Why: why}
		equal++
	}
	return out
}

// QuorumFits reports whether a waiting gang's quorum fits free capacity now, beside bound pods
// and every other gang's reservation.
func (s *Snapshot) QuorumFits(w Waiting) bool {
	_, plan, _ := s.planQuorum(w.Gang, s.planMembers(w.Quorum, nil), EveryOther(w.Gang.Key), nil)
	return plan.OK
}

func plural(n int, one, many string) string {
	if n == 1 {
		return one
	}
	return many
}
