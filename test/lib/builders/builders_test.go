package builders_test

import (
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"

	"github.com/lockstep-sched/lockstep/test/lib/builders"
	"github.com/lockstep-sched/lockstep/wellknown"
)

func TestPod(t *testing.T) {
	t0 := time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)
	b := builders.Pod("default", "w-0").GPU(2).CPU("1").Memory("1Gi").Gang("mpi", 5).WaitingTime("30s").
		TotalNumber(6).Created(t0).Node("n1")
	p := b.Obj()

	require.Equal(t, "default", p.Namespace)
	require.Equal(t, "w-0", p.Name)
	require.Equal(t, builders.UIDFor("default", "w-0"), p.UID)
	require.Equal(t, "n1", p.Spec.NodeName)
	require.True(t, p.CreationTimestamp.Time.Equal(t0))
	require.Equal(t, map[string]string{
		wellknown.AnnotationGangName:         "mpi",
		wellknown.AnnotationGangMinAvailable: "5",
		wellknown.AnnotationGangWaitingTime:  "30s",
		wellknown.AnnotationGangTotalNumber:  "6",
	}, p.Annotations)
	res := p.Spec.Containers[0].Resources
	require.Equal(t, resource.MustParse("2"), res.Requests[wellknown.ResourceGPU])
	require.Equal(t, resource.MustParse("2"), res.Limits[wellknown.ResourceGPU], "extended resources need equal limits")
	require.Equal(t, resource.MustParse("1"), res.Requests[corev1.ResourceCPU])
	require.Equal(t, resource.MustParse("1Gi"), res.Requests[corev1.ResourceMemory])

	// Obj hands out copies: changing one does not change the builder or later objects.
	p.Annotations["x"] = "y"
	require.NotContains(t, b.Obj().Annotations, "x")

	// A renamed clone gets its own derived UID; an explicit UID wins.
	other := b.Clone().Name("w-1").Obj()
	require.Equal(t, builders.UIDFor("default", "w-1"), other.UID)
	require.Equal(t, "w-0", b.Obj().Name)
	require.Equal(t, "fixed", string(b.Clone().UID("fixed").Obj().UID))
}

func TestNode(t *testing.T) {
	n := builders.Node("n1").GPU(8).CPU("64").Memory("256Gi").Pods(110).Unschedulable().Obj()
	require.Equal(t, "n1", n.Name)
	require.True(t, n.Spec.Unschedulable)
	for _, list := range []corev1.ResourceList{n.Status.Capacity, n.Status.Allocatable} {
		require.Equal(t, resource.MustParse("8"), list[wellknown.ResourceGPU])
		require.Equal(t, resource.MustParse("64"), list[corev1.ResourceCPU])
		require.Equal(t, resource.MustParse("256Gi"), list[corev1.ResourceMemory])
		require.Equal(t, resource.MustParse("110"), list[corev1.ResourcePods])
	}
	nodes := builders.GPUNodes("gpu", 3, 4)
	require.Equal(t, []string{"gpu-0", "gpu-1", "gpu-2"}, builders.Names(nodes))
}

func TestQueueObjects(t *testing.T) {
	q := builders.VolcanoQueue("team-a").Weight(3).Capability("nvidia.com/gpu", "4").Guarantee("nvidia.com/gpu", "2").Obj()
	require.Equal(t, "scheduling.volcano.sh/v1beta1", q.GetAPIVersion())
	require.Equal(t, "Queue", q.GetKind())
	require.Equal(t, "team-a", q.GetName())
	require.Empty(t, q.GetNamespace(), "a Volcano Queue is cluster-scoped")
	require.Equal(t, map[string]any{
		"weight": int64(3), "reclaimable": true,
		"capability": map[string]any{"nvidia.com/gpu": "4"},
		"guarantee":  map[string]any{"resource": map[string]any{"nvidia.com/gpu": "2"}},
	}, q.Object["spec"])

	eq := builders.ElasticQuota("ns", "quota").Min("cpu", "1").Max("nvidia.com/gpu", "2").Obj()
	require.Equal(t, "ns", eq.GetNamespace())
	require.Equal(t, map[string]any{"min": map[string]any{"cpu": "1"}, "max": map[string]any{"nvidia.com/gpu": "2"}}, eq.Object["spec"])

	b := builders.VolcanoPodGroup("ns", "g").MinMember(5).Queue("team-a")
	pg := b.Obj()
	require.Equal(t, map[string]any{"minMember": int64(5), "queue": "team-a"}, pg.Object["spec"])
	pg.Object["spec"].(map[string]any)["queue"] = "changed"
	require.Equal(t, "team-a", b.Obj().Object["spec"].(map[string]any)["queue"], "Obj hands out copies")
	require.Equal(t, "-1", builders.VolcanoQueue("bad").Set("-1", "spec", "capability", "nvidia.com/gpu").Obj().Object["spec"].(map[string]any)["capability"].(map[string]any)["nvidia.com/gpu"])

	p := builders.Pod("ns", "w-0").VolcanoGroup("g").Obj()
	require.Equal(t, "g", p.Annotations[wellknown.AnnotationGroupName])
	require.Equal(t, "volcano", p.Spec.SchedulerName)
	require.Equal(t, "g", builders.Pod("ns", "w-0").CoschedulingGroup("g").Obj().Labels[wellknown.LabelCoschedulingPodGroup])
}
