package decide

import (
	"fmt"
	"sort"
	"strings"
	"time"

	"github.com/lockstep-sched/lockstep/placement"
	"github.com/lockstep-sched/lockstep/quota"
	"github.com/lockstep-sched/lockstep/wellknown"
)

// What a waiting gang may take when its quorum does not fit free capacity, cheapest first:
//   - takeover: reservations of lower-priority gangs, which are plans, not bindings;
//   - taking back: members beyond other gangs' quorums, of equal or lower priority (extras);
//   - priority preemption: bound pods of lower priority, a gang's members as one unit;
//   - reclaim: what other team queues hold above their fair share.
// Each is planned as a dry run against the snapshot, and kept only when the whole quorum then fits.

// --- takeover --------------------------------------------------------------------------------

// A reservation is a plan, not a binding: work of higher priority may take its capacity. A gang
// whose quorum does not fit only because lower-priority gangs hold reservations takes them over
// (planTakeover); an ordinary pod, or a member of a gang past quorum, passes filter where only
// such reservations stand in its way and takes them over at bind (TakeNode). Equal priority never
// takes over: first come, first served. And nothing is released unless the taker then fits whole,
// so two gangs cannot take capacity back and forth.

// planTakeover finds the fewest lower-priority reservations whose release lets the gang's quorum
// fit: the lowest priority (then the newest) are added until the plan fits, then each is put back
// if the plan fits without releasing it. plan.OK is false when releasing them all is not enough.
func (s *Snapshot) planTakeover(g *Gang, members []placement.Member) (yield []*Reservation, plan placement.Plan) {
	candidates := s.Reservations.Yielding(g.Key, g.Priority())
	v := EveryOther(g.Key)
	v.released = map[string]bool{}
	for _, r := range candidates {
		v.released[r.Gang] = true
		if _, plan, _ = s.planQuorum(g, members, v, nil); plan.OK {
			break
		}
	}
	if !plan.OK {
		return nil, plan
	}
	for i := len(candidates) - 1; i >= 0; i-- {
		r := candidates[i]
		if !v.released[r.Gang] {
			continue
		}
		delete(v.released, r.Gang)
		if _, p, _ := s.planQuorum(g, members, v, nil); p.OK {
			plan = p
			continue
		}
		v.released[r.Gang] = true
	}
	for _, r := range candidates {
		if v.released[r.Gang] {
			yield = append(yield, r)
		}
	}
	return yield, plan
}

// TakeNode lists, in order, the lower-priority reservations a pod of own's gang ("" for none) at
// priority, about to bind req on node, must take over: filter let it pass them, and here the
// lowest priority go first until it fits beside what stays held. It reads the node and the
// reservations alone. Nothing when it fits already, the usual case.
func TakeNode(rs Reservations, node *Node, own string, priority int32, req placement.Resources) []string {
	if node == nil {
		return nil
	}
	v := EveryOther(own)
	fits := func() bool {
		held, _ := rs.Held(v)
		ok, _ := req.FitsIn(node.Free().Sub(held[node.Name]))
		return ok
	}
	if fits() {
		return nil
	}
	var taken []string
	v.released = map[string]bool{}
	for _, r := range rs.Yielding(own, priority) {
		if !r.holdsOn(node.Name) {
			continue
		}
		taken = append(taken, r.Gang)
		if v.released[r.Gang] = true; fits() {
			break
		}
	}
	return taken
}

// takenFrom words, for the taker's reason, whose reservations it took over; "" for none.
func takenFrom(yield []*Reservation) string {
	if len(yield) == 0 {
		return ""
	}
	names := make([]string, len(yield))
	for i, r := range yield {
		names[i] = fmt.Sprintf("%s (priority %d)", r.Gang, r.Priority)
	}
	return "; took over the reservations of lower-priority " + plural(len(yield), "gang ", "gangs ") + strings.Join(names, ", ")
}

// --- victims ---------------------------------------------------------------------------------

