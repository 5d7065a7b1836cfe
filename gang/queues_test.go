package gang

import (
	"fmt"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"

	"github.com/lockstep-sched/lockstep/gangspec"
	"github.com/lockstep-sched/lockstep/placement"
	"github.com/lockstep-sched/lockstep/quota"
	"github.com/lockstep-sched/lockstep/test/lib/builders"
	"github.com/lockstep-sched/lockstep/wellknown"
)

const volcanoQueue = "Volcano Queue"

// queuedGang is a Volcano gang of n one-pod members asking gpus each, whose PodGroup (told to
// the manager) names queue; all n form its quorum.
func (e *env) queuedGang(group, queue string, n int, gpus int64) []*corev1.Pod {
	pods := make([]*corev1.Pod, n)
	for i := range pods {
		pods[i] = builders.Pod("default", fmt.Sprintf("%s-%d", group, i)).GPU(gpus).CPU("1").Memory("1Gi").
			Annotation(wellknown.AnnotationGroupName, group).Created(t0.Add(timeSecond(i))).Obj()
	}
	spec := &gangspec.Spec{MinAvailable: n, Queue: quota.Ref{Kind: volcanoQueue, Name: queue, Fallback: quota.DefaultName}}
	e.m.SetGroup(volcanoRules(group, spec, nil))
	e.add(pods...)
	return pods
}

// bindQuorum places and binds every member of a gang that fits, as the scheduler would.
func (e *env) bindQuorum(pods []*corev1.Pod) {
	e.t.Helper()
	nodes := make([]string, len(pods))
	for i, p := range pods {
		nodes[i] = e.filterOne(p)
	}
	var held []<-chan error
	for i, p := range pods[:len(pods)-1] {
		held = append(held, e.bindAsync(p, nodes[i]))
	}
	last := len(pods) - 1
	require.NoError(e.t, e.bind(pods[last], nodes[last]))
	for _, h := range held {
		require.NoError(e.t, recv(e.t, h, "held bind"))
	}
}

// requireWaits checks that every member of the gang is turned away from every node with a reason
// containing want.
func (e *env) requireWaits(pods []*corev1.Pod, want string) {
	e.t.Helper()
	for _, p := range pods {
		r := e.filter(p)
		require.Empty(e.t, r.Feasible, "pod %s must wait", keyOf(p))
		for _, why := range r.Failed {
			require.Contains(e.t, why, want)
		}
	}
}

func (e *env) queueView(name string) QueueView {
	e.t.Helper()
	v, ok := queueView(e.m, quota.Key(volcanoQueue, name))
	require.True(e.t, ok, "queue %s unknown", name)
	return v
}

func gpuQueue(name string, opts ...func(*quota.Queue)) quota.Queue {
	q := quota.Queue{Kind: volcanoQueue, Name: name, Weight: 1, State: quota.Open, Reclaimable: true}
	for _, o := range opts {
		o(&q)
	}
	return q
}

func withCapability(n int64) func(*quota.Queue) {
	return func(q *quota.Queue) {
		q.Capability = quota.Limit{Amount: placement.Resources{GPU: n}, Named: quota.GPU}
	}
}

func withWeight(w int64) func(*quota.Queue) { return func(q *quota.Queue) { q.Weight = w } }

// A gang whose quorum would take its queue over capability waits whole; one that fits binds, and
// what it holds counts against the next.
func TestQueueCapabilityHoldsGangWhole(t *testing.T) {
	e := newEnv(t, testConfig(), gpuNodes("n", 4, 2)...)
	e.m.SetQueue(gpuQueue("team-a", withCapability(4)))

	five := e.queuedGang("five", "team-a", 5, 1)
	e.requireWaits(five, "gang default/five waits for its queue: Volcano Queue team-a: nvidia.com/gpu would go over its limit of 4: it holds 0 and gang default/five's quorum asks 5 more")
	require.Error(t, e.bind(five[0], "n-0"), "no member of a waiting gang binds")
	v := e.queueView("team-a")
	require.Len(t, v.Gangs, 1)
	assert.Equal(t, "default/five", v.Gangs[0].Gang)
	assert.Equal(t, int64(5), v.Gangs[0].Asks.GPU)
	assert.Equal(t, "Volcano Queue team-a", e.status("default", "five").Queue, "/debug/gangs names the gang's queue")

	four := e.queuedGang("four", "team-a", 4, 1)
	e.bindQuorum(four)
	v = e.queueView("team-a")
	assert.Equal(t, int64(4), v.Used.GPU, "the bound quorum counts as used")
	assert.Equal(t, int64(4), v.Allocated.GPU)

	one := e.queuedGang("one", "team-a", 1, 1)
	e.requireWaits(one, "it holds 4 and gang default/one's quorum asks 1 more")
	e.requireWaits(five, "it holds 4")
}

