package gang

import (
	"fmt"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"

	"github.com/lockstep-sched/lockstep/test/lib/builders"
	"github.com/lockstep-sched/lockstep/wellknown"

	"github.com/lockstep-sched/lockstep/views"
)

func atPriority(p int32) func(*builders.PodBuilder) {
	return func(b *builders.PodBuilder) { b.Priority(p) }
}

// The case: on two 8-GPU nodes a 4 x 3 GPU gang at priority 100 reserves first; a 4 x 2
// GPU gang at 1000 does not fit beside it and takes its reservation over.
func TestHigherPriorityGangTakesReservationOver(t *testing.T) {
	e := newEnv(t, testConfig(), gpuNodes("n", 2, 8)...)
	low := members("default", "low", "low", 4, 4, 3, atPriority(100))
	high := members("default", "high", "high", 4, 4, 2, atPriority(1000))
	e.add(low...)
	e.add(high...)

	lowNode := e.filterOne(low[0])
	held := e.bindAsync(low[0], lowNode) // a held bind of the low gang, waiting for quorum
	e.waitStates("default", "low", map[string]string{"default/low-0": "WaitingForQuorum", "default/low-1": "Planned",
		"default/low-2": "Planned", "default/low-3": "Planned"})

	e.filterOne(high[0])
	require.Equal(t, views.PhaseReserving, e.status("default", "high").Phase)
	st := e.status("default", "high")
	require.Contains(t, st.Reason, "took over the reservations of lower-priority gang default/low (priority 100)")

	err := recv(t, held, "the low gang's held bind")
	require.ErrorContains(t, err, "reservation given up to higher-priority gang default/high (priority 1000)")
	lowSt := e.status("default", "low")
	require.Equal(t, views.PhaseWaiting, lowSt.Phase)
	require.Contains(t, lowSt.Reason, "was given up to higher-priority gang default/high (priority 1000)")
	require.Contains(t, lowSt.ReservationTakenBy, "gang default/high (priority 1000), at ")
	e.waitEvent(corev1.EventTypeWarning, wellknown.ReasonGangReservationYielded, "default/low", "default/high")

	// The low gang cannot take it back: its whole quorum does not fit, and it is lower.
	r := e.filter(low[1])
	require.Empty(t, r.Feasible)
	require.Contains(t, r.Failed["n-0"], "gang default/high holds")
	require.Equal(t, views.PhaseReserving, e.status("default", "high").Phase)
}

func TestTakeoverRules(t *testing.T) {
	cases := []struct {
		name               string
		lowPrio, highPrio  int32
		highGPUs           int64
		wantHighReserves   bool
		wantLowKeepsItsOwn bool
	}{
		{"equal priority: first come, first served", 500, 500, 2, false, true},
		{"lower priority never takes over", 500, 100, 2, false, true},
		{"higher priority whose quorum fits beside it: nothing is taken", 100, 1000, 1, true, true},
		{"higher priority whose quorum would not fit even alone: nothing is taken", 100, 1000, 5, false, true},
		{"higher priority that fits only without it: taken", 100, 1000, 2, true, false},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			e := newEnv(t, testConfig(), gpuNodes("n", 2, 8)...)
			low := members("default", "low", "low", 4, 4, 3, atPriority(tc.lowPrio))
			high := members("default", "high", "high", 4, 4, tc.highGPUs, atPriority(tc.highPrio))
			e.add(low...)
			e.add(high...)
			e.filterOne(low[0])

			r := e.filter(high[0])
			require.Equal(t, tc.wantHighReserves, len(r.Feasible) == 1, "high gang's filter: %v", r.Failed)
			require.Equal(t, tc.wantLowKeepsItsOwn, e.status("default", "low").Phase == views.PhaseReserving)
		})
	}
}

