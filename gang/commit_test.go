package gang

import (
	"context"
	"fmt"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/tools/record"

	"github.com/lockstep-sched/lockstep/test/lib/builders"
	"github.com/lockstep-sched/lockstep/wellknown"

	"github.com/lockstep-sched/lockstep/views"
)

// apiEnv is a manager whose binder is the real APIBinder over bindingAPI, so that what lockstep
// records can be checked against what the apiserver did.
type apiEnv struct {
	*env
	api *bindingAPI
	reg *prometheus.Registry
}

func newAPIEnv(t *testing.T, cfg Config, nodes []*corev1.Node, pods ...*corev1.Pod) *apiEnv {
	objs := make([]runtime.Object, len(pods))
	for i, p := range pods {
		objs[i] = p
	}
	api := newBindingAPI(t, objs...)
	binder := NewAPIBinder(api.client)
	binder.Backoff = wait.Backoff{Duration: time.Millisecond, Factor: 2, Steps: 1 << 30, Cap: 10 * time.Millisecond}
	e := &env{t: t, rec: record.NewFakeRecorder(10000), pods: map[string]*corev1.Pod{}}
	reg := prometheus.NewRegistry()
	e.m = NewManager(cfg, binder, e.getPod, e.rec, NewMetrics(reg))
	t.Cleanup(e.m.Stop)
	for _, n := range nodes {
		e.m.UpsertNode(n)
		e.nodes = append(e.nodes, n.Name)
	}
	e.add(pods...)
	return &apiEnv{env: e, api: api, reg: reg}
}

// The load test's stall: a bind whose context ended before the apiserver saw it must fail, and
// lockstep must not count the pod bound, or it refuses the scheduler's every retry.
func TestOrdinaryBindFollowsTheAPI(t *testing.T) {
	p := builders.Pod("default", "plain").UID("uid-plain").GPU(2).Obj()
	e := newAPIEnv(t, testConfig(), gpuNodes("n", 1, 2), p)
	ctx, cancel := context.WithCancel(context.Background())
	e.api.faults = []bindFault{{before: cancel, refuse: fmt.Errorf("client rate limiter Wait returned an error: %w", context.Canceled)}}

	err := e.m.Bind(ctx, "default", "plain", p.UID, "n-0")
	require.ErrorIs(t, err, context.Canceled)
	require.Empty(t, e.api.pod("plain").Spec.NodeName)
	require.Equal(t, []string{"n-0"}, e.filter(builders.Pod("default", "other").GPU(2).Obj()).Feasible,
		"the GPUs of a pod that is not bound are free")

	require.NoError(t, e.m.Bind(context.Background(), "default", "plain", p.UID, "n-0"), "the scheduler's retry")
	require.Equal(t, "n-0", e.api.pod("plain").Spec.NodeName)
	require.Empty(t, e.filter(builders.Pod("default", "other").GPU(2).Obj()).Feasible, "now they are taken")
}

// Under throttling and apiserver errors a committing gang keeps binding until every member is
// bound, and the window in which it was partly bound is measured and shown.
func TestCommitRetriesThroughThrottling(t *testing.T) {
	cfg := testConfig()
	cfg.BindWait = 30 * time.Second
	pods := members("default", "mpi", "w", 4, 4, 1)
	e := newAPIEnv(t, cfg, gpuNodes("n", 4, 1), pods...)
	var faults []bindFault
	for range 6 {
		faults = append(faults, bindFault{refuse: apierrors.NewTooManyRequests("slow down", 0)}, bindFault{refuse: apierrors.NewServiceUnavailable("etcd leader changed")})
	}
	e.api.faults = faults

	held := make([]<-chan error, len(pods))
	for i, p := range pods {
		held[i] = e.bindAsync(p, e.filterOne(p))
	}
	for i, ch := range held {
		require.NoError(t, recv(t, ch, pods[i].Name))
	}
	for _, p := range pods {
		require.NotEmpty(t, e.api.pod(p.Name).Spec.NodeName, "%s bound in the apiserver", p.Name)
	}
	posts, _ := e.api.writes()
	require.Equal(t, len(pods)+len(faults), posts, "every refused binding was sent again")

	st := e.status("default", "mpi")
	require.Equal(t, views.PhaseBound, st.Phase)
	require.NotNil(t, st.LastCommit)
	require.Equal(t, views.CommitStatus{Started: st.LastCommit.Started, Members: 4, Bound: 4,
		Duration: st.LastCommit.Duration, PartlyBoundFor: st.LastCommit.PartlyBoundFor}, *st.LastCommit)
	require.Equal(t, 1, testutil.CollectAndCount(e.reg, "lockstep_gang_commit_seconds"))
	require.Equal(t, 1, testutil.CollectAndCount(e.reg, "lockstep_gang_partly_bound_seconds"))
	require.Equal(t, 4.0, testutil.ToFloat64(e.m.metrics.binds.WithLabelValues("gang", "committed")))
	e.waitEvent(corev1.EventTypeNormal, wellknown.ReasonGangBound, "4 members bound in")
}

