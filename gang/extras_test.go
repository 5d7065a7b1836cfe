package gang

import (
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/lockstep-sched/lockstep/gangspec"
	"github.com/lockstep-sched/lockstep/test/lib/builders"
	"github.com/lockstep-sched/lockstep/wellknown"

	"github.com/lockstep-sched/lockstep/views"
)

// extrasEnv is two 4-GPU nodes with gang preemption on, the shape of Volcano's "multiple jobs"
// test: jobs of 8 x 1 GPU with min-available 2.
func extrasEnv(t *testing.T, ev *fakeEvicter, edit ...func(*Config)) *env {
	cfg := testConfig()
	cfg.Evicter = ev
	for _, f := range edit {
		f(&cfg)
	}
	return newEnv(t, cfg, gpuNodes("n", 2, 4)...)
}

// job is one of the shape's jobs, its members created a second apart from start.
func job(name string, start int, opts ...func(*builders.PodBuilder)) []*corev1.Pod {
	pods := members("default", name, name, 8, 2, 1, append([]func(*builders.PodBuilder){func(b *builders.PodBuilder) { b.TotalNumber(8) }}, opts...)...)
	for i, p := range pods {
		p.CreationTimestamp = metav1.NewTime(t0.Add(timeSecond(start + i)))
	}
	return pods
}

// firstJob creates job j1 and binds its quorum, then every member beyond it: what the scheduler
// does for a job whose mates do not exist yet.
func (e *env) firstJob(opts ...func(*builders.PodBuilder)) {
	e.t.Helper()
	pods := job("j1", 0, opts...)
	e.add(pods...)
	e.bindQuorum(pods[:2])
	for _, p := range pods[2:] {
		require.NoError(e.t, e.bind(p, e.place(p)))
	}
}

// turnAway delivers the scheduler's refusal of a pod, as its informer would: on a full cluster
// of equal-priority pods the scheduler neither calls lockstep's filter nor its preemption.
func (e *env) turnAway(p *corev1.Pod) {
	turned := p.DeepCopy()
	turned.Status.Conditions = builders.Pod("x", "y").Unschedulable("0/2 nodes are available: 2 Insufficient nvidia.com/gpu.").Obj().Status.Conditions
	e.add(turned)
}

// evicted finishes the evictions, as the kubelet would.
func (e *env) evicted(names ...string) {
	for _, name := range names {
		e.mu.Lock()
		p := e.pods[name]
		e.mu.Unlock()
		require.NotNil(e.t, p, name)
		e.m.DeletePod(p.UID)
	}
}

func boundCount(e *env, name string) int { return e.status("default", name).Bound }

// The case, in the order that used to fail: the first job's extras bound before the
// other jobs existed. Each later job takes back two of them, the youngest, and binds its quorum.
func TestQuorumTakesBackExtrasThatBoundFirst(t *testing.T) {
	ev := newFakeEvicter()
	e := extrasEnv(t, ev)
	e.firstJob()
	require.Equal(t, 8, boundCount(e, "j1"))

	for i, name := range []string{"j2", "j3"} {
		pods := job(name, 100*(i+1))
		e.add(pods...)
		e.turnAway(pods[0])
		taken := ev.waitEvicted(t, 2) // the evictions so far
		want := [][]string{{"default/j1-6", "default/j1-7"}, {"default/j1-4", "default/j1-5", "default/j1-6", "default/j1-7"}}[i]
		require.Equal(t, want, taken, "the youngest extras of j1 go")
		require.Equal(t, views.PhaseReserving, e.status("default", name).Phase)
		require.Contains(t, e.status("default", name).Reason, "taking back pod default/j1-")
		e.evicted([][]string{{"default/j1-6", "default/j1-7"}, {"default/j1-4", "default/j1-5"}}[i]...)
		e.bindQuorum(pods[:2])
	}
	assert.Equal(t, 4, boundCount(e, "j1"))
	assert.Equal(t, 2, boundCount(e, "j2"))
	assert.Equal(t, 2, boundCount(e, "j3"))
	assert.Equal(t, 4, e.status("default", "j1").ExtrasTakenBack)
	e.waitEvent(corev1.EventTypeWarning, wellknown.ReasonPreempted, "beyond gang default/j1's min-available 2", "for gang default/j2")
}

