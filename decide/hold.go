package decide

import (
	"fmt"
	"sort"
	"strings"
	"time"

	"github.com/lockstep-sched/lockstep/placement"
)

// The starvation rule. A big gang waits for its whole quorum to be free at once; a stream of
// small gangs and pods of the same priority takes every bit of capacity as it frees, and the big
// gang could wait forever. So once a gang has waited Rules.StarvationThreshold for capacity (and
// its last reservation, if any, did not time out), and its quorum fits the cluster's capacity were
// nothing of lower or equal priority running, lockstep holds capacity for it: it picks the nodes
// where the quorum would go (those with the most free now first) and keeps everything that frees
// there for the gang, until the quorum fits and the gang reserves as usual. Only the first
// starving gang in line holds at a time, so that two holds can never each wait for the other.
// Work of higher priority is not held back: a hold yields to it like a reservation. Its bound: the
// gang binds once the pods running on the held nodes when the hold began have finished (or were
// preempted).

// WaitedSince is when the gang began waiting for capacity: its last reservation, or before its
// first its oldest member's creation.
func (g *Gang) WaitedSince() time.Time {
	if !g.WaitingSince.IsZero() || len(g.Members) == 0 {
		return g.WaitingSince
	}
	return g.Oldest().Created
}

// starving reports whether the gang has waited past the threshold. A gang whose last reservation
// timed out does not qualify until it reserves again: its members did not all come to bind (one
// the scheduler cannot place, say), and holding capacity for it would starve everyone else.
func (s *Snapshot) starving(g *Gang) bool {
	t := s.Rules.StarvationThreshold
	return t > 0 && !g.TimedOut && s.Now.Sub(g.WaitedSince()) >= t
}

// Hold is a starving gang's new claim on capacity as it frees, and the reason it waits with.
type Hold struct {
	Gang   string
	Hold   *Reservation
	Reason string
}

// HoldForStarving gives the first starving gang in line its hold, unless some gang holds already;
// nil when none is due. Its owner asks on the expiry sweep's tick as well as at filter: a
// starving gang's members may never reach lockstep's filter (no node has room for one of them in
// the scheduler's eyes), and it is exactly then that the capacity freeing must be held for it.
func (s *Snapshot) HoldForStarving() *Hold {
	if s.Rules.StarvationThreshold <= 0 || !s.anyStarving() || s.Reservations.holder() != "" {
		return nil
	}
	for _, w := range s.Line() {
		if !w.Plannable || !s.starving(w.Gang) {
			continue
		}
		toPlace := s.planMembers(w.Quorum, nil)
		if h := s.planHold(w.Gang, w.Quorum, toPlace); h != nil {
			in, plan, heldBy := s.planQuorum(w.Gang, toPlace, EveryOther(w.Gang.Key), nil)
			return &Hold{Gang: w.Gang.Key, Hold: h, Reason: s.holdWords(w.Gang, h, s.shortfall(w.Gang, in, plan, heldBy))}
		}
	}
	return nil
}

// anyStarving is the sweep's cheap look before it builds the line, which plans every waiting
// gang's quorum: it runs every tick, and nearly always finds no one.
func (s *Snapshot) anyStarving() bool {
	for key, g := range s.Gangs {
		if spec, _ := g.Reference(); spec != nil && !g.Satisfied(spec) && s.Reservations.Live(key) == nil && s.starving(g) {
			return true
		}
	}
	return false
}

// planHold is a hold for a starving gang's quorum, nil when the rule does not apply: the gang is
// not starving, another gang holds already, or the quorum would not fit even then.
func (s *Snapshot) planHold(g *Gang, members []*Pod, toPlace []placement.Member) *Reservation {
	if !s.starving(g) || s.Reservations.holder() != "" || !s.queues().mayHold(g.Key, members[0].Queue, QuorumRequests(members)) {
		return nil
	}
	prio := g.Priority()
	in := placement.Input{Free: map[string]placement.Resources{}, GangNodes: map[string]bool{}, Members: toPlace}
	held, _ := s.Reservations.Held(Above(g.Key, prio))
	staying := s.requestedAbove(prio)
	for name, n := range s.Nodes {
		if n.Known && !n.Unschedulable {
			in.Free[name] = n.Allocatable.Sub(staying[name]).Sub(held[name])
		}
	}
	// Among nodes that would hold it, those with the most free now fill first.
	in.NodeScore = func(node string, _ placement.Resources) int {
		if n := s.Nodes[node]; n != nil {
			return int(n.Free().GPU)
		}
		return 0
	}
	plan := s.placeQuorum(g, in)
	if !plan.OK {
		return nil
	}
	// It lives one waiting time and is then planned afresh: nodes come and go meanwhile.
	spec, _ := g.Reference()
	res := &Reservation{Gang: g.Key, Priority: prio, Queue: members[0].Queue, Created: s.Now, Expires: s.Now.Add(s.waitingTime(spec)), State: Holding}
	for i, q := range members {
		res.Slots = append(res.Slots, Slot{PlannedFor: q.UID, Node: plan.Nodes[i], Requests: q.Requests, State: SlotPlanned})
	}
	return res
}

// holdWords says, for the gang's reason, why it still waits (shortfall's words) and what the hold
// is: a user reading "holds nodes" alone would not learn what the gang lacks.
func (s *Snapshot) holdWords(g *Gang, res *Reservation, why string) string {
	var need, free placement.Resources
	nodes := map[string]bool{}
	for _, sl := range res.Slots {
		need = need.Add(sl.Requests)
		nodes[sl.Node] = true
	}
	names := make([]string, 0, len(nodes))
	for n := range nodes {
		names = append(names, n)
		if node := s.Nodes[n]; node != nil { // a node deleted since the hold was planned
			free = free.Add(node.Free())
		}
	}
	sort.Strings(names)
	return fmt.Sprintf("%s; it has waited %s for capacity, past --starvation-threshold %s, so lockstep holds nodes %s for its quorum as capacity frees there (%d of %d nvidia.com/gpu free now), keeping pods of equal or lower priority off it",
		why, s.Now.Sub(g.WaitedSince()).Round(time.Second), s.Rules.StarvationThreshold, strings.Join(names, ", "), max(free.GPU, 0), need.GPU)
}

// requestedAbove sums, per node, what bound pods of priority above prio request: what a gang at
// prio cannot count on seeing freed for it.
func (s *Snapshot) requestedAbove(prio int32) map[string]placement.Resources {
	out := map[string]placement.Resources{}
	for _, p := range s.Pods {
		if p.Holds() && p.Priority > prio {
			out[p.Node] = out[p.Node].Add(p.Requests)
		}
	}
	return out
}