// Victim is what lockstep evicts as one: an ordinary pod, every bound member of a gang, or one
// member beyond its gang's quorum.
type Victim struct {
	Pods []*Pod
	// Gang is the key of the gang the pods form; "" for an ordinary pod.
	Gang string
	// Extra: one member beyond its gang's quorum, not the gang.
	Extra    bool
	Priority int32
	// started is when the unit's newest pod was created: the later, the less work is lost.
	started time.Time
	// Why tells the victim's pods why they go.
	Why string
}

// Name is how reasons name the victim.
func (u Victim) Name() string {
	if u.Extra {
		return "pod " + u.Pods[0].Key() + " beyond gang " + u.Gang + "'s quorum"
	}
	if u.Gang != "" {
		return "gang " + u.Gang
	}
	return "pod " + u.Pods[0].Key()
}

func (u Victim) gpus() int64 {
	var n int64
	for _, p := range u.Pods {
		n += p.Requests.GPU
	}
	return n
}

// Cause is why a gang evicts: the words of its reason and Events, and the metric's label.
type Cause struct {
	Kind CauseKind
	// Queue is, for reclaim, the queue below its fair share the evictions take capacity back for.
	Queue string
}

// CauseKind names a cause in the lockstep_preemption_evictions_total metric.
type CauseKind string

const (
	// ByPriority: lower-priority pods make room for the gang's quorum.
	ByPriority CauseKind = "priority"
	// ForQueue: queues above their fair share give back to the gang's queue.
	ForQueue CauseKind = "reclaim"
	// ForQuorum: members beyond other gangs' quorums make room for the gang's.
	ForQuorum CauseKind = "extras"
)

// Verb says, in the preemptor's reason, what it is doing to the victims.
func (c Cause) Verb() string {
	switch c.Kind {
	case ForQueue:
		return "reclaiming for " + c.Queue + ", below its fair share,"
	case ForQuorum:
		return "taking back"
	}
	return "preempting"
}

// victimWords tells a victim's pods why they go, for the preemptor g at prio.
func (s *Snapshot) victimWords(c Cause, g *Gang, prio int32, u Victim) string {
	var why string
	switch c.Kind {
	case ForQueue:
		why = fmt.Sprintf("reclaimed for gang %s of %s, which is below its fair share while this pod's queue is above its own", g.Key, c.Queue)
	case ForQuorum:
		return fmt.Sprintf("evicted as a member beyond gang %s's min-available %d, for gang %s (priority %d) to place its quorum: members beyond a gang's quorum yield to the quorums of gangs of equal or higher priority; annotation %s: \"true\" keeps a member",
			u.Gang, s.Gangs[u.Gang].MinAvailable(), g.Key, prio, wellknown.AnnotationKeepExtras)
	default:
		why = fmt.Sprintf("preempted by gang %s (priority %d) to place its quorum", g.Key, prio)
	}
	if u.Gang != "" && !u.Extra {
		why += fmt.Sprintf("; lockstep evicts gang %s whole (%d members)", u.Gang, len(u.Pods))
	}
	return why
}

// evictRefusedFor is how long a pod whose eviction was refused (a PodDisruptionBudget, say) is
// not chosen as a victim again: the next plan looks for others instead of asking again at once.
const evictRefusedFor = time.Minute

// EvictRefusedFor is evictRefusedFor, for the owner that forgets refusals older than it.
const EvictRefusedFor = evictRefusedFor

func (s *Snapshot) evictRefusedLately(p *Pod) bool {
	at, ok := s.EvictRefused[p.UID]
	return ok && s.Now.Sub(at) < evictRefusedFor
}

// mayPreempt reports whether the gang may evict others for its quorum: evicting is on, and neither
// its members nor its group object say preemptionPolicy: Never.
func (s *Snapshot) mayPreempt(g *Gang) bool {
	spec, ref := g.Reference()
	return s.Rules.MayEvict && ref != nil && !ref.PreemptNever && !spec.PreemptNever
}

