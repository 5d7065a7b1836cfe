package e2e

import (
	"context"
	"fmt"
	"path/filepath"
	"slices"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"

	"github.com/lockstep-sched/lockstep/test/lib/harness"
	"github.com/lockstep-sched/lockstep/wellknown"
)

// researchFile is examples/yunikorn/queues.yaml's queues.yaml: a parent of at most 4 GPUs over
// two teams with no limit of their own, and the placement rules of YuniKorn's chart.
func researchFile(t *testing.T) string {
	objs, err := harness.DecodeFile(filepath.Join(env.root, "examples", "yunikorn", "queues.yaml"))
	require.NoError(t, err)
	require.Len(t, objs, 1)
	var cm corev1.ConfigMap
	require.NoError(t, runtime.DefaultUnstructuredConverter.FromUnstructured(objs[0].Object, &cm))
	require.Equal(t, wellknown.ConfigMapYuniKornConfigs, cm.Name)
	return cm.Data[wellknown.YuniKornQueuesKey]
}

// setYuniKornFile writes queues.yaml into yunikorn-configs in YuniKorn's namespace, making both
// when missing, and removes the ConfigMap when the test ends: lockstep must then forget its queues.
func (s *scenario) setYuniKornFile(text string) {
	s.t.Helper()
	ns := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: wellknown.NamespaceYuniKorn}}
	if _, err := env.client.CoreV1().Namespaces().Create(s.ctx, ns, metav1.CreateOptions{}); err != nil && !apierrors.IsAlreadyExists(err) {
		require.NoError(s.t, err)
	}
	maps := env.client.CoreV1().ConfigMaps(wellknown.NamespaceYuniKorn)
	cm := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: wellknown.ConfigMapYuniKornConfigs},
		Data: map[string]string{wellknown.YuniKornQueuesKey: text}}
	_, err := maps.Create(s.ctx, cm, metav1.CreateOptions{})
	if apierrors.IsAlreadyExists(err) {
		_, err = maps.Update(s.ctx, cm, metav1.UpdateOptions{})
		require.NoError(s.t, err)
		return
	}
	require.NoError(s.t, err)
	s.t.Cleanup(func() {
		_ = maps.Delete(context.Background(), wellknown.ConfigMapYuniKornConfigs, metav1.DeleteOptions{})
	})
}

// YuniKorn's queues as its users write them, read from yunikorn-configs and the namespace
// annotations:
//
//  1. A parent's max holds across its two children: with a's 3 GPUs bound, b's application of
//     2 waits, naming the parent; b's application of 1 fits and binds.
//  2. A namespace's yunikorn.apache.org/namespace.quota bounds the queue its applications go to
//     when they name none (root.<namespace>, as YuniKorn's tag rule places them).
//  3. A file YuniKorn cannot read is reported on the ConfigMap with a QueueInvalid Event, and the
//     last one read stays in force.
//  4. /debug/queues shows the tree; the ConfigMap deleted, lockstep forgets the file's queues.
func TestYuniKornParentMaxHolds(t *testing.T) {
	s := newQueueScenario(t, 4, 2)
	s.setYuniKornFile(researchFile(t))
	parent, a, b := "YuniKorn queue root.research", "YuniKorn queue root.research.a", "YuniKorn queue root.research.b"
	s.eventually(30*time.Second, "lockstep to read the file's tree", func() bool {
		return slices.Equal(s.queue(parent).Children, []string{a, b})
	})

	s.yuniKornAppIn("trio", "root.research.a", 3, 3, 1)
	s.eventually(90*time.Second, "the application in a bound whole", func() bool { return s.boundIn("trio-") == 3 })
	s.binds.assertNeverPartial(t, "trio", 3)

	s.yuniKornAppIn("pair", "root.research.b", 2, 2, 1)
	overParent := fmt.Sprintf("%s: nvidia.com/gpu would go over its limit of 4: the queues under it hold 3 and gang %s/pair's quorum asks 2 more; %s is under it",
		parent, s.ns, b)
	s.eventually(60*time.Second, "the application of 2 in b to wait for the parent's max, though b has none and 5 GPUs are free", func() bool {
		return s.waitsFor("pair", overParent)
	})
	s.yuniKornAppIn("solo", "research.b", 1, 1, 1) // unqualified: YuniKorn's provided rule puts it under root
	s.eventually(90*time.Second, "the application of 1, within the parent's max, bound", func() bool { return s.boundIn("solo-") == 1 })
	s.never(5*time.Second, "the application of 2 to bind any member past the parent's max", func() bool { return s.boundIn("pair-") > 0 })

	patch := fmt.Sprintf(`{"metadata":{"annotations":{%q:"{\"nvidia.com/gpu\":\"1\"}"}}}`, wellknown.AnnotationYuniKornNamespaceQuota)
	_, err := env.client.CoreV1().Namespaces().Patch(s.ctx, s.ns, types.MergePatchType, []byte(patch), metav1.PatchOptions{})
	require.NoError(t, err)
	own := "YuniKorn queue root." + s.ns
	s.yuniKornApp("unnamed", 2, 2, 1)
	s.eventually(60*time.Second, "an application naming no queue to wait for its namespace's quota", func() bool {
		return s.waitsFor("unnamed", own+": nvidia.com/gpu would go over its limit of 1")
	})

	s.setYuniKornFile("partitions: [")
	s.eventually(30*time.Second, "a QueueInvalid Event on the ConfigMap that cannot be read", func() bool {
		return queueEvent(s.ctx, "ConfigMap", wellknown.ConfigMapYuniKornConfigs, "Warning", "QueueInvalid", "queues.yaml of ConfigMap yunikorn/yunikorn-configs cannot be read")
	})
	require.True(t, s.waitsFor("pair", overParent), "the last file read stays in force")

	require.NoError(t, env.client.CoreV1().ConfigMaps(wellknown.NamespaceYuniKorn).Delete(s.ctx, wellknown.ConfigMapYuniKornConfigs, metav1.DeleteOptions{}))
	s.eventually(30*time.Second, "the file's queues forgotten once its ConfigMap is deleted", func() bool {
		_, known := debugQueues(s.ctx)[parent]
		return !known
	})
	s.eventually(90*time.Second, "the application of 2, no longer under the parent's max, bound", func() bool { return s.boundIn("pair-") == 2 })
	s.binds.assertNeverPartial(t, "pair", 2)
}