// A member deleted while its gang commits stops its binding at once instead of retrying until
// the commit's deadline; the rest of the commit goes on, and the partial gang is reported.
func TestCommitStopsForDeletedMember(t *testing.T) {
	cfg := testConfig()
	cfg.BindWait = 30 * time.Second
	cfg.CommitTimeout = time.Minute // far beyond recv's deadline: only cancellation ends w-1's binding in time
	e := newEnv(t, cfg, gpuNodes("n", 3, 1)...)
	pods := members("default", "mpi", "w", 3, 3, 1)
	e.add(pods...)
	block := make(chan struct{})
	e.binder.Block(block)

	held := make([]<-chan error, len(pods))
	for i, p := range pods {
		held[i] = e.bindAsync(p, e.filterOne(p))
	}
	e.waitStates("default", "mpi", map[string]string{"default/w-0": "WaitingForQuorum", "default/w-1": "WaitingForQuorum", "default/w-2": "WaitingForQuorum"})
	require.Eventually(t, func() bool { return e.status("default", "mpi").Phase == views.PhaseBinding }, 5*time.Second, 5*time.Millisecond)

	e.m.DeletePod(pods[1].UID)
	require.Eventually(t, func() bool {
		st := e.status("default", "mpi").LastCommit
		return st != nil && st.Failed == 1
	}, 5*time.Second, 5*time.Millisecond, "w-1's binding stops without waiting for the others or the deadline")
	close(block)

	for i, ch := range held {
		err := recv(t, ch, pods[i].Name)
		if i == 1 {
			require.ErrorIs(t, err, context.Canceled)
		} else {
			require.NoError(t, err)
		}
	}
	st := e.status("default", "mpi")
	require.Equal(t, 2, st.Bound)
	require.True(t, st.LastCommit.StillPartial)
	require.Contains(t, st.Reason, "partly bound (2 bound, min-available 3)")
}

// Condition writes are wake-up calls: when the apiserver cannot keep up they are dropped, counted,
// and never queued without bound.
func TestConditionWritesDropWhenQueueIsFull(t *testing.T) {
	reg := prometheus.NewRegistry()
	m := NewManager(testConfig(), newFakeBinder(), nil, nil, NewMetrics(reg))
	t.Cleanup(m.Stop)
	stuck := &blockingConditionWriter{entered: make(chan struct{}, 1), release: make(chan struct{})}
	defer close(stuck.release)
	write := conditionWrite{"default", "w-0", corev1.PodCondition{Type: wellknown.ConditionGangScheduled, Reason: wellknown.ConditionReasonCapacityFreed}}

	m.SetConditionWriter(stuck)
	m.wake.conditions.enqueue([]conditionWrite{write})
	recv(t, stuck.entered, "the first write reaches the writer")
	writes := make([]conditionWrite, conditionQueueSize+5)
	for i := range writes {
		writes[i] = write
	}
	m.wake.conditions.enqueue(writes)
	require.Equal(t, 5.0, testutil.ToFloat64(m.metrics.droppedConditions))
}

type blockingConditionWriter struct {
	entered chan struct{}
	release chan struct{}
}

func (w *blockingConditionWriter) SetCondition(ctx context.Context, _, _ string, _ corev1.PodCondition) error {
	select {
	case w.entered <- struct{}{}:
	default:
	}
	select {
	case <-w.release:
	case <-ctx.Done():
	}
	return nil
}

