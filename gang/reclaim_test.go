package gang

import (
	"fmt"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"

	"github.com/lockstep-sched/lockstep/gangspec"
	"github.com/lockstep-sched/lockstep/quota"
	"github.com/lockstep-sched/lockstep/test/lib/builders"
	"github.com/lockstep-sched/lockstep/wellknown"
)

// elasticGang is a Volcano gang of n one-GPU members of queue with min-available min, all bound:
// the quorum together, the rest one by one after it, as the scheduler binds them. Member i is
// created i seconds after start, so the last ones are the youngest.
func (e *env) elasticGang(group, queue string, n, min, start int) []*corev1.Pod {
	e.t.Helper()
	pods := make([]*corev1.Pod, n)
	for i := range pods {
		pods[i] = builders.Pod("default", fmt.Sprintf("%s-%d", group, i)).GPU(1).CPU("1").Memory("1Gi").
			Annotation(wellknown.AnnotationGroupName, group).Created(t0.Add(timeSecond(start + i))).Obj()
	}
	e.m.SetGroup(volcanoRules(group, &gangspec.Spec{MinAvailable: min, Queue: quota.Ref{Kind: volcanoQueue, Name: queue}}, nil))
	e.add(pods...)
	e.bindQuorum(pods[:min])
	for _, p := range pods[min:] {
		require.NoError(e.t, e.bind(p, e.place(p)))
	}
	return pods
}

func reclaimEnv(t *testing.T, ev *fakeEvicter, queues ...quota.Queue) *env {
	cfg := testConfig()
	cfg.Evicter, cfg.QueueReclaim = ev, true
	e := newEnv(t, cfg, gpuNodes("n", 4, 2)...)
	for _, q := range queues {
		e.m.SetQueue(q)
	}
	return e
}

// A queue below its share takes back what a queue above its share holds beyond its gangs'
// quorums, youngest first, and no more than it needs: the elastic gang keeps its quorum.
func TestReclaimTakesMembersBeyondQuorumFirst(t *testing.T) {
	ev := newFakeEvicter()
	e := reclaimEnv(t, ev, gpuQueue("a"), gpuQueue("b"))
	e.elasticGang("elastic", "a", 6, 2, 0)
	e.elasticGang("small", "a", 2, 2, 10)

	b := e.queuedGang("b", "b", 3, 1) // b deserves 4 of 8 once it waits
	e.filterOne(b[0])
	assert.Equal(t, []string{"default/elastic-3", "default/elastic-4", "default/elastic-5"}, ev.waitEvicted(t, 3),
		"the three youngest members beyond elastic's quorum of 2, not a whole gang")
	st := e.status("default", "b")
	assert.Contains(t, st.Reason, "reclaiming for Volcano Queue b, below its fair share,")
	e.waitEvent(corev1.EventTypeWarning, wellknown.ReasonPreempted, "reclaimed for gang default/b of Volcano Queue b")
}

// Reclaim never takes a queue below its share: a waiting gang that would need that waits.
func TestReclaimNeverTakesAQueueBelowItsShare(t *testing.T) {
	ev := newFakeEvicter()
	e := reclaimEnv(t, ev, gpuQueue("a"), gpuQueue("b"))
	e.elasticGang("a1", "a", 2, 2, 0)
	e.elasticGang("a2", "a", 2, 2, 10)
	e.elasticGang("b1", "b", 4, 4, 20) // b at its share of 4 already: a holds exactly its own 4

	b2 := e.queuedGang("b2", "b", 2, 1)
	e.requireWaits(b2, "0 free") // a waits for nothing: b may fill what is free, and nothing is
	a3 := e.queuedGang("a3", "a", 2, 1)
	e.requireWaits(a3, "0 free") // a is within its share, yet b holds nothing above its own
	ev.mu.Lock()
	defer ev.mu.Unlock()
	assert.Empty(t, ev.evicted, "neither queue is above its share: nothing is taken back")
}

// A queue that does not let others reclaim from it keeps what it holds.
func TestReclaimLeavesUnreclaimableQueuesAlone(t *testing.T) {
	ev := newFakeEvicter()
	e := reclaimEnv(t, ev, gpuQueue("a", func(q *quota.Queue) { q.Reclaimable = false }), gpuQueue("b"))
	e.elasticGang("elastic", "a", 8, 2, 0)
	b := e.queuedGang("b", "b", 2, 1)
	e.requireWaits(b, "0 free")
	ev.mu.Lock()
	defer ev.mu.Unlock()
	assert.Empty(t, ev.evicted)
}

