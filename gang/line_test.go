package gang

import (
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/lockstep-sched/lockstep/test/lib/builders"

	"github.com/lockstep-sched/lockstep/views"
)

// Four gangs of 6 x 1 GPU with min-available 3 on 12 free GPUs: each gets its 3 before any gets
// a fourth (Volcano's and kube-batch's test of the same rule).
func TestQuorumsBeforeExtras(t *testing.T) {
	e := newEnv(t, testConfig(), gpuNodes("n", 3, 4)...)
	total := func(b *builders.PodBuilder) { b.TotalNumber(6) }
	for _, name := range []string{"a", "b", "c", "d"} {
		e.add(members("default", name, name, 6, 3, 1, total)...)
	}
	a := members("default", "a", "a", 6, 3, 1, total)
	for _, p := range a[:3] {
		e.filterOne(p) // the first reserves 3 places, the next two take theirs
	}

	r := e.filter(a[3])
	require.Empty(t, r.Feasible, "a-3 is beyond a's quorum while b, c and d wait for theirs")
	require.Contains(t, r.Failed["n-0"], "leave free capacity to the quorums of waiting gangs")

	for _, name := range []string{"b", "c", "d"} {
		pods := members("default", name, name, 6, 3, 1, total)
		e.filterOne(pods[0])
		require.Equal(t, views.PhaseReserving, e.status("default", name).Phase, "gang %s gets its quorum", name)
	}
}

// With nobody else waiting, a member beyond the quorum joins its gang's reservation.
func TestExtraJoinsWhenNobodyWaits(t *testing.T) {
	e := newEnv(t, testConfig(), gpuNodes("n", 3, 4)...)
	a := members("default", "a", "a", 6, 3, 1, func(b *builders.PodBuilder) { b.TotalNumber(6) })
	e.add(a...)
	for _, p := range a[:4] {
		e.filterOne(p)
	}
	require.Equal(t, "Reserved", e.memberStates("default", "a")["default/a-3"])
}

// Lower-priority gangs' quorums are not protected from a higher-priority gang's extras.
func TestExtrasIgnoreLowerPriorityQuorums(t *testing.T) {
	e := newEnv(t, testConfig(), gpuNodes("n", 1, 4)...)
	a := members("default", "a", "a", 4, 2, 1, func(b *builders.PodBuilder) { b.TotalNumber(4).Priority(100) })
	b := members("default", "b", "b", 2, 2, 1, atPriority(10))
	e.add(a...)
	e.add(b...)
	for _, p := range a[:3] {
		e.filterOne(p)
	}
	require.Equal(t, "Reserved", e.memberStates("default", "a")["default/a-2"], "b's quorum is lower priority: a's third member joins")
}

func TestPlaceInLine(t *testing.T) {
	e := newEnv(t, testConfig(), gpuNodes("n", 1, 1)...)
	// All three wait: each asks 2 GPUs of a 1-GPU node. Created in order old, newer, urgent.
	old := members("default", "old", "old", 2, 2, 1, atPriority(10))
	newer := members("default", "newer", "newer", 2, 2, 1, func(b *builders.PodBuilder) { b.Priority(10).Created(t0.Add(time.Hour)) })
	urgent := members("default", "urgent", "urgent", 2, 2, 1, func(b *builders.PodBuilder) { b.Priority(1000).Created(t0.Add(2 * time.Hour)) })
	e.add(old...)
	e.add(newer...)
	e.add(urgent...)

	line := map[string]*views.LineStatus{}
	for _, st := range e.m.Status("default") {
		line[st.Name] = st.Line
		require.NotNil(t, st.Line, st.Name)
	}
	require.Equal(t, &views.LineStatus{Place: 1, Of: 3, Why: "priority 1000; behind 0 gangs of higher priority and 0 of equal priority waiting longer"}, line["urgent"])
	require.Equal(t, &views.LineStatus{Place: 2, Of: 3, Why: "priority 10; behind 1 gang of higher priority and 0 of equal priority waiting longer"}, line["old"])
	require.Equal(t, &views.LineStatus{Place: 3, Of: 3, Why: "priority 10; behind 1 gang of higher priority and 1 of equal priority waiting longer"}, line["newer"])
	require.Equal(t, int32(1000), e.status("default", "urgent").Priority)
}

// After its quorum is bound a gang's further members schedule like ordinary pods, but still leave
// the quorum of a waiting gang of equal priority alone, and say whose.
func TestBoundGangExtrasLeaveWaitingQuorums(t *testing.T) {
	e := newEnv(t, testConfig(), gpuNodes("n", 1, 6)...)
	a := members("default", "a", "a", 6, 3, 1, func(b *builders.PodBuilder) { b.TotalNumber(6) })
	for _, p := range a[:3] {
		p.Spec.NodeName = "n-0"
	}
	b := members("default", "b", "b", 3, 3, 1)
	e.add(a...)
	e.add(b...)
	r := e.filter(a[3])
	require.Empty(t, r.Feasible)
	require.Contains(t, r.Failed["n-0"], "reserved for gang default/b (waiting for its quorum)")

	e.filterOne(b[0]) // b reserves its quorum; nothing waits any more
	r = e.filter(a[3])
	require.Empty(t, r.Feasible, "the node is full: 3 bound, 3 reserved")
	for _, p := range b {
		e.m.DeletePod(p.UID)
	}
	require.Equal(t, []string{"n-0"}, e.filter(a[3]).Feasible, "with nobody waiting the extra takes the capacity")
}
