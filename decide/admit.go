package decide

import (
	"fmt"
	"time"

	"k8s.io/apimachinery/pkg/types"

	"github.com/lockstep-sched/lockstep/gangspec"
	"github.com/lockstep-sched/lockstep/placement"
)

// Admission is filter's decision for a gang member before its gang has quorum: the gang waits
// with a reason, or the member passes exactly one node, through a reservation made now for the
// whole quorum or the one its gang holds already. Its owner makes it true in one place.
type Admission struct {
	// Wait is why the gang waits; the member fails every offered node with it.
	Wait string
	// LacksMembers: the gang waits because too few of its members exist.
	LacksMembers bool
	// Want, when not zero, is what the waiting gang's quorum asks: its queue is owed it.
	Want placement.Resources
	// Node is the one node the member passes, when it does not wait.
	Node string
	// Reserve is a new reservation for the gang's quorum, the member's slot first.
	Reserve *Reservation
	// Slot is the member's place in its gang's live reservation, an index into its Slots (one
	// it holds, or a planned one it takes); -1 for none. With Join the member takes a new place
	// beyond the plan, on Node, instead. The place moves to Node when it differs.
	Slot int
	Join bool
	// Yield are the lower-priority reservations the new one takes the capacity of, by gang.
	Yield []*Reservation
	// Evict are the pods the new one needs gone, each with why, and Cause why the gang evicts.
	Evict []Victim
	Cause Cause
	// Hold, when set, is a starving gang's new claim on capacity as it frees.
	Hold *Reservation
	// Reserved is the gang's reason once Reserve is booked; Preempting, when it evicts, what it
	// then says instead.
	Reserved, Preempting string
}

// Admit decides for member p, whose gang has no quorum yet and whose rules are known: through the
// gang's live reservation, or by planning a new one for the whole quorum when there is none.
// offered are the nodes the scheduler passed. A plan for a new reservation takes nil for "the
// scheduler passed none" (its preemption, EvictFor) and rules no node out then; a member of a gang
// with a live reservation is only ever asked about at filter, and passes none of nil.
func (s *Snapshot) Admit(p *Pod, offered []string) Admission {
	g, spec := s.gangOf(p), p.Spec
	if res := s.Reservations.Live(g.Key); res != nil {
		return s.admitToReservation(p, g, res, offered)
	}
	members, wait := quorumMembers(p, g, spec)
	if wait != "" {
		return Admission{Wait: wait, LacksMembers: true, Slot: -1}
	}
	if wait := s.coolDown(g, spec); wait > 0 {
		return Admission{Slot: -1, Wait: fmt.Sprintf("gang %s: its reservation timed out; it plans again in %s so that other waiting gangs get the capacity first",
			g.Key, wait.Truncate(time.Second)+time.Second)}
	}
	req := QuorumRequests(members)
	if why := s.queues().gangWait(g.Key, p.Queue, req); why != "" {
		return Admission{Wait: why, Want: req, Slot: -1}
	}
	toPlace := s.planMembers(members, offered)
	in, plan, heldBy := s.planQuorum(g, toPlace, EveryOther(g.Key), nil)
	if plan.OK {
		return s.reserve(g, spec, members, plan, nil)
	}
	// Free capacity is not enough: take over lower-priority reservations, or else evict
	// lower-priority pods, whichever makes the whole quorum fit.
	if yield, taken := s.planTakeover(g, toPlace); taken.OK {
		return s.reserve(g, spec, members, taken, yield)
	}
	// Then evict, the cheapest first: other gangs' members beyond their quorums, lower-priority
	// pods, and what other queues hold above their fair share.
	if a, ok := s.admitEvicting(p, g, spec, members, toPlace, req); ok {
		return a
	}
	why := s.shortfall(g, in, plan, heldBy)
	if h := s.Reservations.hold(g.Key); h != nil {
		return Admission{Wait: s.holdWords(g, h, why), Want: req, Slot: -1}
	}
	if h := s.planHold(g, members, toPlace); h != nil {
		return Admission{Wait: s.holdWords(g, h, why), Hold: h, Want: req, Slot: -1}
	}
	return Admission{Wait: why, Want: req, Slot: -1}
}

// admitEvicting is a reservation on what evictions free: extras taken back, then lower-priority
// pods, then what queues above their share give back; ok is false when none makes the quorum fit.
func (s *Snapshot) admitEvicting(p *Pod, g *Gang, spec *gangspec.Spec, members []*Pod, toPlace []placement.Member, req placement.Resources) (Admission, bool) {
	evicting := func(victims []Victim, freed placement.Plan, cause Cause) (Admission, bool) {
		a := s.reserve(g, spec, members, freed, nil)
		a.Evict, a.Cause = victims, cause
		a.Preempting = s.preemptingWords(g, a.Reserve, victims, cause)
		return a, true
	}
	if s.mayTakeBackExtras(g) {
		if victims, freed := s.planTakeBack(g, toPlace); freed.OK {
			return evicting(victims, freed, Cause{Kind: ForQuorum})
		}
	}
	if s.mayPreempt(g) && !s.Rules.NoPriorityPreemption {
		if victims, freed := s.planPreemption(g, toPlace); freed.OK {
			return evicting(victims, freed, Cause{Kind: ByPriority})
		}
	}
	if s.mayReclaim(g, p) {
		if victims, freed, _ := s.planReclaim(g, p.Queue, req, toPlace); freed.OK {
			return evicting(victims, freed, Cause{Kind: ForQueue, Queue: p.Queue})
		}
	}
	return Admission{}, false
}

