package gang

import (
	"testing"

	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"

	"github.com/lockstep-sched/lockstep/test/builders"
)

// The informer keeps slimmed pods; lockstep must read the same thing from them as from the full
// objects: requests (init containers, sidecars, overhead), gang spec, gates, binding, condition.
func TestSlimPodKeepsWhatLockstepReads(t *testing.T) {
	always := corev1.ContainerRestartPolicyAlways
	full := builders.Pod("default", "w-0").GPU(2).CPU("1").Memory("1Gi").Gang("mpi", 4).
		WaitingTime("30s").TotalNumber(6).Node("n-1").Annotation(AnnotationGPUIDs, "0,1").
		Annotation("unrelated", "dropped").Unschedulable("0/4 nodes are available").Obj()
	full.Spec.InitContainers = []corev1.Container{
		{Name: "setup", Resources: corev1.ResourceRequirements{Requests: corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("4")}}},
		{Name: "sidecar", RestartPolicy: &always, Resources: corev1.ResourceRequirements{Requests: corev1.ResourceList{corev1.ResourceMemory: resource.MustParse("2Gi")}}},
	}
	full.Spec.Overhead = corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("250m")}
	full.Spec.SchedulingGates = []corev1.PodSchedulingGate{{Name: "kueue"}}
	full.Spec.Containers[0].Env = []corev1.EnvVar{{Name: "BIG", Value: "dropped"}}

	obj, err := slimPod(full)
	require.NoError(t, err)
	slim := obj.(*corev1.Pod)

	require.Equal(t, PodRequests(full), PodRequests(slim))
	wantInfo, gotInfo := newPodInfo(full), newPodInfo(slim)
	wantInfo.lastEvent, gotInfo.lastEvent = "", ""
	require.Equal(t, wantInfo, gotInfo)
	require.NotContains(t, slim.Annotations, "unrelated")
	require.Empty(t, slim.Spec.Containers[0].Env)
}
