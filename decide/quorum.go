package decide

import (
	"fmt"
	"maps"
	"slices"
	"sort"
	"strings"

	"github.com/lockstep-sched/lockstep/gangspec"
	"github.com/lockstep-sched/lockstep/placement"
)

// A gang's quorum is MinAvailable members in all and, when its rules name tasks (Volcano's
// minTaskMember), each task's own minimum, all placed in the same commit. Tally counts members
// toward it; every decision about quorum (reserve, commit, satisfied, extras) goes through here.
type Tally struct {
	Total  int
	byTask map[string]int
}

// short reports whether p's task still lacks members.
func (t *Tally) short(p *Pod, spec *gangspec.Spec) bool {
	need, ok := spec.MinPerTask[p.Task]
	return ok && t.byTask[p.Task] < need
}

// Add counts a member.
func (t *Tally) Add(p *Pod) {
	t.Total++
	if p.Task != "" {
		if t.byTask == nil {
			t.byTask = map[string]int{}
		}
		t.byTask[p.Task]++
	}
}

// Remove takes a counted member back out: Add, undone.
func (t *Tally) Remove(p *Pod) {
	t.Total--
	if p.Task != "" {
		t.byTask[p.Task]--
	}
}

// Meets reports whether the counted members make the quorum.
func (t *Tally) Meets(spec *gangspec.Spec) bool {
	if t.Total < spec.MinAvailable {
		return false
	}
	for task, n := range spec.MinPerTask {
		if t.byTask[task] < n {
			return false
		}
	}
	return true
}

// TasksLacking words which tasks lack members, e.g. " (task worker: 2 of 3)"; "" when none do.
func (t *Tally) TasksLacking(spec *gangspec.Spec) string {
	var tasks []string
	for _, task := range slices.Sorted(maps.Keys(spec.MinPerTask)) {
		if have, need := t.byTask[task], spec.MinPerTask[task]; have < need {
			tasks = append(tasks, fmt.Sprintf("task %s: %d of %d", task, have, need))
		}
	}
	if len(tasks) == 0 {
		return ""
	}
	return " (" + strings.Join(tasks, ", ") + ")"
}

// ReadyWords says how far the counted members are from the quorum at bind, e.g. "3 of 4 members
// ready to bind (task ps: 0 of 1)".
func (t *Tally) ReadyWords(spec *gangspec.Spec) string {
	return fmt.Sprintf("%d of %d members ready to bind%s", t.Total, spec.MinAvailable, t.TasksLacking(spec))
}

// Reference is the spec every member must agree with: the one of the oldest member whose rules
// are known. Choosing the oldest keeps the answer stable while members come and go.
func (g *Gang) Reference() (*gangspec.Spec, *Pod) {
	for _, p := range g.Members { // oldest first
		if p.Spec != nil {
			return p.Spec, p
		}
	}
	return nil, nil
}

// Priority is the gang's: its reference member's, which every member must share.
func (g *Gang) Priority() int32 {
	if _, ref := g.Reference(); ref != nil {
		return ref.Priority
	}
	return 0
}

// MinAvailable is the gang's quorum size, 0 while its rules are unknown.
func (g *Gang) MinAvailable() int {
	if spec, _ := g.Reference(); spec != nil {
		return spec.MinAvailable
	}
	return 0
}

// Oldest is the gang's oldest member; the gang must have one.
func (g *Gang) Oldest() *Pod { return g.Members[0] }

// Counted is the tally of the gang's bound members that count toward quorum under its match
// policy: none under only-waiting. Members on their way out (evicted, deleted) do not count: a
// gang preempted whole still shows them bound while they terminate, and its replacements must
// gather a quorum again rather than bind one by one beside members about to go.
func (g *Gang) Counted(spec *gangspec.Spec) Tally {
	var t Tally
	if spec.Policy == gangspec.OnlyWaiting {
		return t
	}
	for _, p := range g.Members {
		if p.Holds() && !p.Going() {
			t.Add(p)
		}
	}
	return t
}

// Satisfied reports whether the gang's members schedule as ordinary pods: its quorum is bound,
// or (once-satisfied) was bound once and some member of it still runs. A once-satisfied gang
// whose every bound member is gone or going starts over.
func (g *Gang) Satisfied(spec *gangspec.Spec) bool {
	if spec.Policy == gangspec.OnceSatisfied && g.SatisfiedOnce && g.anyStaying() {
		return true
	}
	t := g.Counted(spec) // empty under only-waiting: never satisfied
	return t.Meets(spec)
}

// anyStaying reports whether a member holds a node and is not on its way out.
func (g *Gang) anyStaying() bool {
	for _, p := range g.Members {
		if p.Holds() && !p.Going() {
			return true
		}
	}
	return false
}

// BoundCount is how many members hold a node now.
func (g *Gang) BoundCount() int {
	n := 0
	for _, p := range g.Members {
		if p.Holds() {
			n++
		}
	}
	return n
}