// Of several lower-priority reservations, only those whose capacity the taker needs are given up,
// the lowest priority first.
func TestTakeoverReleasesFewestLowestFirst(t *testing.T) {
	e := newEnv(t, testConfig(), gpuNodes("n", 3, 8)...)
	a := members("default", "a", "a", 1, 1, 8, atPriority(10))
	b := members("default", "b", "b", 1, 1, 8, atPriority(20))
	c := members("default", "c", "c", 1, 1, 8, atPriority(30))
	high := members("default", "high", "high", 2, 2, 8, atPriority(1000))
	for _, g := range [][]*corev1.Pod{a, b, c, high} {
		e.add(g...)
	}
	e.filterOne(a[0])
	e.filterOne(b[0])
	e.filterOne(c[0])

	e.filterOne(high[0])
	require.Equal(t, views.PhaseWaiting, e.status("default", "a").Phase)
	require.Equal(t, views.PhaseWaiting, e.status("default", "b").Phase)
	require.Equal(t, views.PhaseReserving, e.status("default", "c").Phase, "two nodes are enough: the highest of the lower gangs keeps its own")
}

// An ordinary pod of higher priority passes a node only a lower-priority reservation holds, and
// its bind takes that reservation over; a lower-priority pod is refused as before.
func TestOrdinaryPodTakesLowerPriorityReservation(t *testing.T) {
	e := newEnv(t, testConfig(), gpuNodes("n", 1, 8)...)
	low := members("default", "low", "low", 2, 2, 4, atPriority(100))
	e.add(low...)
	node := e.filterOne(low[0])

	lower := builders.Pod("default", "batch").GPU(2).CPU("1").Memory("1Gi").Priority(50).Obj()
	e.add(lower)
	r := e.filter(lower)
	require.Empty(t, r.Feasible)
	require.Contains(t, r.Failed[node], "reserved for gang default/low")

	urgent := builders.Pod("default", "urgent").GPU(2).CPU("1").Memory("1Gi").Priority(1000).Obj()
	e.add(urgent)
	require.Equal(t, []string{node}, e.filter(urgent).Feasible)
	require.Equal(t, views.PhaseReserving, e.status("default", "low").Phase, "filter only reads: the bind takes over")
	require.NoError(t, e.bind(urgent, node))
	st := e.status("default", "low")
	require.Equal(t, views.PhaseWaiting, st.Phase)
	require.Contains(t, st.Reason, "given up to higher-priority pod default/urgent (priority 1000)")
}

// Members of one gang must agree on their priority.
func TestMembersDisagreeOnPriority(t *testing.T) {
	e := newEnv(t, testConfig(), gpuNodes("n", 2, 8)...)
	pods := members("default", "g", "g", 2, 2, 1, atPriority(100))
	pods[1].Spec.Priority = new(int32(7))
	e.add(pods...)
	r := e.filter(pods[1])
	require.Empty(t, r.Feasible)
	require.Equal(t, "pod default/g-1: priority 7: gang default/g already has priority 100 (from pod default/g-0); all members must agree (give them one PriorityClass)", r.Failed["n-0"])
}

// The scheduler binds pods in parallel: two higher-priority pods binding at once onto room a
// lower reservation holds see each other, and the second takes the reservation over.
func TestParallelBindsTakeOverTogether(t *testing.T) {
	e := newEnv(t, testConfig(), gpuNodes("n", 1, 8)...)
	low := members("default", "low", "low", 3, 3, 2, atPriority(100))
	e.add(low...)
	node := e.filterOne(low[0]) // 6 of 8 GPUs reserved
	release := make(chan struct{})
	e.binder.Block(release) // both bindings wait at the apiserver
	var results []<-chan error
	for i := range 2 {
		p := builders.Pod("default", fmt.Sprintf("urgent-%d", i)).GPU(2).CPU("1").Memory("1Gi").Priority(1000).Obj()
		e.add(p)
		require.Equal(t, []string{node}, e.filter(p).Feasible)
		results = append(results, e.bindAsync(p, node))
	}
	require.Eventually(t, func() bool { return e.status("default", "low").Phase == views.PhaseWaiting }, 5*time.Second, 10*time.Millisecond,
		"the second bind counts the first, still on its way, and takes the reservation over")
	close(release)
	for _, ch := range results {
		require.NoError(t, recv(t, ch, "an urgent bind"))
	}
}
