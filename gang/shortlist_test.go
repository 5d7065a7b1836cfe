package gang

import (
	"slices"
	"testing"

	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"

	"github.com/lockstep-sched/lockstep/test/lib/builders"
)

// shortlistEnv: nodes "full" (no GPU free), "most-a" and "most-b" (2 of 8 free each), "half"
// (4 free) and "empty".
func shortlistEnv(t *testing.T, cfg Config, nodes ...*corev1.Node) *env {
	all := append([]*corev1.Node{
		gpuNode("full").Obj(),
		gpuNode("most-a").Obj(),
		gpuNode("most-b").Obj(),
		gpuNode("half").Obj(),
		gpuNode("empty").Obj(),
	}, nodes...)
	e := newEnv(t, cfg, all...)
	e.add(
		builders.Pod("default", "on-full").GPU(8).Node("full").Obj(),
		builders.Pod("default", "on-most-a").GPU(6).Node("most-a").Obj(),
		builders.Pod("default", "on-most-b").GPU(6).Node("most-b").Obj(),
		builders.Pod("default", "on-half").GPU(4).Node("half").Obj(),
	)
	return e
}

var preferred = corev1.WeightedPodAffinityTerm{Weight: 10, PodAffinityTerm: corev1.PodAffinityTerm{TopologyKey: corev1.LabelHostname}}

func TestShortlist(t *testing.T) {
	gpuPod := func() *builders.PodBuilder { return builders.Pod("default", "p").Label("app", "train").GPU(1) }
	every := []string{"most-a", "most-b", "half", "empty"}
	best := []string{"most-a", "most-b"}
	tests := []struct {
		name string
		pod  *corev1.Pod
		want []string
	}{
		{"a GPU pod gets the best fits, both of them", gpuPod().Obj(), best},
		{"the best fit for 3 GPUs", gpuPod().GPU(3).Obj(), []string{"half"}},
		{"a pod of a Job is shortlisted", gpuPod().ControlledBy("batch/v1", "Job", "j").Obj(), best},
		{"a DoNotSchedule spread constraint is the scheduler's filter, not its score",
			gpuPod().SpreadConstraint(corev1.LabelHostname, 1, corev1.DoNotSchedule).Obj(), best},
		{"a pod without GPUs keeps every node", builders.Pod("default", "p").CPU("1").Obj(), append([]string{"full"}, every...)},
		{"preferred node affinity keeps every node", gpuPod().Affinity(&corev1.Affinity{NodeAffinity: &corev1.NodeAffinity{
			PreferredDuringSchedulingIgnoredDuringExecution: []corev1.PreferredSchedulingTerm{{Weight: 1, Preference: corev1.NodeSelectorTerm{
				MatchExpressions: []corev1.NodeSelectorRequirement{{Key: "zone", Operator: corev1.NodeSelectorOpIn, Values: []string{"a"}}},
			}}},
		}}).Obj(), every},
		{"preferred pod affinity keeps every node", gpuPod().Affinity(&corev1.Affinity{PodAffinity: &corev1.PodAffinity{
			PreferredDuringSchedulingIgnoredDuringExecution: []corev1.WeightedPodAffinityTerm{preferred},
		}}).Obj(), every},
		{"preferred pod anti-affinity keeps every node", gpuPod().Affinity(&corev1.Affinity{PodAntiAffinity: &corev1.PodAntiAffinity{
			PreferredDuringSchedulingIgnoredDuringExecution: []corev1.WeightedPodAffinityTerm{preferred},
		}}).Obj(), every},
		{"a ScheduleAnyway spread constraint keeps every node",
			gpuPod().SpreadConstraint(corev1.LabelHostname, 1, corev1.ScheduleAnyway).Obj(), every},
		{"a ReplicaSet's pod keeps every node", gpuPod().ControlledBy("apps/v1", "ReplicaSet", "rs").Obj(), every},
		{"a StatefulSet's pod keeps every node", gpuPod().ControlledBy("apps/v1", "StatefulSet", "ss").Obj(), every},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			e := shortlistEnv(t, testConfig())
			r := e.filter(tc.pod)
			require.Equal(t, tc.want, r.Feasible)
			if slices.Contains(tc.want, "full") {
				return
			}
			require.Contains(t, r.Failed, "full", "a node the pod does not fit keeps its reason")
		})
	}
}

// The shortlist is what prioritize ranks best: narrowing changes which nodes the scheduler
// weighs, never which of them lockstep prefers.
func TestShortlistIsWhatPrioritizeRanksBest(t *testing.T) {
	e := shortlistEnv(t, testConfig())
	for gpus := int64(1); gpus <= 8; gpus++ {
		pod := builders.Pod("default", "p").GPU(gpus).Obj()
		passing := e.filterNodes(pod, e.nodes).Feasible
		require.NotEmpty(t, passing, "%d GPUs", gpus)
		scores := e.m.Prioritize(pod, e.nodes, nil)
		top := int64(-1)
		for _, s := range scores {
			top = max(top, s)
		}
		var best []string
		for i, s := range scores {
			if s == top && top > 0 {
				best = append(best, e.nodes[i])
			}
		}
		require.Equal(t, best, passing, "%d GPUs: scores %v", gpus, scores)
	}
}

func TestShortlistRanksSoftTaintsFirst(t *testing.T) {
	tainted := gpuNode("most-tainted").Taint("spot", "true", corev1.TaintEffectPreferNoSchedule).Obj()
	tolerate := corev1.Toleration{Key: "spot", Operator: corev1.TolerationOpExists}
	tests := []struct {
		name string
		pod  *corev1.Pod
		want []string
	}{
		{"untolerated: the best untainted nodes", builders.Pod("default", "p").GPU(1).Obj(), []string{"most-a", "most-b"}},
		{"tolerated: the tainted node is the best fit", builders.Pod("default", "p").GPU(1).Toleration(tolerate).Obj(), []string{"most-tainted"}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			e := shortlistEnv(t, testConfig(), tainted)
			// One GPU free on the tainted node: a better fit than "most-a" and "most-b".
			e.add(builders.Pod("default", "on-tainted").GPU(7).Node("most-tainted").Obj())
			require.Equal(t, tc.want, e.filter(tc.pod).Feasible)
		})
	}
}

func TestShortlistOff(t *testing.T) {
	cfg := testConfig()
	cfg.ScoreEveryNode = true
	e := shortlistEnv(t, cfg)
	require.Equal(t, []string{"most-a", "most-b", "half", "empty"}, e.filter(builders.Pod("default", "p").GPU(1).Obj()).Feasible)
}

func gpuNode(name string) *builders.NodeBuilder {
	return builders.Node(name).GPU(8).CPU("64").Memory("256Gi").Pods(110)
}

// More nodes tie for best than the shortlister keeps positions for: narrow finds them all again.
func TestShortlistManyTies(t *testing.T) {
	nodes := builders.GPUNodes("n", 70, 8)
	e := newEnv(t, testConfig(), nodes...)
	for _, name := range e.nodes[:66] {
		e.add(builders.Pod("default", "on-"+name).GPU(6).Node(name).Obj())
	}
	require.Equal(t, e.nodes[:66], e.filter(builders.Pod("default", "p").GPU(1).Obj()).Feasible)
}