// freeing is what pods already being deleted will give back, per node, and what evicting units
// adds to it.
type freeing map[string]placement.Resources

func (s *Snapshot) alreadyFreeing() freeing {
	out := freeing{}
	for _, p := range s.Pods {
		if p.Holds() && p.Going() {
			out[p.Node] = out[p.Node].Add(p.Requests)
		}
	}
	return out
}

func (f freeing) with(units []Victim, skip int) map[string]placement.Resources {
	out := make(map[string]placement.Resources, len(f))
	for node, r := range f {
		out[node] = r
	}
	for i, u := range units {
		if i == skip {
			continue
		}
		for _, p := range u.Pods {
			out[p.Node] = out[p.Node].Add(p.Requests)
		}
	}
	return out
}

func preferredVictim(a, b Victim) bool {
	if a.Priority != b.Priority {
		return a.Priority < b.Priority
	}
	if len(a.Pods) != len(b.Pods) {
		return len(a.Pods) < len(b.Pods)
	}
	if !a.started.Equal(b.started) {
		return a.started.After(b.started)
	}
	return a.Name() < b.Name()
}

// keepFirst orders victims for putting back: the most valuable first (highest priority, most
// pods, least capacity freed, most work done), so that the set left is cheap and small.
func keepFirst(a, b Victim) bool {
	if a.Priority != b.Priority {
		return a.Priority > b.Priority
	}
	if len(a.Pods) != len(b.Pods) {
		return len(a.Pods) > len(b.Pods)
	}
	if ga, gb := a.gpus(), b.gpus(); ga != gb {
		return ga < gb
	}
	if !a.started.Equal(b.started) {
		return a.started.Before(b.started)
	}
	return a.Name() < b.Name()
}

// putBackSpared keeps back every chosen victim the quorum's plan does without, the most valuable
// first, so that the set left is cheap and small; plan is the one with every victim gone.
func (s *Snapshot) putBackSpared(g *Gang, members []placement.Member, chosen []Victim, plan placement.Plan) ([]Victim, placement.Plan) {
	base, v := s.alreadyFreeing(), EveryOther(g.Key)
	victims := append([]Victim(nil), chosen...)
	sort.Slice(victims, func(i, j int) bool { return keepFirst(victims[i], victims[j]) })
	for i := 0; i < len(victims); {
		if _, p, _ := s.planQuorum(g, members, v, base.with(victims, i)); p.OK {
			plan = p
			victims = append(victims[:i], victims[i+1:]...)
			continue
		}
		i++
	}
	return victims, plan
}

// --- taking back extras ----------------------------------------------------------------------

// Quorums before extras. A gang's members beyond its min-available (its extras: the workers an
// elastic job runs above its minimum) use capacity another gang of equal or higher priority may
// need for its quorum. Extras that reach filter while such a quorum waits leave room for it
// (ProtectedQuorums); but a user's jobs arrive milliseconds apart, and the scheduler binds the
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
func (s *Snapshot) mayTakeBackExtras(g *Gang) bool {
	return !s.Rules.NoExtrasTakeBack && s.mayPreempt(g)
}

// extrasFor lists the extras a gang at prio may take back, the cheapest first: the lowest
// priority, then the youngest. Where team queues are enforced it takes only inside its own queue,
// as priority preemption does: capacity moves between queues by their shares (reclaim).
func (s *Snapshot) extrasFor(own *Gang, prio int32) []Victim {
	ownQueue, queues := own.Oldest().Queue, s.Quota.Enforcing()
	var units []Victim
	for key, g := range s.Gangs {
		if key == own.Key || g.Priority() > prio {
			continue
		}
		for _, p := range g.Extras(s.evictRefusedLately) {
			if !queues || p.Queue == "" || p.Queue == ownQueue {
				units = append(units, Victim{Pods: []*Pod{p}, Gang: key, Extra: true, Priority: p.Priority, started: p.Created})
			}
		}
	}
	sort.Slice(units, func(i, j int) bool { return cheaperExtra(units[i], units[j]) })
	return units
}

