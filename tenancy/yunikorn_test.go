package tenancy

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes/fake"
	"k8s.io/client-go/tools/record"

	"github.com/lockstep-sched/lockstep/wellknown"
)

func yunikornConfigs(text string) *corev1.ConfigMap {
	return &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: wellknown.NamespaceYuniKorn, Name: wellknown.ConfigMapYuniKornConfigs},
		Data: map[string]string{wellknown.YuniKornQueuesKey: text}}
}

func annotatedNamespace(name, quotaJSON string) *corev1.Namespace {
	return &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: name,
		Annotations: map[string]string{wellknown.AnnotationYuniKornNamespaceQuota: quotaJSON}}}
}

// The file's queues and the annotated namespaces' reach the manager; a queue the file defines
// takes the place of the namespace's; a file that cannot be read is reported and changes nothing;
// the ConfigMap deleted takes the file's queues away.
func TestYuniKornQueueSources(t *testing.T) {
	m, rec := newFakeManager(), record.NewFakeRecorder(10)
	w := newBareWatcher(t, m, rec)

	w.namespaceAdded(annotatedNamespace("team-a", `{"nvidia.com/gpu":"4"}`))
	require.Equal(t, []string{"set YuniKorn queue root.team-a"}, m.takeCalls())
	require.Equal(t, int64(4), m.queue("YuniKorn queue root.team-a").Capability.Amount.GPU)

	file := "partitions: [{name: default, placementrules: [{name: tag, value: namespace, create: true}], queues: [{name: root, queues: [" +
		"{name: research, resources: {max: {nvidia.com/gpu: 4}}, queues: [{name: nlp}, {name: vision}]}, {name: team-a, resources: {max: {nvidia.com/gpu: 2}}}]}]}]"
	w.configMapChanged(yunikornConfigs(file))
	calls := m.takeCalls()
	require.ElementsMatch(t, []string{"set YuniKorn queue root.research", "set YuniKorn queue root.research.nlp",
		"set YuniKorn queue root.research.vision", "set YuniKorn queue root.team-a"}, calls)
	require.Equal(t, int64(2), m.queue("YuniKorn queue root.team-a").Capability.Amount.GPU,
		"a queue the file defines is the file's: YuniKorn sets a namespace's quota only on a queue it makes")

	w.configMapChanged(yunikornConfigs("partitions: ["))
	require.Empty(t, m.takeCalls(), "a file that cannot be read leaves the last one in force")
	events := drain(rec)
	require.Len(t, events, 1)
	require.Contains(t, events[0], "Warning QueueInvalid queues.yaml of ConfigMap yunikorn/yunikorn-configs cannot be read")

	w.configMapChanged(yunikornConfigs(file + "\n# a comment changes nothing\n"))
	require.Empty(t, m.takeCalls(), "the same queues again tell the manager nothing")

	w.configMapDeleted(yunikornConfigs(file))
	require.ElementsMatch(t, []string{"delete YuniKorn queue root.research", "delete YuniKorn queue root.research.nlp",
		"delete YuniKorn queue root.research.vision", "set YuniKorn queue root.team-a"}, m.takeCalls(),
		"without the file, the namespace's quota applies again")
	require.Equal(t, int64(4), m.queue("YuniKorn queue root.team-a").Capability.Amount.GPU)

	w.namespaceUpdated(annotatedNamespace("team-a", `{"nvidia.com/gpu":"4"}`), annotatedNamespace("team-a", `{"nvidia.com/gpu":"lots"}`))
	require.Equal(t, []string{"set YuniKorn queue root.team-a !"}, m.takeCalls())
	events = drain(rec)
	require.Len(t, events, 1)
	require.Contains(t, events[0], `Namespace team-a: metadata.annotations.yunikorn.apache.org/namespace.quota.nvidia.com/gpu="lots"`)

	w.namespaceDeleted(annotatedNamespace("team-a", `{"nvidia.com/gpu":"lots"}`))
	require.Equal(t, []string{"default Volcano Queue team-a=", "delete YuniKorn queue root.team-a"}, m.takeCalls())
}

// Through the informers: lockstep lists YuniKorn's two ConfigMaps by name, in YuniKorn's
// namespace only, and counts as synced once both are listed.
func TestYuniKornConfigMapsWatched(t *testing.T) {
	typed := fake.NewClientset(yunikornConfigs("partitions: [{name: default, queues: [{name: root, queues: [{name: a}]}]}]"),
		&corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: "other", Name: wellknown.ConfigMapYuniKornConfigs},
			Data: map[string]string{wellknown.YuniKornQueuesKey: "partitions: [{name: default, queues: [{name: b}]}]"}})
	m := newFakeManager()
	factory := informers.NewSharedInformerFactory(typed, 0)
	w, err := New(Config{Namespaces: factory.Core().V1().Namespaces(), Manager: m, Recorder: record.NewFakeRecorder(10),
		DiscoveryInterval: time.Hour, UsageInterval: time.Hour, YuniKorn: typed, YuniKornNamespace: wellknown.NamespaceYuniKorn})
	require.NoError(t, err)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	runInformers(ctx, w.yunikornInformers)
	require.Eventually(t, w.yunikornSynced, 10*time.Second, 10*time.Millisecond)
	require.Equal(t, []string{"set YuniKorn queue root.a"}, m.takeCalls(), "only the ConfigMap of YuniKorn's namespace is read")
}