// What is taken back never cuts a gang below its quorum, nor below a task's minimum, and a
// member that opted out stays; a quorum that would need more waits and evicts nothing.
func TestTakingBackKeepsEveryQuorum(t *testing.T) {
	keep := func(b *builders.PodBuilder) { b.Annotation(wellknown.AnnotationKeepExtras, "true") }
	for _, tc := range []struct {
		name string
		j1   []func(*builders.PodBuilder)
		// need is the waiting quorum, in 1-GPU members.
		need int
		want []string
	}{
		{name: "six extras free six GPUs", need: 6, want: []string{"default/j1-2", "default/j1-3", "default/j1-4", "default/j1-5", "default/j1-6", "default/j1-7"}},
		{name: "the quorum's two are never taken", need: 7},
		{name: "extras that opted out stay", j1: []func(*builders.PodBuilder){keep}, need: 1},
	} {
		t.Run(tc.name, func(t *testing.T) {
			ev := newFakeEvicter()
			e := extrasEnv(t, ev)
			e.firstJob(tc.j1...)
			waiting := members("default", "w", "w", tc.need, tc.need, 1, func(b *builders.PodBuilder) { b.Created(t0.Add(time.Hour)) })
			e.add(waiting...)
			e.turnAway(waiting[0])
			if tc.want == nil {
				r := e.filter(waiting[0])
				require.Empty(t, r.Feasible)
				require.Empty(t, ev.evicted)
				return
			}
			require.Equal(t, tc.want, ev.waitEvicted(t, len(tc.want)))
		})
	}
}

// A task's minimum holds too: of a gang with ps min 1 and worker min 2 (min-available 3), with
// two ps and three workers bound, the younger ps and the youngest worker may go, nothing else.
func TestTakingBackKeepsTaskMinimums(t *testing.T) {
	ev := newFakeEvicter()
	e := extrasEnv(t, ev)
	e.m.SetGroup(volcanoRules("tf", &gangspec.Spec{MinAvailable: 3, MinPerTask: map[string]int{"ps": 1, "worker": 2}}, nil))
	e.add(boundOn(3, volcanoMembers("tf", 1, "ps", "worker", "ps", "worker", "worker"))...)
	require.Equal(t, 5, boundCount(e, "tf"))
	later := func(b *builders.PodBuilder) { b.Created(t0.Add(time.Hour)) }

	six := members("default", "six", "six", 6, 6, 1, later)
	e.add(six...)
	e.turnAway(six[0])
	require.Empty(t, e.filter(six[0]).Feasible, "3 GPUs are free and only 2 of tf's may go")
	require.Empty(t, ev.evicted)

	five := members("default", "five", "five", 5, 5, 1, later)
	e.add(five...)
	e.turnAway(five[0])
	require.Equal(t, []string{"default/ps-2", "default/worker-4"}, ev.waitEvicted(t, 2))
}

// A gang takes back only from gangs of equal or lower priority; a higher-priority gang's extras
// stay, and so do everyone's with the rule turned off.
func TestTakingBackRespectsPriorityAndTheSwitch(t *testing.T) {
	for _, tc := range []struct {
		name     string
		j1, w    int32
		off      bool
		evictsAt bool
	}{
		{name: "equal priority", j1: 100, w: 100, evictsAt: true},
		{name: "lower priority extras", j1: 10, w: 100, evictsAt: true},
		{name: "higher priority extras", j1: 1000, w: 100},
		{name: "--take-back-extras=false", j1: 100, w: 100, off: true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			ev := newFakeEvicter()
			e := extrasEnv(t, ev, func(c *Config) { c.NoExtrasTakeBack = tc.off })
			e.firstJob(atPriority(tc.j1))
			w := job("w", 100, atPriority(tc.w))
			e.add(w...)
			e.turnAway(w[0])
			if tc.evictsAt {
				require.Equal(t, []string{"default/j1-6", "default/j1-7"}, ev.waitEvicted(t, 2))
				return
			}
			e.filter(w[0])
			require.Empty(t, ev.evicted)
			require.NotEqual(t, views.PhaseReserving, e.status("default", "w").Phase)
		})
	}
}

// Two gangs planned before the informer shows the first one's victims going: the second chooses
// other extras, and never counts what the first one's evictions free as its own.
func TestTakingBackNeverChoosesAVictimTwice(t *testing.T) {
	ev := newFakeEvicter()
	e := extrasEnv(t, ev)
	e.firstJob()
	j2, j3 := job("j2", 100), job("j3", 200)
	e.add(j2...)
	e.add(j3...)
	e.turnAway(j2[0])
	e.turnAway(j3[0])
	require.Equal(t, []string{"default/j1-4", "default/j1-5", "default/j1-6", "default/j1-7"}, ev.waitEvicted(t, 4))
	for _, name := range []string{"j2", "j3"} {
		require.Equal(t, views.PhaseReserving, e.status("default", name).Phase, name)
	}
}
