package gang

import (
	"context"
	"testing"
	"time"

	"github.com/lockstep-sched/lockstep/dialect"

	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes/fake"
	"k8s.io/client-go/tools/cache"

	"github.com/lockstep-sched/lockstep/test/lib/builders"
	"github.com/lockstep-sched/lockstep/wellknown"
)

// The informer keeps small records rather than pods; what lockstep reads from a record must be
// what it would read from the pod: requests (init containers, sidecars, overhead), gang spec,
// gates, binding, GPU ids, scheduling condition.
func TestPodRecordKeepsWhatLockstepReads(t *testing.T) {
	always := corev1.ContainerRestartPolicyAlways
	full := builders.Pod("default", "w-0").GPU(2).CPU("1").Memory("1Gi").Gang("mpi", 4).
		WaitingTime("30s").TotalNumber(6).Node("n-1").Annotation(wellknown.AnnotationGPUIDs, "0,1").
		Unschedulable("0/4 nodes are available").Obj()
	full.Spec.InitContainers = []corev1.Container{
		{Name: "setup", Resources: corev1.ResourceRequirements{Requests: corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("4")}}},
		{Name: "sidecar", RestartPolicy: &always, Resources: corev1.ResourceRequirements{Requests: corev1.ResourceList{corev1.ResourceMemory: resource.MustParse("2Gi")}}},
	}
	full.Spec.Overhead = corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("250m")}
	full.Spec.SchedulingGates = []corev1.PodSchedulingGate{{Name: "kueue"}}

	m := NewManager(testConfig(), nil, nil, nil, nil)
	defer m.Stop()
	obj, err := podRecorder(m.cfg.Reader)(full)
	require.NoError(t, err)
	rec := obj.(*podRecord)
	require.Equal(t, newPodInfo(full, dialect.Pods{}), rec.info)
	require.Equal(t, "mpi", rec.info.gangName)
	require.Equal(t, 4, rec.info.inline.MinAvailable)
	require.Equal(t, full.UID, rec.UID)
	require.Equal(t, []int{0, 1}, rec.info.gpuIDs)
	require.True(t, rec.info.Gated)
}

// Pods reach the manager through real informers: created, bound, deleted.
func TestWatchFeedsManager(t *testing.T) {
	node := builders.Node("n-0").GPU(8).CPU("64").Memory("256Gi").Pods(110).Obj()
	pod := builders.Pod("default", "w-0").GPU(2).Obj()
	client := fake.NewClientset(node, pod)
	m := NewManager(testConfig(), nil, nil, nil, nil)
	defer m.Stop()
	factory := informers.NewSharedInformerFactory(client, 0)
	synced, err := m.Watch(factory)
	require.NoError(t, err)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	factory.Start(ctx.Done())
	require.True(t, cache.WaitForCacheSync(ctx.Done(), synced), "the manager has taken in the initial lists")
	// Ready means the manager has seen the pod, not only that the informer stored it.
	m.mu.RLock()
	_, seen := m.ledger.pods[pod.UID]
	m.mu.RUnlock()
	require.True(t, seen)

	freeGPUs := func() int64 {
		m.mu.RLock()
		defer m.mu.RUnlock()
		if n, ok := m.ledger.nodes["n-0"]; ok && n.known {
			return n.free().GPU
		}
		return -1
	}
	require.Eventually(t, func() bool { return freeGPUs() == 8 }, 10*time.Second, 10*time.Millisecond)

	pod.Spec.NodeName = "n-0"
	_, err = client.CoreV1().Pods("default").Update(ctx, pod, metav1.UpdateOptions{})
	require.NoError(t, err)
	require.Eventually(t, func() bool { return freeGPUs() == 6 }, 10*time.Second, 10*time.Millisecond, "the bound pod takes 2 GPUs")

	require.NoError(t, client.CoreV1().Pods("default").Delete(ctx, "w-0", metav1.DeleteOptions{}))
	require.Eventually(t, func() bool { return freeGPUs() == 8 }, 10*time.Second, 10*time.Millisecond, "the deleted pod gives them back")
}