// Capacity a reservation holds counts against the queue before anything binds: two gangs
// filtered one after the other cannot both take a queue's last room.
func TestQueueCountsReservationsBeforeBinding(t *testing.T) {
	e := newEnv(t, testConfig(), gpuNodes("n", 4, 2)...)
	e.m.SetQueue(gpuQueue("team-a", withCapability(4)))
	a := e.queuedGang("a", "team-a", 3, 1)
	b := e.queuedGang("b", "team-a", 2, 1)
	e.filterOne(a[0]) // reserves a's whole quorum
	assert.Equal(t, int64(3), e.queueView("team-a").Held.GPU)
	e.requireWaits(b, "it holds 3 and gang default/b's quorum asks 2 more")
}

// A closed queue takes no new gang; opened, it does, and the change wakes its waiting gang.
func TestClosedQueueTakesNoNewGang(t *testing.T) {
	e := newEnv(t, testConfig(), gpuNodes("n", 2, 2)...)
	e.m.SetQueue(gpuQueue("team-a", func(q *quota.Queue) { q.State = quota.Closed }))
	g := e.queuedGang("g", "team-a", 2, 1)
	e.requireWaits(g, "Volcano Queue team-a is Closed: it takes no new work")
	e.m.SetQueue(gpuQueue("team-a"))
	e.bindQuorum(g)
}

// A queue nobody created keeps its gangs waiting with a reason that says so; the implicit default
// queue needs no object.
func TestMissingQueueWaitsAndDefaultNeedsNoObject(t *testing.T) {
	e := newEnv(t, testConfig(), gpuNodes("n", 2, 2)...)
	e.m.SetQueue(gpuQueue("team-a"))
	e.requireWaits(e.queuedGang("lost", "nope", 1, 1), "Volcano Queue nope does not exist")
	e.bindQuorum(e.queuedGang("plain", "", 2, 1))
	v := e.queueView(quota.DefaultName)
	assert.False(t, v.Defined)
	assert.Equal(t, int64(2), v.Used.GPU)
}

// With weights 3:1 and both queues waiting, a queue at its share leaves what frees to the one
// below it.
func TestQueueOverItsShareLeavesFreedCapacityToTheOneBelow(t *testing.T) {
	e := newEnv(t, testConfig(), gpuNodes("n", 4, 2)...)
	e.m.SetQueue(gpuQueue("a", withWeight(3)))
	e.m.SetQueue(gpuQueue("b", withWeight(1)))
	var aGangs [][]*corev1.Pod
	for i := range 3 {
		g := e.queuedGang(fmt.Sprintf("a%d", i), "a", 2, 1)
		e.bindQuorum(g) // alone, a may fill the idle cluster
		aGangs = append(aGangs, g)
	}
	bGang := e.queuedGang("b0", "b", 2, 1)
	aNext := e.queuedGang("a3", "a", 2, 1)
	e.bindQuorum(bGang)                                              // 2 free, b below its share of 2
	e.requireWaits(aNext, "2 members need 2 nvidia.com/gpu, 0 free") // nothing free at all

	// One of a's gangs finishes: a is back at its share of 6 minus 2, b at its 2; a's next fits.
	for _, p := range aGangs[0] {
		e.m.DeletePod(p.UID)
	}
	bNext := e.queuedGang("b1", "b", 2, 1)
	e.requireWaits(bNext, "Volcano Queue b is at its fair share of nvidia.com/gpu (deserves 2, holds 2)")
	e.bindQuorum(aNext)
	assert.Equal(t, int64(6), e.queueView("a").Allocated.GPU)
	assert.Equal(t, int64(2), e.queueView("b").Allocated.GPU)
}