// cheaperExtra orders extras by priority, then the youngest first. Creation times tie within a
// second, and a controller makes its replicas in order, so the later name goes first: an elastic
// job, like a StatefulSet, loses its highest-numbered workers.
func cheaperExtra(a, b Victim) bool {
	if a.Priority != b.Priority {
		return a.Priority < b.Priority
	}
	if !a.started.Equal(b.started) {
		return a.started.After(b.started)
	}
	an, bn := a.Pods[0].Name, b.Pods[0].Name
	if len(an) != len(bn) {
		return len(an) > len(bn) // worker-10 after worker-9
	}
	return an > bn
}

// planTakeBack chooses the extras to evict so that the gang's quorum fits, and the plan that then
// places it; plan.OK is false when taking back every extra is not enough. It evicts the shortest
// run of candidates, cheapest first, that makes the quorum fit, then puts back every one the plan
// does without, the most valuable first.
func (s *Snapshot) planTakeBack(g *Gang, members []placement.Member) ([]Victim, placement.Plan) {
	candidates := s.extrasFor(g, g.Priority())
	base, v := s.alreadyFreeing(), EveryOther(g.Key)
	fitsWith := func(n int) placement.Plan {
		_, plan, _ := s.planQuorum(g, members, v, base.with(candidates[:n], -1))
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
		return s.putBackSpared(g, members, candidates[:n], plan)
	}
	return s.putBackSpared(g, members, candidates, all)
}

// --- priority preemption ---------------------------------------------------------------------

// Gang preemption: when a gang's quorum fits neither on free capacity nor by taking over
// lower-priority reservations, lockstep looks for bound pods of lower priority whose eviction
// would let it fit. It evicts whole units only: an ordinary pod, or every bound member of a gang,
// never some of them. It prefers the lowest priority, then the fewest pods, then the least work
// lost (the units started last), and puts back every unit the plan turns out not to need.