// Extras are the gang's bound members it can lose and still hold its quorum, task minimums
// included, the youngest first: the members beyond min-available an elastic job runs. Members
// opted out (keep-extras), already going, or whose eviction was refused lately (refused) stay, and
// count toward the quorum. A gang whose bound members never count (only-waiting), or whose members
// go only together (disruptionMode all), has none. Taking
// back (for another gang's quorum) and reclaim (for a queue below its share) both take these, and
// only these, one by one; reclaim may also take the rest of a gang whole (reclaimUnits).
func (g *Gang) Extras(refused func(*Pod) bool) []*Pod {
	spec, _ := g.Reference()
	if spec == nil || spec.Policy == gangspec.OnlyWaiting || spec.DisruptAll {
		return nil
	}
	var staying []*Pod
	var t Tally
	for _, p := range g.Members {
		if p.Holds() && !p.Going() {
			staying = append(staying, p)
			t.Add(p)
		}
	}
	if len(staying) <= spec.MinAvailable {
		return nil
	}
	sort.Slice(staying, func(i, j int) bool { return OlderThan(staying[j], staying[i]) })
	var out []*Pod
	for _, p := range staying {
		if p.KeepExtras || refused(p) {
			continue
		}
		if t.Remove(p); t.Meets(spec) {
			out = append(out, p)
			continue
		}
		t.Add(p)
	}
	return out
}

// Quorums before extras: a member beyond its gang's quorum leaves capacity to the quorums of
// gangs still waiting in line, as taking back extras (evict.go) returns it to them.

// ProtectedQuorums is the view of a member beyond its gang's (own's) quorum, at prio: the
// reservations it respects (Above), and the capacity, per node, it must leave alone: where the
// quorums of the waiting gangs at priority at least prio would be placed now, in line order, each
// beside bound pods, reservations and the quorums before it. A quorum that does not fit now
// protects nothing: the gang cannot use the capacity yet.
func (s *Snapshot) ProtectedQuorums(own string, prio int32) View {
	v := Above(own, prio)
	v.Quorums, v.QuorumsOf = s.protectedQuorums(own, prio)
	return v
}

func (s *Snapshot) protectedQuorums(own string, prio int32) (protected map[string]placement.Resources, of map[string][]string) {
	for _, w := range s.Line() {
		if w.Gang.Key == own || w.prio < prio || !w.Plannable || s.Reservations.hold(w.Gang.Key) != nil {
			continue // a starving gang's hold already keeps its quorum's capacity
		}
		held, _ := s.Reservations.Held(EveryOther(w.Gang.Key))
		for node, r := range protected {
			held[node] = held[node].Add(r)
		}
		in := s.planView(w.Gang, held, nil)
		in.Members = s.planMembers(w.Quorum, nil)
		plan := s.placeQuorum(w.Gang, in)
		if !plan.OK {
			continue
		}
		if protected == nil {
			protected, of = map[string]placement.Resources{}, map[string][]string{}
		}
		for i, node := range plan.Nodes {
			protected[node] = protected[node].Add(w.Quorum[i].Requests)
			if names := of[node]; len(names) == 0 || names[len(names)-1] != w.Gang.Key {
				of[node] = append(names, w.Gang.Key)
			}
		}
	}
	return protected, of
}

// MemberError is why a member is refused whatever the capacity: its markers or its group object
// are unusable, its rules disagree with its gang's, or it requires a network tier lockstep was not
// configured with.
func (s *Snapshot) MemberError(p *Pod) error {
	g := s.gangOf(p)
	if err := memberError(p, g); err != nil {
		return err
	}
	return s.tierError(p, g)
}

func memberError(p *Pod, g *Gang) error {
	if p.SpecErr != nil {
		return p.SpecErr
	}
	if p.ClaimsErr != nil {
		return p.ClaimsErr
	}
	if spec := p.Spec; spec != nil && spec.Priority != nil && p.Priority != *spec.Priority {
		return fmt.Errorf("pod %s: priority %d: %s has priority %d, and every pod of the group must have it, as kube-scheduler requires (give the pods the group's PriorityClass)",
			p.Key(), p.Priority, spec.Source, *spec.Priority)
	}
	ref, refPod := g.Reference()
	if p.Spec == nil || refPod == p {
		return nil
	}
	if err := gangspec.Disagreement(p.Key(), p.Spec, ref, refPod.Key()); err != nil {
		return err
	}
	if p.Priority != refPod.Priority {
		return fmt.Errorf("pod %s: priority %d: gang %s already has priority %d (from pod %s); all members must agree (give them one PriorityClass)",
			p.Key(), p.Priority, g.Key, refPod.Priority, refPod.Key())
	}
	if !rule(p.Topology).same(rule(refPod.Topology)) {
		return fmt.Errorf("pod %s: network topology %q: gang %s already asks %q (from pod %s); all members must agree",
			p.Key(), rule(p.Topology), g.Key, rule(refPod.Topology), refPod.Key())
	}
	return nil
}

// Disagreement is why member p's rules disagree with its gang's reference member's, nil when they
// agree (or p is the reference).
func (g *Gang) Disagreement(p *Pod) error {
	spec, ref := g.Reference()
	if ref == nil || p == ref {
		return nil
	}
	return gangspec.Disagreement(p.Key(), p.Spec, spec, ref.Key())
}