// An ordinary pod of a namespace with a quota counts against it and waits at its limit.
func TestNamespaceQuotaHoldsOrdinaryPods(t *testing.T) {
	e := newEnv(t, testConfig(), gpuNodes("n", 2, 2)...)
	e.m.SetQueue(quota.Queue{Kind: "ElasticQuota", Name: "default/q", Namespace: "default", Weight: 1, State: quota.Open,
		Capability: quota.Limit{Amount: placement.Resources{GPU: 2}, Named: quota.GPU}})
	for i := range 2 {
		p := builders.Pod("default", fmt.Sprintf("p-%d", i)).GPU(1).Obj()
		e.add(p)
		require.NoError(t, e.bind(p, e.place(p)))
	}
	third := builders.Pod("default", "p-2").GPU(1).Obj()
	e.add(third)
	r := e.filter(third)
	require.Empty(t, r.Feasible)
	assert.Contains(t, r.Failed["n-0"], "pod default/p-2 waits for its queue: ElasticQuota default/q: nvidia.com/gpu would go over its limit of 2: it holds 2 and the pod asks 1 more")
	other := builders.Pod("elsewhere", "p").GPU(1).Obj()
	e.add(other)
	assert.NotEmpty(t, e.filter(other).Feasible, "another namespace's pods are not under the quota")
}

// Pods bound before their namespace's quota existed count toward it once it does, and stop
// counting when it goes.
func TestQuotaCreatedAfterItsPodsCountsThem(t *testing.T) {
	e := newEnv(t, testConfig(), gpuNodes("n", 2, 2)...)
	p := builders.Pod("default", "early").GPU(2).Obj()
	e.add(p)
	require.NoError(t, e.bind(p, e.place(p)))
	q := quota.Queue{Kind: "ElasticQuota", Name: "default/q", Namespace: "default", Weight: 1, State: quota.Open}
	e.m.SetQueue(q)
	v, ok := queueView(e.m, q.Key())
	require.True(t, ok)
	assert.Equal(t, int64(2), v.Used.GPU)
	e.m.DeleteQueue(q.Key())
	_, ok = queueView(e.m, q.Key())
	assert.False(t, ok, "a deleted quota no pod counts toward is forgotten")
}

// The namespace's default queue (Volcano's annotation) moves the use of gangs naming none.
func TestNamespaceDefaultQueueMovesUse(t *testing.T) {
	e := newEnv(t, testConfig(), gpuNodes("n", 2, 2)...)
	e.m.SetQueue(gpuQueue("team-a", withCapability(2)))
	g := e.queuedGang("g", "", 2, 1)
	e.bindQuorum(g)
	assert.Equal(t, int64(2), e.queueView(quota.DefaultName).Used.GPU)
	e.m.SetNamespaceDefault("default", volcanoQueue, "team-a")
	assert.Equal(t, int64(2), e.queueView("team-a").Used.GPU)
	e.requireWaits(e.queuedGang("h", "", 1, 1), "Volcano Queue team-a: nvidia.com/gpu would go over its limit of 2")
}

// A gang its queue turns away never takes a starvation hold: it would keep capacity from the
// gangs its queue does take.
func TestGangItsQueueRefusesHoldsNothing(t *testing.T) {
	e, clock := starvationEnv(t) // two 4-GPU nodes
	e.m.SetQueue(gpuQueue("team-a", withCapability(4)))
	big := e.queuedGang("big", "team-a", 5, 1)
	clock.advance(2 * time.Minute) // past the starvation threshold
	e.requireWaits(big, "would go over its limit of 4")
	e.m.mu.Lock()
	e.m.holdForStarvingLocked(&effects{})
	holder := e.m.book.holder()
	e.m.mu.Unlock()
	assert.Empty(t, holder, "no hold for a gang its queue refuses")
	e.filterOne(e.queuedGang("fits", "team-a", 4, 1)[0]) // nothing held against the gang the queue takes
}

// A gang whose members the scheduler turns away before lockstep's filter (no node has room in
// its own eyes) still counts as waiting in its queue, so that its queue is owed its share.
func TestGangTurnedAwayByTheSchedulerCountsAsWaiting(t *testing.T) {
	e := newEnv(t, testConfig(), gpuNodes("n", 2, 2)...)
	e.m.SetQueue(gpuQueue("b"))
	pods := make([]*corev1.Pod, 2)
	for i := range pods {
		pods[i] = builders.Pod("default", fmt.Sprintf("b-%d", i)).GPU(1).Annotation(wellknown.AnnotationGroupName, "b").
			Created(t0.Add(timeSecond(i))).Obj()
	}
	e.m.SetGroup(volcanoRules("b", &gangspec.Spec{MinAvailable: 2, Queue: quota.Ref{Kind: volcanoQueue, Name: "b"}}, nil))
	e.add(pods...)
	assert.Equal(t, 0, e.queueView("b").Waiting)
	turned := pods[0].DeepCopy()
	turned.Status.Conditions = builders.Pod("x", "y").Unschedulable("0/2 nodes are available: 2 Insufficient nvidia.com/gpu.").Obj().Status.Conditions
	e.add(turned)
	v := e.queueView("b")
	assert.Equal(t, 1, v.Waiting)
	assert.Equal(t, int64(2), v.Wanted.GPU)
}

