package dialect

import (
	"testing"

	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/lockstep-sched/lockstep/placement"
	"github.com/lockstep-sched/lockstep/quota"
	"github.com/lockstep-sched/lockstep/wellknown"
)

// researchQueues is a queues.yaml as YuniKorn's docs write one: a parent with a guarantee and a
// max over two children, one of them with a max above its parent's, and a sibling with nothing.
const researchQueues = `
partitions:
  - name: default
    placementrules:
      - name: provided
        create: true
      - name: tag
        value: namespace
        create: true
    queues:
      - name: root
        submitacl: '*'
        queues:
          - name: research
            resources:
              guaranteed: {vcore: 4, memory: 16Gi, nvidia.com/gpu: 2}
              max: {vcore: "10", memory: 64G, nvidia.com/gpu: 4}
            queues:
              - name: NLP
              - name: vision
                resources:
                  max: {nvidia.com/gpu: 8, ephemeral-storage: 1Ti}
          - name: sandbox
  - name: gpu-pool
    queues:
      - name: root
        queues:
          - name: elsewhere
`

func yunikornConfigMap(name, text string) *corev1.ConfigMap {
	return &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: wellknown.NamespaceYuniKorn, Name: name},
		Data: map[string]string{wellknown.YuniKornQueuesKey: text}}
}

// yunikornQueue is a queue as read from yunikorn-configs' queues.yaml, with changes.
func yunikornQueue(path, parent string, change func(*quota.Queue)) quota.Queue {
	q := quota.Queue{Kind: KindYuniKornQueue, Name: path, Parent: parent, ParentField: "its place in queues.yaml of ConfigMap yunikorn/yunikorn-configs",
		Source: KindYuniKornQueue + " " + path + " (queues.yaml of ConfigMap yunikorn/yunikorn-configs)",
		Weight: 1, State: quota.Open, Reclaimable: true, KindMadeOnDemand: true}
	if change != nil {
		change(&q)
	}
	return q
}

func TestYuniKornQueues(t *testing.T) {
	defaults := yunikornConfigMap(wellknown.ConfigMapYuniKornDefaults, "partitions: [{name: default, queues: [{name: root, queues: [{name: ignored}]}]}]")
	configs := yunikornConfigMap(wellknown.ConfigMapYuniKornConfigs, researchQueues)
	queues, from, err := YuniKornQueues(defaults, configs)
	require.NoError(t, err)
	require.Same(t, configs, from, "yunikorn-configs' queues.yaml wins over yunikorn-defaults'")
	require.Equal(t, []quota.Queue{
		yunikornQueue("root.research", "", func(q *quota.Queue) {
			q.Min = placement.Resources{MilliCPU: 4000, Memory: 16 << 30, GPU: 2}
			q.Capability = quota.Limit{Amount: placement.Resources{MilliCPU: 10000, Memory: 64e9, GPU: 4}, Named: quota.CPU | quota.Memory | quota.GPU}
		}),
		yunikornQueue("root.research.nlp", "root.research", nil),
		yunikornQueue("root.research.vision", "root.research", func(q *quota.Queue) {
			q.Capability = quota.Limit{Amount: placement.Resources{GPU: 8}, Named: quota.GPU}
		}),
		yunikornQueue("root.sandbox", "", nil),
	}, queues, "partition default's queues by full lowercased path; a child's own max stands, its parent's holds in the tree")

	only, from, err := YuniKornQueues(defaults, nil)
	require.NoError(t, err)
	require.Same(t, defaults, from)
	require.Len(t, only, 1)
	require.False(t, only[0].KindMadeOnDemand, "without a placement rule that creates, YuniKorn makes no queue on demand")

	none, from, err := YuniKornQueues(nil, &corev1.ConfigMap{})
	require.NoError(t, err)
	require.Nil(t, from)
	require.Empty(t, none, "no queues.yaml: YuniKorn's built-in configuration, which limits nothing")
}

// A file YuniKorn cannot read at all is refused whole, naming the ConfigMap: the caller keeps the
// queues it read last, as YuniKorn keeps its configuration.
func TestYuniKornQueuesUnreadable(t *testing.T) {
	for name, tc := range map[string]struct{ text, want string }{
		"not YAML":       {"partitions: [", "queues.yaml of ConfigMap yunikorn/yunikorn-configs cannot be read"},
		"wrong shape":    {"partitions: {name: default}", "cannot be read"},
		"no default":     {"partitions: [{name: gpu, queues: [{name: root}]}]", `has no partition "default"`},
		"a limited root": {"partitions: [{name: default, queues: [{name: root, resources: {max: {vcore: 1}}}]}]", "the root queue has resources"},
	} {
		t.Run(name, func(t *testing.T) {
			_, from, err := YuniKornQueues(yunikornConfigMap(wellknown.ConfigMapYuniKornConfigs, tc.text))
			require.ErrorContains(t, err, tc.want)
			require.NotNil(t, from, "the ConfigMap to report it on")
		})
	}
}

