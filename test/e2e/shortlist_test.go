package e2e

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"

	"github.com/lockstep-sched/lockstep/test/lib/builders"
	"github.com/lockstep-sched/lockstep/test/lib/cluster"
)

// The shortlist (docs/concepts.md, "The shortlist"): an ordinary GPU pod goes where lockstep's
// packing puts it even when the scheduler's spreading scores would have won, and a pod that states
// a preference of its own keeps the scheduler's say.
//
// Two nodes of 4 cpu, 32Gi and 8 GPUs. "first" (3 cpu, 24Gi, 1 GPU) lands on one of them, X. For
// "packed" (1 cpu, 8Gi, 1 GPU), lockstep scores X one step above the empty node Y: 50 points at
// the shipped weight 5. The scheduler's NodeResourcesFit (least allocated) gives Y 75 points more
// than X, whose cpu and memory "packed" would use up; BalancedAllocation scores both alike.
// Summed, Y wins; shortlisted, X is the only node "packed" is offered.
func TestShortlistPacksGPUPodsAndKeepsPreferences(t *testing.T) {
	s := newScenarioWithNodes(t,
		cluster.NodeSpec{Name: "a", GPUs: 8, CPU: "4", Memory: "32Gi"},
		cluster.NodeSpec{Name: "b", GPUs: 8, CPU: "4", Memory: "32Gi"},
	)
	before, _, err := env.lockstep.Metric(context.Background(), "lockstep_filter_shortlisted_total")
	require.NoError(t, err)

	s.create(builders.Pod("", "first").CPU("3").Memory("24Gi").GPU(1).Obj())
	x := s.waitBound("first")
	y := s.nodes[0]
	if y == x {
		y = s.nodes[1]
	}

	s.create(builders.Pod("", "packed").CPU("1").Memory("8Gi").GPU(1).Obj())
	require.Equal(t, x, s.waitBound("packed"), "the GPU pod goes to the node lockstep packs, not where spreading scores it")
	after, _, err := env.lockstep.Metric(context.Background(), "lockstep_filter_shortlisted_total")
	require.NoError(t, err)
	require.Greater(t, after, before, "lockstep counts the narrowed answer")

	// X still has 6 GPUs free, and lockstep would pack this pod there too; it prefers Y, and a
	// stated preference is not shortlisted, so the scheduler's NodeAffinity score decides.
	s.create(builders.Pod("", "prefers").GPU(1).Affinity(&corev1.Affinity{NodeAffinity: &corev1.NodeAffinity{
		PreferredDuringSchedulingIgnoredDuringExecution: []corev1.PreferredSchedulingTerm{{Weight: 100, Preference: corev1.NodeSelectorTerm{
			MatchExpressions: []corev1.NodeSelectorRequirement{{Key: corev1.LabelHostname, Operator: corev1.NodeSelectorOpIn, Values: []string{y}}},
		}}},
	}}).Obj())
	require.Equal(t, y, s.waitBound("prefers"), "a pod's preferred node affinity still counts")
}

// waitBound waits for the pod to be bound and returns its node.
func (s *scenario) waitBound(name string) string {
	s.t.Helper()
	var node string
	s.eventually(60*time.Second, name+" bound", func() bool {
		node = s.pod(name).Spec.NodeName
		return node != ""
	})
	return node
}