// A whole gang goes only when the capacity cannot be had from members beyond quorums, and then
// the gang goes whole.
func TestReclaimTakesAGangWholeWhenItMust(t *testing.T) {
	ev := newFakeEvicter()
	e := reclaimEnv(t, ev, gpuQueue("a", withWeight(1)), gpuQueue("b", withWeight(1)))
	e.elasticGang("a1", "a", 4, 4, 0)
	e.elasticGang("a2", "a", 4, 4, 10)
	b := e.queuedGang("b", "b", 4, 1)
	e.filterOne(b[0])
	assert.Equal(t, []string{"default/a2-0", "default/a2-1", "default/a2-2", "default/a2-3"}, ev.waitEvicted(t, 4),
		"the younger gang goes, whole")
}

// Where queues are enforced, priority preempts only inside the preemptor's own queue.
func TestPriorityPreemptsOnlyInsideItsQueue(t *testing.T) {
	ev := newFakeEvicter()
	cfg := testConfig()
	cfg.Evicter = ev
	e := newEnv(t, cfg, gpuNodes("n", 1, 2)...)
	e.m.SetQueue(gpuQueue("a"))
	e.m.SetQueue(gpuQueue("b"))
	e.elasticGang("low", "a", 2, 2, 0)
	urgent := e.queuedGang("urgent", "b", 2, 1)
	for _, p := range urgent {
		p.Spec.Priority = ptrTo(int32(1000))
	}
	e.add(urgent...)
	e.requireWaits(urgent, "0 free")
	ev.mu.Lock()
	defer ev.mu.Unlock()
	assert.Empty(t, ev.evicted, "another queue's lower-priority gang is reclaim's to take, not preemption's")
}

func ptrTo[T any](v T) *T { return &v }

// The scheduler finds no victims among pods of equal priority and never asks lockstep about a
// gang it turns away on a full cluster; reclaim plans the gang when the scheduler's refusal
// reaches lockstep through the pod's condition.
func TestReclaimPlansAGangTheSchedulerTurnedAway(t *testing.T) {
	ev := newFakeEvicter()
	e := reclaimEnv(t, ev, gpuQueue("a"), gpuQueue("b"))
	e.elasticGang("elastic", "a", 8, 2, 0)
	b := e.queuedGang("b", "b", 2, 1)
	turned := b[0].DeepCopy()
	turned.Status.Conditions = builders.Pod("x", "y").Unschedulable("0/4 nodes are available: 4 Insufficient nvidia.com/gpu.").Obj().Status.Conditions
	e.add(turned)
	assert.Equal(t, []string{"default/elastic-6", "default/elastic-7"}, ev.waitEvicted(t, 2))
	assert.Contains(t, e.status("default", "b").Reason, "reclaiming for Volcano Queue b")
}

// A starving gang's hold must not hide it from reclaim: once the queue above its share lets
// others reclaim, the sweep takes back what the holding gang needs.
func TestReclaimServesAGangThatHolds(t *testing.T) {
	ev := newFakeEvicter()
	cfg := testConfig()
	cfg.Evicter, cfg.QueueReclaim, cfg.StarvationThreshold = ev, true, time.Minute
	e := newEnv(t, cfg, gpuNodes("n", 4, 2)...)
	e.m.now = newTestClock(time.Now()).now // every test gang, created at t0, has starved since
	e.m.SetQueue(gpuQueue("a", func(q *quota.Queue) { q.Reclaimable = false }))
	e.m.SetQueue(gpuQueue("b"))
	for i, name := range []string{"a0", "a1", "a2", "a3"} {
		e.elasticGang(name, "a", 2, 2, i*10)
	}
	b := e.queuedGang("within", "b", 2, 1)
	e.requireWaits(b, "lockstep holds nodes")
	e.m.SetQueue(gpuQueue("a")) // reclaimable again
	e.m.mu.Lock()
	e.m.strandedLook = time.Time{} // the sweep's next look is due
	e.m.mu.Unlock()
	e.m.checkWaitingGangs()
	assert.Equal(t, []string{"default/a3-0", "default/a3-1"}, ev.waitEvicted(t, 2), "the youngest gang of a goes, whole")
}