// Ordinary pods the scheduler placed together each passed filter before the others bound; the
// bind, where lockstep counts binds as they start, keeps the quota.
func TestQuotaHoldsAtBindForPodsFilteredTogether(t *testing.T) {
	e := newEnv(t, testConfig(), gpuNodes("n", 2, 2)...)
	e.m.SetQueue(quota.Queue{Kind: "ElasticQuota", Name: "default/q", Namespace: "default", Weight: 1, State: quota.Open,
		Capability: quota.Limit{Amount: placement.Resources{GPU: 1}, Named: quota.GPU}})
	first, second := builders.Pod("default", "p-0").GPU(1).Obj(), builders.Pod("default", "p-1").GPU(1).Obj()
	e.add(first, second)
	n0, n1 := e.place(first), e.place(second) // both filtered before either binds
	require.NoError(t, e.bind(first, n0))
	err := e.bind(second, n1)
	require.Error(t, err)
	assert.Contains(t, err.Error(), "pod default/p-1 waits for its queue: ElasticQuota default/q: nvidia.com/gpu would go over its limit of 1")
}

// A starving gang's hold is a claim on capacity others still use: it does not make its queue
// look served, so what frees elsewhere is still owed to that queue, not to one above its share.
func TestHoldDoesNotMakeAQueueLookServed(t *testing.T) {
	e := starvingEnv(t)
	e.m.SetQueue(gpuQueue("a", withWeight(3)))
	e.m.SetQueue(gpuQueue("b", withWeight(1)))
	var aGangs [][]*corev1.Pod
	for i := range 8 {
		g := e.queuedGang(fmt.Sprintf("a%d", i), "a", 1, 1)
		e.bindQuorum(g)
		aGangs = append(aGangs, g)
	}
	b0 := e.queuedGang("b0", "b", 2, 1)
	e.requireWaits(b0, "lockstep holds nodes") // b0 starves: it holds capacity as it frees
	e.m.DeletePod(aGangs[0][0].UID)            // one GPU frees; b0 needs two
	held := e.queueView("b")
	assert.True(t, held.Held.IsZero(), "a hold is not what its queue holds: %+v", held.Held)
	aNext := e.queuedGang("a8", "a", 1, 1)
	e.requireWaits(aNext, "owed to the waiting gangs of Volcano Queue b")
}

const koordinatorQuota = "Koordinator ElasticQuota"

func koordinatorGPUQuota(name string, gpus int64, namespaces ...string) quota.Queue {
	return quota.Queue{Kind: koordinatorQuota, Name: name, Namespaces: namespaces, Weight: gpus, State: quota.Open, Reclaimable: true,
		Capability: quota.Limit{Amount: placement.Resources{GPU: gpus}, Named: quota.GPU}}
}

// A pod whose Koordinator quota label names a quota counts toward it, wherever the quota lives,
// and waits at its max; its unlabelled neighbours are not under it.
func TestKoordinatorQuotaLabelHoldsThePodsThatNameIt(t *testing.T) {
	e := newEnv(t, testConfig(), gpuNodes("n", 2, 2)...)
	e.m.SetQueue(koordinatorGPUQuota("gpu-team", 2))
	for i := range 2 {
		p := builders.Pod("default", fmt.Sprintf("p-%d", i)).GPU(1).Label(wellknown.LabelKoordinatorQuotaName, "gpu-team").Obj()
		e.add(p)
		require.NoError(t, e.bind(p, e.place(p)))
	}
	v, ok := queueView(e.m, quota.Key(koordinatorQuota, "gpu-team"))
	require.True(t, ok)
	assert.Equal(t, int64(2), v.Used.GPU)
	third := builders.Pod("default", "p-2").GPU(1).Label(wellknown.LabelKoordinatorQuotaName, "gpu-team").Obj()
	e.add(third)
	r := e.filter(third)
	require.Empty(t, r.Feasible)
	assert.Contains(t, r.Failed["n-0"], "pod default/p-2 waits for its queue: Koordinator ElasticQuota gpu-team: nvidia.com/gpu would go over its limit of 2: it holds 2 and the pod asks 1 more")
	other := builders.Pod("default", "unlabelled").GPU(1).Obj()
	e.add(other)
	assert.NotEmpty(t, e.filter(other).Feasible, "a pod that names no quota is not under one its namespace is not covered by")
}

