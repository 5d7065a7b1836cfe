package gang

import (
	"fmt"
	"testing"

	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"

	"github.com/lockstep-sched/lockstep/test/lib/builders"
	"github.com/lockstep-sched/lockstep/wellknown"
)

func TestPrioritize(t *testing.T) {
	e := newEnv(t, testConfig(),
		builders.Node("full").GPU(8).CPU("64").Memory("256Gi").Pods(110).Obj(),
		builders.Node("empty").GPU(8).CPU("64").Memory("256Gi").Pods(110).Obj(),
		builders.Node("cpu").CPU("64").Memory("256Gi").Pods(110).Obj(),
		builders.Node("spare").GPU(8).CPU("64").Memory("256Gi").Pods(110).Obj(),
	)
	e.add(builders.Pod("default", "resident").GPU(6).Node("full").Obj())
	nodes := []string{"full", "empty", "cpu"}

	tests := []struct {
		name  string
		pod   *corev1.Pod
		check func(t *testing.T, scores []int64)
	}{
		{"gpu pod packs onto the fuller node", builders.Pod("default", "one").GPU(1).Obj(), func(t *testing.T, s []int64) {
			require.Greater(t, s[0], s[1], "full %d vs empty %d", s[0], s[1])
			require.Positive(t, s[1], "an empty node still fits")
			require.Zero(t, s[2], "a node without GPUs")
		}},
		{"gpu pod that does not fit scores 0", builders.Pod("default", "three").GPU(3).Obj(), func(t *testing.T, s []int64) {
			require.Equal(t, int64(0), s[0])
			require.Positive(t, s[1])
		}},
		{"pod without GPUs scores 0 everywhere", builders.Pod("default", "cpu-only").CPU("4").Obj(), func(t *testing.T, s []int64) {
			require.Equal(t, []int64{0, 0, 0}, s)
		}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			scores := e.m.Prioritize(tc.pod, nodes, nil)
			require.Len(t, scores, len(nodes))
			tc.check(t, scores)
		})
	}

	t.Run("reserved member scores its node highest", func(t *testing.T) {
		pods := members("default", "mpi", "w", 2, 2, 8)
		e.add(pods...)
		reserved := e.filterOne(pods[0])
		all := []string{"full", "empty", "cpu", "spare"}
		scores := e.m.Prioritize(pods[0], all, nil)
		for i, n := range all {
			if n == reserved {
				require.Equal(t, int64(wellknown.MaxScore), scores[i], n)
			} else {
				require.Equal(t, int64(0), scores[i], n)
			}
		}
		// A member not filtered yet scores the node its gang's plan holds for it.
		planned := e.m.Status("default")[0].Members[1].Node
		require.NotEmpty(t, planned)
		scores = e.m.Prioritize(pods[1], all, nil)
		for i, n := range all {
			if n == planned {
				require.Equal(t, int64(wellknown.MaxScore), scores[i], n)
			} else {
				require.Equal(t, int64(0), scores[i], n)
			}
		}
		// The scheduler's whole step, filter then prioritize, lands each member where its gang
		// holds a place for it.
		require.Equal(t, reserved, e.place(pods[0]))
		require.Equal(t, planned, e.place(pods[1]))
	})
}

// Nodes in many distinct states of use (more than the memo's array holds) must each score what
// the topology search gives for that node alone, and a reused score slice must come back without
// the previous call's values.
func TestPrioritizeMemoAndReusedScores(t *testing.T) {
	var nodes []*corev1.Node
	var names []string
	for i := range 48 {
		name := fmt.Sprintf("dgx-%02d", i)
		nodes = append(nodes, dgx1(name))
		names = append(names, name)
	}
	nodes = append(nodes, builders.Node("cpu").CPU("64").Memory("256Gi").Pods(110).Obj())
	names = append(names, "cpu")
	e := newEnv(t, testConfig(), nodes...)
	for i := range 48 {
		// Node i has GPUs taken by the bit pattern i%24 (indices known) plus i%3 taken without
		// indices: 24 states, so that the last nodes repeat states the memo keeps past its array.
		var ids []int
		for b := range 5 {
			if (i%24)&(1<<b) != 0 {
				ids = append(ids, b)
			}
		}
		if len(ids) > 0 {
			e.add(builders.Pod("default", fmt.Sprintf("known-%d", i)).GPU(int64(len(ids))).Node(names[i]).
				Annotation(wellknown.AnnotationGPUIDs, FormatGPUIDs(ids)).Obj())
		}
		if i%3 > 0 {
			e.add(builders.Pod("default", fmt.Sprintf("counted-%d", i)).GPU(int64(i % 3)).Node(names[i]).Obj())
		}
	}
	stale := make([]int64, len(names)+5)
	for i := range stale {
		stale[i] = 99
	}
	for _, k := range []int64{1, 2, 4} {
		pod := builders.Pod("default", fmt.Sprintf("want-%d", k)).GPU(k).Obj()
		scores := e.m.Prioritize(pod, names, stale)
		require.Len(t, scores, len(names))
		e.m.mu.RLock()
		for i, name := range names {
			n := e.m.ledger.nodes[name]
			want := 0
			if n.topo != nil {
				state := n.gpuState()
				want = n.topo.Score(state.FreeIndices(0), int(k))
			}
			require.Equal(t, int64(want), scores[i], "%d GPUs on %s", k, name)
		}
		e.m.mu.RUnlock()
	}
	scores := e.m.Prioritize(builders.Pod("default", "cpu-only").CPU("1").Obj(), names, stale)
	require.Equal(t, make([]int64, len(names)), scores)
}