// victimsBelow lists what a gang at prio may preempt: bound pods of lower priority, a gang's
// bound members as one unit. Pods already going and pods whose eviction was refused lately are
// left out, and so is a gang with any member lockstep may not evict. Where team queues are
// enforced, priority preempts only inside the gang's own queue (and pods of no queue), as
// Volcano's preempt action does: capacity moves between queues by their shares (reclaim), not by
// priority.
func (s *Snapshot) victimsBelow(own string, prio int32) []Victim {
	byGang := map[string]*Victim{}
	var units []Victim
	spoiled := map[string]bool{}
	ownQueue, queues := "", s.Quota.Enforcing()
	if g := s.Gangs[own]; g != nil && len(g.Members) > 0 {
		ownQueue = g.Oldest().Queue
	}
	for _, p := range s.Pods {
		key := p.Gang
		if !p.Holds() || key == own || (queues && p.Queue != "" && p.Queue != ownQueue) {
			continue
		}
		ok := p.Priority < prio && !p.Going() && !s.evictRefusedLately(p)
		switch {
		case key == "" && ok:
			units = append(units, Victim{Pods: []*Pod{p}, Priority: p.Priority, started: p.Created})
		case key != "" && !ok:
			spoiled[key] = true
		case key != "":
			u := byGang[key]
			if u == nil {
				u = &Victim{Gang: key, Priority: p.Priority}
				byGang[key] = u
			}
			u.Pods = append(u.Pods, p)
			if p.Created.After(u.started) {
				u.started = p.Created
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

// planPreemption chooses the units to evict so that the gang's quorum fits, and the plan that
// then places it; plan.OK is false when evicting every candidate is not enough. It finds the
// lowest priority level up to which evicting everything is enough, then puts back every unit the
// plan does without, most valuable first.
func (s *Snapshot) planPreemption(g *Gang, members []placement.Member) (victims []Victim, plan placement.Plan) {
	candidates := s.victimsBelow(g.Key, g.Priority())
	base, v := s.alreadyFreeing(), EveryOther(g.Key)
	n := 0
	for n < len(candidates) && !plan.OK {
		level := candidates[n].Priority
		for n < len(candidates) && candidates[n].Priority == level {
			n++
		}
		_, plan, _ = s.planQuorum(g, members, v, base.with(candidates[:n], -1))
	}
	if !plan.OK {
		return nil, plan
	}
	return s.putBackSpared(g, members, candidates[:n], plan)
}

// --- queue reclaim ---------------------------------------------------------------------------

// Reclaim (--queue-reclaim): a gang whose queue is below its fair share, and whose quorum fits
// neither free capacity nor by taking over or preempting inside its own queue, takes capacity back
// from queues above their share. Unlike Volcano's task-by-task reclaim (#4607, #4950) it never
// cuts a gang below its quorum: a victim is one of a gang's extras (Gang.Extras, the youngest
// first, as taking back has them), or a gang whole once none of its extras is left; and it evicts
// only after a dry run shows the waiting quorum then fits. Package quota says how much each queue
// may lose: never below its share, guarantee or min, and only from queues that let others
// reclaim.

// reclaimUnit is a Victim of reclaim, with the queue it is taken from.
type reclaimUnit struct {
	Victim
	queue string
	// core: the members of a gang that has extras other than those, which may go only after
	// every one of them.
	core bool
}

func (u reclaimUnit) requests() placement.Resources { return QuorumRequests(u.Pods) }

// mayReclaim reports whether the gang may take capacity back for its queue: reclaim is on, the
// gang is in an enforced queue, and its members may evict at all.
func (s *Snapshot) mayReclaim(g *Gang, p *Pod) bool {
	return s.Rules.QueueReclaim && p.Queue != "" && s.Quota.Enforcing() && s.mayPreempt(g)
}

// reclaimUnits lists what a gang of queue may reclaim from other queues, cheapest first: lowest
// priority, then members beyond quorum before whole gangs, then the youngest.
//
// A gang's extras are Gang.Extras, as taking back has them. Where reclaim differs is the rest of
// the gang: a gang with a member going or refused lately is not taken whole (its core stays), as
// priority preemption leaves it, while its extras may still go one by one.
func (s *Snapshot) reclaimUnits(queue string) []reclaimUnit {
	var units []reclaimUnit
	gangs := map[string][]*Pod{}
	spoiled := map[string]bool{}
	for _, p := range s.Pods {
		if !p.Holds() || p.Queue == "" || p.Queue == queue {
			continue
		}
		ok := !p.Going() && !s.evictRefusedLately(p)
		key := p.Gang
		switch {
		case key == "" && ok:
			units = append(units, reclaimUnit{Victim: Victim{Pods: []*Pod{p}, Priority: p.Priority, started: p.Created}, queue: p.Queue})
		case key != "":
			gangs[key] = append(gangs[key], p)
			spoiled[key] = spoiled[key] || !ok
		}
	}
	for key, pods := range gangs {
		units = append(units, s.gangReclaimUnits(key, pods, !spoiled[key])...)
	}
	sort.Slice(units, func(i, j int) bool { return reclaimFirst(units[i], units[j]) })
	return units
}

// gangReclaimUnits splits a gang's bound members of other queues into its extras, one unit each,
// and the rest, its core, one unit when whole says the gang may be taken whole; without extras the
// gang is that one unit.
func (s *Snapshot) gangReclaimUnits(key string, pods []*Pod, whole bool) []reclaimUnit {
	extra := map[*Pod]bool{}
	if g := s.Gangs[key]; g != nil {
		for _, p := range g.Extras(s.evictRefusedLately) {
			extra[p] = true
		}
	}
	sort.Slice(pods, func(i, j int) bool { return OlderThan(pods[i], pods[j]) })
	var out []reclaimUnit
	var core []*Pod
	for _, p := range pods {
		if extra[p] {
			out = append(out, reclaimUnit{Victim: Victim{Pods: []*Pod{p}, Gang: key, Extra: true, Priority: p.Priority, started: p.Created}, queue: p.Queue})
		} else {
			core = append(core, p)
		}
	}
	if len(core) == 0 || !whole {
		return out
	}
	rest := reclaimUnit{Victim: Victim{Pods: core, Gang: key, Priority: core[0].Priority}, queue: core[0].Queue, core: len(out) > 0}
	for _, p := range core {
		if p.Created.After(rest.started) {
			rest.started = p.Created
		}
	}
	return append(out, rest)
}

func reclaimFirst(a, b reclaimUnit) bool {
	if a.Priority != b.Priority {
		return a.Priority < b.Priority
	}
	if a.Extra != b.Extra {
		return a.Extra
	}
	return preferredVictim(a.Victim, b.Victim)
}

// planReclaim chooses what to take back from other queues so that the gang's quorum, asking req
// in its queue, fits; plan.OK is false, with why, when it may not or cannot.
func (s *Snapshot) planReclaim(g *Gang, queue string, req placement.Resources, members []placement.Member) ([]Victim, placement.Plan, string) {
	q := s.queues()
	rc, why := q.Book.StartReclaim(quota.Question{Queue: queue, Gang: g.Key, Request: req,
		Held: q.heldBesides(g.Key), Capacity: q.Capacity})
	if rc == nil {
		return nil, placement.Plan{}, why
	}
	base, v := s.alreadyFreeing(), EveryOther(g.Key)
	var chosen []reclaimUnit
	extrasLeft := map[string]int{}
	units := s.reclaimUnits(queue)
	for _, u := range units {
		if u.Extra {
			extrasLeft[u.Gang]++
		}
	}
	var plan placement.Plan
	for _, u := range units {
		if (u.core && extrasLeft[u.Gang] > 0) || !rc.MayTake(u.queue, u.requests()) {
			continue
		}
		rc.Take(u.queue, u.requests())
		chosen = append(chosen, u)
		if u.Extra {
			extrasLeft[u.Gang]--
		}
		if _, plan, _ = s.planQuorum(g, members, v, base.with(victimsOf(chosen), -1)); plan.OK {
			break
		}
	}
	if !plan.OK {
		return nil, plan, "taking back what other queues hold above their fair share would not be enough"
	}
	chosen, plan = s.keepWhatReclaimSpares(g, members, chosen, plan, rc)
	return victimsOf(chosen), plan, ""
}

// keepWhatReclaimSpares puts back every chosen unit the plan does without, most valuable first;
// a gang's extra stays taken while its core is.
func (s *Snapshot) keepWhatReclaimSpares(g *Gang, members []placement.Member, chosen []reclaimUnit, plan placement.Plan, rc *quota.Reclaim) ([]reclaimUnit, placement.Plan) {
	sort.Slice(chosen, func(i, j int) bool { return keepFirst(chosen[i].Victim, chosen[j].Victim) })
	base, v := s.alreadyFreeing(), EveryOther(g.Key)
	coreTaken := map[string]bool{}
	for _, u := range chosen {
		coreTaken[u.Gang] = coreTaken[u.Gang] || u.core
	}
	for i := 0; i < len(chosen); {
		u := chosen[i]
		if u.Extra && coreTaken[u.Gang] {
			i++
			continue
		}
		if _, p, _ := s.planQuorum(g, members, v, base.with(victimsOf(chosen), i)); p.OK {
			plan = p
			rc.Give(u.queue, u.requests())
			chosen = append(chosen[:i], chosen[i+1:]...)
			if u.core {
				coreTaken[u.Gang] = false
			}
			continue
		}
		i++
	}
	return chosen, plan
}

func victimsOf(units []reclaimUnit) []Victim {
	out := make([]Victim, len(units))
	for i, u := range units {
		out[i] = u.Victim
	}
	return out
}