// reserve is the admission that books a new reservation of members on plan's nodes, taking over
// the yielding reservations.
func (s *Snapshot) reserve(g *Gang, spec *gangspec.Spec, members []*Pod, plan placement.Plan, yield []*Reservation) Admission {
	r := s.newReservation(g, spec, members, plan.Nodes)
	need := len(r.Slots)
	return Admission{Reserve: r, Node: plan.Nodes[0], Yield: yield, Slot: -1,
		Reserved: fmt.Sprintf("gang %s: %d %s reserved until %s; waiting for them to reach bind%s",
			g.Key, need, plural(need, "member", "members"), r.Expires.UTC().Format("15:04:05"), takenFrom(yield))}
}

// preemptingWords is the preempting gang's reason, and fills in each victim's.
func (s *Snapshot) preemptingWords(g *Gang, r *Reservation, victims []Victim, cause Cause) string {
	list := ""
	for i := range victims {
		u := &victims[i]
		u.Why = s.victimWords(cause, g, r.Priority, *u)
		if i > 0 {
			list += ", "
		}
		list += fmt.Sprintf("%s (priority %d)", u.Name(), u.Priority)
	}
	return fmt.Sprintf("gang %s: %s %s for its quorum; %d members reserved on what they free, until %s",
		g.Key, cause.Verb(), list, len(r.Slots), r.Expires.UTC().Format("15:04:05"))
}

// quorumMembers are the members a new reservation is for: the one at filter first, then the
// oldest others that can come to claim a place, as many as the quorum still needs (first those
// of tasks short of their minimum, then any). Too few gives the reason the gang waits instead.
func quorumMembers(p *Pod, g *Gang, spec *gangspec.Spec) (members []*Pod, wait string) {
	t := g.Counted(spec)
	t.Add(p)
	members = []*Pod{p}
	var candidates []*Pod
	gated := 0
	for _, q := range g.Members {
		switch {
		case q == p || q.Spec == nil || q.Holds() || q.Terminal:
		case gangspec.Disagreement(q.Key(), q.Spec, spec, p.Key()) != nil || q.Priority != p.Priority:
			// Rejected at its own filter: it never comes to claim a place held for it.
		case q.Gated:
			gated++
		default:
			candidates = append(candidates, q)
		}
	}
	taken := make([]bool, len(candidates))
	for i, q := range candidates {
		if t.short(q, spec) {
			t.Add(q)
			members, taken[i] = append(members, q), true
		}
	}
	for i, q := range candidates {
		if !taken[i] && t.Total < spec.MinAvailable {
			t.Add(q)
			members = append(members, q)
		}
	}
	if t.Meets(spec) {
		return members, ""
	}
	wait = fmt.Sprintf("gang %s: waiting for members: %d of min-available %d exist%s", g.Key, t.Total+gated, spec.MinAvailable, t.TasksLacking(spec))
	if gated > 0 {
		wait += fmt.Sprintf(", %d of them held by scheduling gates", gated)
	}
	if spec.QuorumFrom != "" {
		wait += "; min-available is " + spec.QuorumFrom
	}
	return nil, wait
}

// QuorumMembers is quorumMembers for the member of uid, from the snapshot.
func (s *Snapshot) QuorumMembers(uid types.UID) (members []*Pod, wait string) {
	p := s.Pods[uid]
	return quorumMembers(p, s.gangOf(p), p.Spec)
}

// newReservation is a reservation of members[i] on nodes[i]; the first member, the one at filter,
// holds its slot already.
func (s *Snapshot) newReservation(g *Gang, spec *gangspec.Spec, members []*Pod, nodes []string) *Reservation {
	res := &Reservation{Gang: g.Key, Priority: g.Priority(), Queue: members[0].Queue, Created: s.Now, Expires: s.Now.Add(s.waitingTime(spec))}
	for i, q := range members {
		sl := Slot{PlannedFor: q.UID, Node: nodes[i], Requests: q.Requests, State: SlotPlanned}
		if i == 0 {
			sl.Pod, sl.State = q.UID, SlotReserved
		}
		res.Slots = append(res.Slots, sl)
	}
	return res
}

