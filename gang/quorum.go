package gang

import (
	"fmt"
	"maps"
	"slices"
	"strings"

	"github.com/lockstep-sched/lockstep/gangspec"
)

// A gang's quorum is MinAvailable members in all and, when its rules name tasks (Volcano's
// minTaskMember), each task's own minimum, all placed in the same commit. tally counts members
// toward it; every decision about quorum (reserve, commit, satisfied) goes through here.
type tally struct {
	total  int
	byTask map[string]int
}

// short reports whether p's task still lacks members.
func (t *tally) short(p *podInfo, spec *gangspec.Spec) bool {
	need, ok := spec.MinPerTask[p.task]
	return ok && t.byTask[p.task] < need
}

func (t *tally) add(p *podInfo) {
	t.total++
	if p.task != "" {
		if t.byTask == nil {
			t.byTask = map[string]int{}
		}
		t.byTask[p.task]++
	}
}

// meets reports whether the counted members make the quorum.
func (t *tally) meets(spec *gangspec.Spec) bool {
	if t.total < spec.MinAvailable {
		return false
	}
	for task, n := range spec.MinPerTask {
		if t.byTask[task] < n {
			return false
		}
	}
	return true
}

// tasksLacking words which tasks lack members, e.g. " (task worker: 2 of 3)"; "" when none do.
func (t *tally) tasksLacking(spec *gangspec.Spec) string {
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

// counted is the tally of the gang's bound members that count toward quorum under its match
// policy: none under only-waiting. Members on their way out (evicted, deleted) do not count: a
// gang preempted whole still shows them bound while they terminate, and its replacements must
// gather a quorum again rather than bind one by one beside members about to go.
func (g *gangInfo) counted(spec *gangspec.Spec) tally {
	var t tally
	if spec.Policy == gangspec.OnlyWaiting {
		return t
	}
	for _, p := range g.members {
		if p.holds() && !p.going() {
			t.add(p)
		}
	}
	return t
}

// satisfied reports whether the gang's members schedule as ordinary pods: its quorum is bound,
// or (once-satisfied) was bound once and some member of it still runs. A once-satisfied gang
// whose every bound member is gone or going starts over.
func (g *gangInfo) satisfied(spec *gangspec.Spec) bool {
	if spec.Policy == gangspec.OnceSatisfied && g.satisfiedOnce && g.anyStaying() {
		return true
	}
	t := g.counted(spec) // empty under only-waiting: never satisfied
	return t.meets(spec)
}

// anyStaying reports whether a member holds a node and is not on its way out.
func (g *gangInfo) anyStaying() bool {
	for _, p := range g.members {
		if p.holds() && !p.going() {
			return true
		}
	}
	return false
}

// noteBound remembers, for once-satisfied gangs, that the quorum was bound.
func (g *gangInfo) noteBound() {
	if spec, _ := g.reference(); spec != nil && spec.Policy == gangspec.OnceSatisfied && !g.satisfiedOnce {
		t := g.counted(spec)
		g.satisfiedOnce = t.meets(spec)
	}
}

// readyWords says how far the counted members are from the quorum at bind, e.g. "3 of 4 members
// ready to bind (task ps: 0 of 1)".
func (t *tally) readyWords(spec *gangspec.Spec) string {
	return fmt.Sprintf("%d of %d members ready to bind%s", t.total, spec.MinAvailable, t.tasksLacking(spec))
}

// ready is the tally a reservation's commit waits for: the members waiting at bind plus those
// that count already.
func (g *gangInfo) ready(spec *gangspec.Spec, res *reservation) tally {
	t := g.counted(spec)
	for _, s := range res.slots {
		if s.state == slotWaiting {
			t.add(s.pod)
		}
	}
	return t
}
