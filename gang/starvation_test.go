package gang

import (
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/lockstep-sched/lockstep/test/lib/builders"

	"github.com/lockstep-sched/lockstep/views"
)

// A big gang behind a stream of small pods: past the threshold it holds two nodes, the small pods
// that come after are kept off what frees there, and the gang reserves once the last pod running
// there when the hold began is gone.
func TestStarvingGangHoldsCapacityAsItFrees(t *testing.T) {
	e, clock := starvationEnv(t)
	running := []string{"s-0", "s-1", "s-2", "s-3"} // 2 GPUs each, two per node
	for i, name := range running {
		e.add(bound(name, []string{"n-0", "n-0", "n-1", "n-1"}[i], 2, 0, t0))
	}
	big := members("default", "big", "big", 2, 2, 4)
	e.add(big...)

	require.Empty(t, e.filter(big[0]).Feasible)
	require.Equal(t, views.PhaseWaiting, e.status("default", "big").Phase, "not starving yet")
	// A small pod finishes and another takes its place: without the rule this goes on forever.
	e.m.DeletePod(builders.UIDFor("default", "s-0"))
	next := builders.Pod("default", "s-4").GPU(2).CPU("1").Memory("1Gi").Obj()
	e.add(next)
	require.NotEmpty(t, e.filter(next).Feasible, "before the threshold the stream goes on")
	require.NoError(t, e.bind(next, "n-0"))

	clock.advance(2 * time.Minute)
	require.Empty(t, e.filter(big[0]).Feasible)
	st := e.status("default", "big")
	require.Equal(t, views.PhaseHolding, st.Phase)
	require.Contains(t, st.Reason, "need 8 nvidia.com/gpu, 0 free", "the reason still says what the gang lacks")
	require.Contains(t, st.Reason, "past --starvation-threshold 1m0s, so lockstep holds nodes n-0, n-1 for its quorum")

	// What frees on the held nodes is kept for the gang.
	e.m.DeletePod(builders.UIDFor("default", "s-1"))
	late := builders.Pod("default", "s-5").GPU(2).CPU("1").Memory("1Gi").Obj()
	e.add(late)
	r := e.filter(late)
	require.Empty(t, r.Feasible)
	require.Contains(t, r.Failed["n-0"], "reserved for gang default/big")
	// Higher priority is not held back.
	urgent := builders.Pod("default", "urgent").GPU(2).CPU("1").Memory("1Gi").Priority(1000).Obj()
	e.add(urgent)
	require.Equal(t, []string{"n-0"}, e.filter(urgent).Feasible)

	for _, name := range []string{"s-2", "s-3", "s-4"} {
		e.m.DeletePod(builders.UIDFor("default", name))
	}
	e.filterOne(big[0])
	require.Equal(t, views.PhaseReserving, e.status("default", "big").Phase)
}

// A gang whose quorum would not fit even on an empty cluster holds nothing, however long it waits.
func TestStarvationRuleNeedsAQuorumThatFits(t *testing.T) {
	e, clock := starvationEnv(t)
	huge := members("default", "huge", "huge", 3, 3, 4)
	e.add(huge...)
	require.Empty(t, e.filter(huge[0]).Feasible)
	clock.advance(time.Hour)
	require.Empty(t, e.filter(huge[0]).Feasible)
	require.Equal(t, views.PhaseWaiting, e.status("default", "huge").Phase)
}

// starvationEnv is two 4-GPU nodes under a starvation threshold of a minute, on a clock 30s past
// t0, when the tests' members are created.
func starvationEnv(t *testing.T) (*env, *testClock) {
	cfg := testConfig()
	cfg.StarvationThreshold = time.Minute
	e := newEnv(t, cfg, gpuNodes("n", 2, 4)...)
	clock := newTestClock(t0.Add(30 * time.Second))
	e.m.now = clock.now
	return e, clock
}

// testClock is a manager clock the test moves; the manager's sweep reads it on its own goroutine.
type testClock struct {
	mu sync.Mutex
	t  time.Time
}

func newTestClock(t time.Time) *testClock { return &testClock{t: t} }

func (c *testClock) now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.t
}

func (c *testClock) advance(d time.Duration) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.t = c.t.Add(d)
}

// A starving gang whose members never reach filter (no node has room for one of them in the
// scheduler's eyes) gets its hold from the sweep.
func TestSweepHoldsForAGangThatNeverReachedFilter(t *testing.T) {
	e, clock := starvationEnv(t)
	for i, node := range []string{"n-0", "n-0", "n-1", "n-1"} {
		e.add(bound(fmt.Sprintf("s-%d", i), node, 2, 0, t0))
	}
	e.add(members("default", "big", "big", 2, 2, 4)...)
	require.Equal(t, views.PhaseWaiting, e.status("default", "big").Phase)

	clock.advance(time.Minute)
	require.Eventually(t, func() bool { return e.status("default", "big").Phase == views.PhaseHolding }, 5*time.Second, 10*time.Millisecond)
	require.Contains(t, e.status("default", "big").Reason, "gang default/big: 2 members need 8 nvidia.com/gpu, 0 free; it has waited")
}