// coolDown is how long a gang whose reservation expired must wait before reserving again. Without
// it a gang that can never complete (a member the scheduler cannot place) would take the capacity
// back on its next retry, every time, and starve the gangs waiting behind it. It lasts one waiting
// time, long enough for every waiting pod to be retried (the scheduler's backoff is at most 10s by
// default).
func (s *Snapshot) coolDown(g *Gang, spec *gangspec.Spec) time.Duration {
	if !g.TimedOut {
		return 0
	}
	return g.TimedOutAt.Add(s.waitingTime(spec)).Sub(s.Now)
}

// admitToReservation decides for a member whose gang already holds a reservation.
func (s *Snapshot) admitToReservation(p *Pod, g *Gang, res *Reservation, offered []string) Admission {
	allowed := NodeSet(offered)
	i := res.SlotOf(p.UID)
	if i < 0 && res.State == Reserving {
		i = res.claimable(p)
	}
	if i < 0 {
		// A member beyond the plan (total-number above min-available) joins the reservation when
		// free capacity holds it, beside the quorums of waiting gangs at its priority or above;
		// otherwise it waits to schedule as an ordinary pod after quorum.
		protect, _ := s.protectedQuorums(g.Key, g.Priority())
		node := s.bestFreeNode(p.Requests, g, allowed, -1, protect)
		if node == "" || res.State != Reserving {
			return Admission{Slot: -1, Wait: fmt.Sprintf("gang %s: its %d reserved places are taken by other members, and members beyond its quorum leave free capacity to the quorums of waiting gangs; this member schedules once the gang is bound",
				g.Key, len(res.Slots))}
		}
		return Admission{Slot: -1, Join: true, Node: node}
	}
	sl := res.Slots[i]
	if allowed[sl.Node] {
		return Admission{Slot: i, Node: sl.Node}
	}
	// The scheduler's own filters rule the reserved node out for this pod (taints, affinity,
	// ports: things lockstep does not model). Move the slot if another offered node has room.
	if sl.State > SlotReserved {
		return Admission{Slot: i, Wait: fmt.Sprintf("gang %s: member %s is waiting for quorum on node %s, which the scheduler no longer offers", g.Key, p.Key(), sl.Node)}
	}
	moveTo := s.bestFreeNode(p.Requests, g, allowed, i, nil)
	if moveTo == "" {
		return Admission{Slot: i, Wait: fmt.Sprintf("gang %s: member %s's reserved node %s is ruled out by the scheduler's other filters and no offered node has room for %s",
			g.Key, p.Key(), sl.Node, p.Requests)}
	}
	return Admission{Slot: i, Node: moveTo}
}

// claimable is the planned slot a member would take, by index, -1 for none: the one planned for
// it, else one with the same requests, else one whose requests cover the member's. Members of one
// gang are usually alike, so whichever arrives first takes any slot, and a member recreated by its
// controller takes the slot of the pod it replaces.
func (r *Reservation) claimable(p *Pod) int {
	same, covers := -1, -1
	for i := range r.Slots {
		sl := &r.Slots[i]
		if sl.State != SlotPlanned {
			continue
		}
		if sl.PlannedFor == p.UID {
			return i
		}
		if same < 0 && sl.Requests == p.Requests {
			same = i
		}
		if covers < 0 {
			if ok, _ := p.Requests.FitsIn(sl.Requests); ok {
				covers = i
			}
		}
	}
	if same >= 0 {
		return same
	}
	return covers
}

// PlansForPreemption reports whether kube-scheduler's preemption for member p, which no node took
// in the scheduler's eyes, is lockstep's cue to plan its gang (Admit, with no node ruled out): the
// member is not refused, its gang's rules are known, and the gang has neither its quorum bound nor
// a reservation.
func (s *Snapshot) PlansForPreemption(p *Pod) bool {
	g := s.gangOf(p)
	return g != nil && memberError(p, g) == nil && p.Spec != nil && !g.Satisfied(p.Spec) && s.Reservations.Live(g.Key) == nil
}

// EvictFor plans a waiting gang the scheduler keeps from lockstep's filter, as its preemption
// would have it planned, for what that preemption cannot see: it looks for victims only among pods
// of lower priority, and then never asks lockstep, yet members beyond other gangs' quorums of
// equal priority and, with reclaim, pods of other queues may make room. A plan that evicts nothing
// is left for the gang's next filter, except under reclaim, whose queue is owed its wait. ok is
// false when there is nothing to apply. p is the member to plan from.
func (s *Snapshot) EvictFor(p *Pod) (a Admission, ok bool) {
	g := s.gangOf(p)
	reclaim := s.mayReclaim(g, p)
	if !reclaim && !s.mayTakeBackExtras(g) || memberError(p, g) != nil || p.Spec == nil || s.Reservations.Live(g.Key) != nil {
		return Admission{}, false
	}
	a = s.Admit(p, nil)
	if len(a.Evict) == 0 && !reclaim {
		return Admission{}, false
	}
	return a, true
}