// A Koordinator gang in a namespace its quota covers (named after it) waits whole at the quota's
// max; one that fits binds.
func TestKoordinatorNamespaceQuotaHoldsGangWhole(t *testing.T) {
	e := newEnv(t, testConfig(), gpuNodes("n", 2, 2)...)
	e.m.SetQueue(koordinatorGPUQuota("team-a", 2, "team-a"))
	gang := func(name string, n int) []*corev1.Pod {
		pods := make([]*corev1.Pod, n)
		for i := range pods {
			pods[i] = builders.Pod("team-a", fmt.Sprintf("%s-%d", name, i)).GPU(1).Gang(name, n).Created(t0.Add(timeSecond(i))).Obj()
		}
		e.add(pods...)
		return pods
	}
	three := gang("three", 3)
	e.requireWaits(three, "gang team-a/three waits for its queue: Koordinator ElasticQuota team-a: nvidia.com/gpu would go over its limit of 2: it holds 0 and gang team-a/three's quorum asks 3 more")
	two := gang("two", 2)
	e.bindQuorum(two)
	v, ok := queueView(e.m, quota.Key(koordinatorQuota, "team-a"))
	require.True(t, ok)
	assert.Equal(t, int64(2), v.Used.GPU)
}

// Koordinator's default quota takes the pods of every namespace no other quota covers, those
// bound before it was created too; a namespace's own quota comes first.
func TestKoordinatorDefaultQuotaTakesTheRest(t *testing.T) {
	e := newEnv(t, testConfig(), gpuNodes("n", 2, 2)...)
	early := builders.Pod("elsewhere", "early").GPU(1).Obj()
	e.add(early)
	require.NoError(t, e.bind(early, e.place(early)))
	e.m.SetQueue(koordinatorGPUQuota("team-a", 1, "team-a"))
	e.m.SetQueue(koordinatorGPUQuota("koordinator-default-quota", 2, quota.AllNamespaces))
	def, ok := queueView(e.m, quota.Key(koordinatorQuota, "koordinator-default-quota"))
	require.True(t, ok)
	assert.Equal(t, int64(1), def.Used.GPU, "the pod bound before counts")
	mine := builders.Pod("team-a", "mine").GPU(1).Obj()
	e.add(mine)
	require.NoError(t, e.bind(mine, e.place(mine)))
	v, _ := queueView(e.m, quota.Key(koordinatorQuota, "team-a"))
	assert.Equal(t, int64(1), v.Used.GPU)
	e.m.DeleteQueue(quota.Key(koordinatorQuota, "koordinator-default-quota"))
	_, ok = queueView(e.m, quota.Key(koordinatorQuota, "koordinator-default-quota"))
	assert.False(t, ok, "its pods are resolved again: none counts toward it")
}

// A starving gang whose queue would end above its share holds nothing: the capacity that frees
// may by then be owed to a queue below its own share.
func TestGangPastItsQueueShareHoldsNothing(t *testing.T) {
	e := starvingEnv(t)
	e.m.SetQueue(gpuQueue("a", withWeight(3)))
	e.m.SetQueue(gpuQueue("b", withWeight(1)))
	for i := range 6 {
		e.bindQuorum(e.queuedGang(fmt.Sprintf("a%d", i), "a", 1, 1))
	}
	e.bindQuorum(e.queuedGang("b0", "b", 2, 1)) // b at its share of 2, a at its 6
	e.requireWaits(e.queuedGang("a6", "a", 1, 1), "0 free")
	b1 := e.queuedGang("b1", "b", 2, 1)
	e.requireWaits(b1, "0 free")
	e.m.mu.Lock()
	e.m.holdForStarvingLocked(&effects{})
	holder := e.m.book.holder()
	e.m.mu.Unlock()
	assert.Empty(t, holder, "a6 and b1 both wait past their queues' shares: neither may claim capacity as it frees")
}

// starvingEnv is two 4-GPU nodes under a starvation threshold of a minute, on a clock at the real
// time: every test gang, created at t0, has waited past it, and reservations made on this clock
// expire when the real time says (a held bind waits on a real timer).
func starvingEnv(t *testing.T) *env {
	cfg := testConfig()
	cfg.StarvationThreshold = time.Minute
	e := newEnv(t, cfg, gpuNodes("n", 2, 4)...)
	e.m.now = newTestClock(time.Now()).now
	return e
}