// A problem in one queue's fields makes that queue unusable, naming it and the field; the others
// keep working.
func TestYuniKornQueueRefusals(t *testing.T) {
	tests := []struct {
		name, queue, want string
	}{
		{"an amount YuniKorn cannot read", "{name: a, resources: {max: {vcore: lots}}}",
			`YuniKorn queue root.a (queues.yaml of ConfigMap yunikorn/yunikorn-configs): resources.max.vcore="lots": must be a quantity`},
		{"a negative guarantee", "{name: a, resources: {guaranteed: {nvidia.com/gpu: -1}}}", `resources.guaranteed.nvidia.com/gpu="-1": must not be negative`},
		{"more guaranteed than max", "{name: a, resources: {guaranteed: {nvidia.com/gpu: 4}, max: {nvidia.com/gpu: 2}}}",
			"YuniKorn refuses a queue guaranteed more than its max"},
		{"a name YuniKorn does not allow", "{name: 'a b'}", `name="a b": must be 1 to 64 letters`},
		{"a name listed twice", "{name: a}, {name: A}", `name="A": is listed twice under the same parent`},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			text := "partitions: [{name: default, queues: [{name: root, queues: [" + tc.queue + ", {name: ok, resources: {max: {nvidia.com/gpu: 2}}}]}]}]"
			queues, _, err := YuniKornQueues(yunikornConfigMap(wellknown.ConfigMapYuniKornConfigs, text))
			require.NoError(t, err)
			require.Len(t, queues, 2)
			require.ErrorContains(t, queues[0].Err, tc.want)
			require.True(t, queues[0].Capability.Named == 0 && queues[0].Min.IsZero(), "an unusable queue keeps nothing it read")
			require.NoError(t, queues[1].Err, "the other queue keeps working")
			require.Equal(t, int64(2), queues[1].Capability.Amount.GPU)
		})
	}
}

func TestYuniKornNamespaceQueue(t *testing.T) {
	ns := func(annotations map[string]string) *corev1.Namespace {
		return &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "team-a", Annotations: annotations}}
	}
	_, ok := YuniKornNamespaceQueue(ns(nil))
	require.False(t, ok, "a namespace without the annotations defines no queue")

	q, ok := YuniKornNamespaceQueue(ns(map[string]string{
		wellknown.AnnotationYuniKornNamespaceQuota:      `{"cpu":"8","memory":"32Gi","nvidia.com/gpu":"4"}`,
		wellknown.AnnotationYuniKornNamespaceGuaranteed: `{"nvidia.com/gpu":"2"}`,
	}))
	require.True(t, ok)
	require.Equal(t, quota.Queue{Kind: KindYuniKornQueue, Name: "root.team-a", Weight: 1, State: quota.Open, Reclaimable: true, KindMadeOnDemand: true,
		Source:     "YuniKorn queue root.team-a (annotations of Namespace team-a)",
		Capability: quota.Limit{Amount: placement.Resources{MilliCPU: 8000, Memory: 32 << 30, GPU: 4}, Named: quota.CPU | quota.Memory | quota.GPU},
		Min:        placement.Resources{GPU: 2}}, q, "Kubernetes' resource names, as the shim reads them")

	for annotations, want := range map[[2]string]string{
		{`{"nvidia.com/gpu":4`, ""}:                          `Namespace team-a: metadata.annotations.yunikorn.apache.org/namespace.quota="{\"nvidia.com/gpu\":4": must be a JSON resource list`,
		{`{"cpu":"x"}`, ""}:                                  `metadata.annotations.yunikorn.apache.org/namespace.quota.cpu="x": must be a quantity`,
		{`{"nvidia.com/gpu":"2"}`, `{"nvidia.com/gpu":"3"}`}: "a namespace cannot be guaranteed more than its quota",
	} {
		q, ok := YuniKornNamespaceQueue(ns(map[string]string{
			wellknown.AnnotationYuniKornNamespaceQuota: annotations[0], wellknown.AnnotationYuniKornNamespaceGuaranteed: annotations[1]}))
		require.True(t, ok)
		require.ErrorContains(t, q.Err, want)
		require.Equal(t, quota.Unlimited, q.Capability, "an unusable queue keeps nothing it read")
	}
}

func TestYuniKornPodQueue(t *testing.T) {
	for queue, want := range map[string]string{
		"":                  "root.team-a",
		"root.research.NLP": "root.research.nlp",
		"sandbox":           "root.sandbox",
		"a.b":               "root.a_dot_b",
	} {
		require.Equal(t, want, YuniKornPodQueue("team-a", queue), "queue %q", queue)
	}
}