// The partly-bound clock runs from the first confirmed binding that leaves the gang below
// min-available to the binding that reaches it, or to the commit's end if none does.
func TestCommitRecordPartlyBoundClock(t *testing.T) {
	at := func(ms int) time.Time { return t0.Add(time.Duration(ms) * time.Millisecond) }
	tests := []struct {
		name         string
		boundBefore  int
		minAvailable int
		// confirmed are the milliseconds at which bindings are confirmed, in order.
		confirmed    []int
		finishAt     int
		wantPartly   time.Duration
		wantStill    bool
		wantNoteHint string
	}{
		{name: "four bindings 1ms apart", minAvailable: 4, confirmed: []int{10, 11, 12, 13}, finishAt: 13,
			wantPartly: 3 * time.Millisecond, wantNoteHint: "partly bound for 3ms"},
		{name: "min-available 1: never partial", minAvailable: 1, confirmed: []int{10, 11}, finishAt: 11,
			wantNoteHint: "no member was left bound alone"},
		{name: "partial from the start after an earlier commit", boundBefore: 2, minAvailable: 4, confirmed: []int{50, 70}, finishAt: 70,
			wantPartly: 70 * time.Millisecond},
		{name: "ends partial: counts to the end", minAvailable: 3, confirmed: []int{10, 20}, finishAt: 900,
			wantPartly: 890 * time.Millisecond, wantStill: true, wantNoteHint: "partly bound (2 bound, min-available 3)"},
		{name: "nothing bound", minAvailable: 3, finishAt: 900, wantNoteHint: "no member was left bound alone"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			r := newCommitRecord(at(0), len(tc.confirmed)+1, tc.boundBefore, tc.minAvailable)
			for i, ms := range tc.confirmed {
				r.bindingConfirmed(at(ms), tc.boundBefore+i+1)
			}
			r.finish(at(tc.finishAt))
			require.Equal(t, tc.wantPartly, r.partlyBoundFor())
			require.Equal(t, tc.wantStill, r.stillPartial())
			require.Equal(t, len(tc.confirmed), r.bound)
			require.Equal(t, time.Duration(tc.finishAt)*time.Millisecond, r.duration())
			if tc.wantNoteHint != "" {
				require.Contains(t, r.partialNote(), tc.wantNoteHint)
			}
		})
	}
}

// While a gang commits, the informer can report a member bound before its binding call returns.
// The capacity is then the bound pod's in the ledger, and the slot must stop holding it too:
// counted twice, another gang is refused capacity that is free, and nothing the scheduler sees
// (another pod's binding is no event for a parked pod) would ever send it back.
func TestBoundMemberIsNotCountedTwiceWhileItsGangCommits(t *testing.T) {
	cfg := testConfig()
	cfg.BindWait = 30 * time.Second
	e := newEnv(t, cfg, gpuNodes("n", 1, 4)...)
	first := members("default", "first", "a", 2, 2, 1)
	second := members("default", "second", "b", 2, 2, 1)
	e.add(first...)
	e.add(second...)
	block := make(chan struct{})
	e.binder.Block(block)
	held := make([]<-chan error, len(first))
	nodes := make([]string, len(first))
	for i, p := range first {
		nodes[i] = e.filterOne(p)
		held[i] = e.bindAsync(p, nodes[i])
	}
	require.Eventually(t, func() bool { return e.status("default", "first").Phase == views.PhaseBinding }, 5*time.Second, 5*time.Millisecond)

	// The informer is first with the news: both bound, their binding calls still out.
	for i, p := range first {
		bound := p.DeepCopy()
		bound.Spec.NodeName = nodes[i]
		e.add(bound)
	}
	r := e.filter(second[0])
	require.Len(t, r.Feasible, 1, "the second gang's quorum fits what is free: %v", r.Failed)
	close(block)
	for i, ch := range held {
		require.NoError(t, recv(t, ch, first[i].Name))
	}
}

// A gang that turned members away for lack of members wakes one of them when the next member is
// created: the scheduler does not try a parked pod again because another pod appeared.
func TestArrivingMemberWakesItsGang(t *testing.T) {
	e := newEnv(t, testConfig(), gpuNodes("n", 2, 2)...)
	writes := &recordingConditions{}
	e.m.SetConditionWriter(writes)
	pods := members("default", "phoenix", "p", 2, 2, 1)
	e.add(pods[0])
	r := e.filter(pods[0])
	require.Empty(t, r.Feasible)
	require.Contains(t, r.Failed[e.nodes[0]], "waiting for members: 1 of min-available 2 exist")
	require.Empty(t, writes.reasons("default/p-0"), "nothing to wake yet")

	e.add(pods[1])
	require.Eventually(t, func() bool {
		return slices.Contains(writes.reasons("default/p-0"), wellknown.ConditionReasonMemberArrived)
	}, 5*time.Second, 5*time.Millisecond, "the member turned away is woken")
	e.add(pods[1]) // an update of a known member wakes nobody again
	require.Never(t, func() bool { return len(writes.reasons("default/p-0")) > 1 }, 100*time.Millisecond, 10*time.Millisecond)
}

