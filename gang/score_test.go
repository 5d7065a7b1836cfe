package gang

import (
	"testing"

	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"

	"github.com/lockstep-sched/lockstep/test/builders"
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
			scores := e.m.Prioritize(tc.pod, nodes)
			require.Len(t, scores, len(nodes))
			tc.check(t, scores)
		})
	}

	t.Run("reserved member scores its node highest", func(t *testing.T) {
		pods := members("default", "mpi", "w", 2, 2, 8)
		e.add(pods...)
		reserved := e.filterOne(pods[0])
		all := []string{"full", "empty", "cpu", "spare"}
		scores := e.m.Prioritize(pods[0], all)
		for i, n := range all {
			if n == reserved {
				require.Equal(t, int64(MaxScore), scores[i], n)
			} else {
				require.Equal(t, int64(0), scores[i], n)
			}
		}
		// A member not filtered yet scores the node its gang's plan holds for it.
		planned := e.m.Status("default")[0].Members[1].Node
		require.NotEmpty(t, planned)
		scores = e.m.Prioritize(pods[1], all)
		for i, n := range all {
			if n == planned {
				require.Equal(t, int64(MaxScore), scores[i], n)
			} else {
				require.Equal(t, int64(0), scores[i], n)
			}
		}
	})
}