// Members turned away one after another while their gang was short wait in the scheduler for a
// change. An arrival wakes only the oldest of them, so the reservation the last one makes recalls,
// once it has had recallAfter to come back by itself, each of the others that did not.
func TestReservationRecallsMembersTurnedAway(t *testing.T) {
	e, clock, writes := wakeEnv(t, gpuNodes("n", 2, 2)...)
	pods := members("default", "trickle", "p", 4, 4, 1)
	for _, p := range pods[:3] {
		e.add(p)
		require.Empty(t, e.filter(p).Feasible, "%s: the gang is short", p.Name)
	}
	e.add(pods[3])
	require.Eventually(t, func() bool {
		return slices.Equal(writes.reasons("default/p-0"), slices.Repeat([]string{wellknown.ConditionReasonMemberArrived}, 3))
	}, 5*time.Second, 5*time.Millisecond, "each arrival after a member was turned away wakes the oldest")

	require.Len(t, e.filter(pods[3]).Feasible, 1, "the last member reserves for all four")
	require.Len(t, e.filter(pods[1]).Feasible, 1, "p-1 came back by itself")
	e.m.checkWaitingGangs()
	require.Never(t, func() bool { return len(writes.reasons("default/p-2")) > 0 }, 50*time.Millisecond, 10*time.Millisecond,
		"too early: a member turned away once is usually on its way back already")

	clock.advance(recallAfter)
	e.m.checkWaitingGangs()
	require.Eventually(t, func() bool {
		return slices.Equal(writes.reasons("default/p-2"), []string{wellknown.ConditionReasonPlaceReserved})
	}, 5*time.Second, 5*time.Millisecond, "p-2 is recalled to its place")
	e.m.checkWaitingGangs()
	for _, p := range []*corev1.Pod{pods[0], pods[2]} {
		require.Len(t, e.filter(p).Feasible, 1, "%s passes its reserved node", p.Name)
	}
	require.Never(t, func() bool {
		return len(writes.reasons("default/p-0")) != 3 || len(writes.reasons("default/p-1")) != 0 ||
			len(writes.reasons("default/p-2")) != 1 || len(writes.reasons("default/p-3")) != 0
	}, 100*time.Millisecond, 10*time.Millisecond, "no more writes: a recall once, none for those back at filter")
}

// wakeEnv is an env on a clock the test moves, recording the conditions the manager writes.
func wakeEnv(t *testing.T, nodes ...*corev1.Node) (*env, *testClock, *recordingConditions) {
	e := newEnv(t, testConfig(), nodes...)
	clock := newTestClock(time.Now())
	e.m.mu.Lock() // the sweep reads the clock on its own goroutine
	e.m.now = clock.now
	e.m.mu.Unlock()
	writes := &recordingConditions{}
	e.m.SetConditionWriter(writes)
	return e, clock, writes
}

// recordingConditions keeps the condition reasons written, per pod.
type recordingConditions struct {
	mu  sync.Mutex
	got map[string][]string
}

func (w *recordingConditions) SetCondition(_ context.Context, namespace, name string, cond corev1.PodCondition) error {
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.got == nil {
		w.got = map[string][]string{}
	}
	w.got[namespace+"/"+name] = append(w.got[namespace+"/"+name], cond.Reason)
	return nil
}

func (w *recordingConditions) reasons(pod string) []string {
	w.mu.Lock()
	defer w.mu.Unlock()
	return slices.Clone(w.got[pod])
}

// A gang turned away while its quorum did not fit, and never retried since, is woken once its
// quorum fits free capacity, whatever freed it: the net under every other wake-up.
func TestStrandedGangIsWoken(t *testing.T) {
	e, clock, writes := wakeEnv(t, gpuNodes("n", 1, 2)...)
	blocker := members("default", "blocker", "b", 1, 1, 2)
	e.add(blocker...)
	e.place(blocker[0])
	pods := members("default", "late", "l", 2, 2, 1)
	e.add(pods...)
	require.Empty(t, e.filter(pods[0]).Feasible, "the node is full")

	e.m.DeletePod(blocker[0].UID) // freed: the scheduler would retry, but suppose it does not
	clock.advance(strandedAfter / 2)
	e.m.checkWaitingGangs()
	quorumFits := func() int {
		n := 0
		for _, r := range writes.reasons("default/l-0") {
			if r == wellknown.ConditionReasonQuorumFits {
				n++
			}
		}
		return n
	}
	require.Never(t, func() bool { return quorumFits() > 0 }, 50*time.Millisecond, 10*time.Millisecond, "too early")
	clock.advance(strandedAfter)
	e.m.checkWaitingGangs()
	require.Eventually(t, func() bool { return quorumFits() == 1 }, 5*time.Second, 5*time.Millisecond)
	clock.advance(2 * strandedAfter)
	e.m.checkWaitingGangs()
	require.Never(t, func() bool { return quorumFits() > 1 }, 50*time.Millisecond, 10*time.Millisecond,
		"once per refusal: a member that never comes back is kept away by the scheduler's own filters")

	// The member comes back and is turned away again (the node is taken meanwhile): the gang may
	// be woken again once the node frees.
	again := members("default", "again", "x", 1, 1, 2)
	e.add(again...)
	e.place(again[0])
	require.Empty(t, e.filter(pods[0]).Feasible)
	e.m.DeletePod(again[0].UID)
	clock.advance(strandedAfter)
	e.m.checkWaitingGangs()
	require.Eventually(t, func() bool { return quorumFits() == 2 }, 5*time.Second, 5*time.Millisecond)
}
