package dialect

import (
	"errors"
	"testing"

	"github.com/stretchr/testify/require"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	"github.com/lockstep-sched/lockstep/gangspec"
	"github.com/lockstep-sched/lockstep/placement"
	"github.com/lockstep-sched/lockstep/quota"
	"github.com/lockstep-sched/lockstep/wellknown"
)

const gi = int64(1) << 30

// queueObject builds a queue object as the apiserver hands it to a dynamic client: numbers are
// int64, quantities strings. Namespaced kinds get namespace team-a.
func queueObject(api QueueAPI, name string, spec, status map[string]any) *unstructured.Unstructured {
	obj := &unstructured.Unstructured{Object: map[string]any{}}
	if spec != nil {
		obj.Object["spec"] = spec
	}
	if status != nil {
		obj.Object["status"] = status
	}
	obj.SetAPIVersion(api.Resource.GroupVersion().String())
	obj.SetKind("Queue")
	if api.Namespaced {
		obj.SetKind("ElasticQuota")
		obj.SetNamespace("team-a")
	}
	obj.SetName(name)
	return obj
}

func TestParseQueue(t *testing.T) {
	volcano := func(q quota.Queue) quota.Queue {
		q.Kind, q.Name, q.Source = KindVolcanoQueue, "team-a", "Volcano Queue team-a (scheduling.volcano.sh/v1beta1)"
		return q
	}
	tests := []struct {
		name   string
		api    QueueAPI
		spec   map[string]any
		status map[string]any
		want   quota.Queue
	}{
		{name: "Volcano, an empty queue: weight 1, open, reclaimable, unlimited", api: VolcanoQueue,
			want: volcano(quota.Queue{Weight: 1, State: quota.Open, Reclaimable: true})},
		{name: "Volcano 1.15's DRA keys: GPUs by device class count as GPUs", api: VolcanoQueue,
			spec: map[string]any{"capability": map[string]any{"deviceclass/gpu.nvidia.com": "8", "deviceclass.resource.kubernetes.io/mig.nvidia.com": "14"}},
			want: volcano(quota.Queue{Weight: 1, State: quota.Open, Reclaimable: true,
				Capability: quota.Limit{Amount: placement.Resources{GPU: 22}, Named: quota.GPU}})},
		{name: "Volcano, every field it has", api: VolcanoQueue,
			spec: map[string]any{"weight": int64(3), "priority": int64(-2), "reclaimable": false,
				"capability": map[string]any{"nvidia.com/gpu": "8", "cpu": "64", "memory": "512Gi", "ephemeral-storage": "1Ti"},
				"guarantee":  map[string]any{"resource": map[string]any{"nvidia.com/gpu": int64(4), "cpu": "500m"}},
				"deserved":   map[string]any{"nvidia.com/gpu": "6"}, "parent": "root"},
			status: map[string]any{"state": "Closing", "allocated": map[string]any{"cpu": "1"}},
			want: volcano(quota.Queue{Weight: 3, Priority: -2, State: quota.Closing,
				Capability: quota.Limit{Amount: placement.Resources{GPU: 8, MilliCPU: 64000, Memory: 512 * gi}, Named: quota.Counted},
				Guarantee:  placement.Resources{GPU: 4, MilliCPU: 500}, Min: placement.Resources{GPU: 6}})},
		{name: "Volcano, a hierarchical queue under another", api: VolcanoQueue, spec: map[string]any{"parent": "research"},
			want: volcano(quota.Queue{Weight: 1, State: quota.Open, Reclaimable: true, Parent: "research", ParentField: "spec.parent"})},
		{name: "Volcano, weight 0 as its webhook fills it", api: VolcanoQueue, spec: map[string]any{"weight": int64(0)},
			want: volcano(quota.Queue{Weight: 1, State: quota.Open, Reclaimable: true})},
		{name: "Volcano, cpu and memory capability 0 is none, as proportion reads it; GPUs 0 is none allowed", api: VolcanoQueue,
			spec: map[string]any{"capability": map[string]any{"nvidia.com/gpu": "0", "cpu": "0", "memory": int64(0)}},
			want: volcano(quota.Queue{Weight: 1, State: quota.Open, Reclaimable: true, Capability: quota.Limit{Named: quota.GPU}})},
		{name: "Volcano, a guarantee up to its capability", api: VolcanoQueue,
			spec: map[string]any{"capability": map[string]any{"nvidia.com/gpu": "4"}, "guarantee": map[string]any{"resource": map[string]any{"nvidia.com/gpu": "4", "memory": "1Gi"}}},
			want: volcano(quota.Queue{Weight: 1, State: quota.Open, Reclaimable: true,
				Capability: quota.Limit{Amount: placement.Resources{GPU: 4}, Named: quota.GPU}, Guarantee: placement.Resources{GPU: 4, Memory: gi}})},
		{name: "Volcano, numbers as encoding/json leaves them", api: VolcanoQueue,
			spec: map[string]any{"weight": float64(2), "capability": map[string]any{"cpu": 1.5, "nvidia.com/gpu": float64(2)}},
			want: volcano(quota.Queue{Weight: 2, State: quota.Open, Reclaimable: true,
				Capability: quota.Limit{Amount: placement.Resources{GPU: 2, MilliCPU: 1500}, Named: quota.GPU | quota.CPU}})},
		{name: "Volcano, Unknown takes no new gang but is a state", api: VolcanoQueue, status: map[string]any{"state": "Unknown"},
			want: volcano(quota.Queue{Weight: 1, State: quota.Unknown, Reclaimable: true})},
		{name: "kube-batch v1alpha1, as its chart ships default", api: KubeBatchQueue, spec: map[string]any{"weight": int64(1)},
			want: quota.Queue{Kind: KindKubeBatchQueue, Name: "team-a", Source: "kube-batch Queue team-a (scheduling.incubator.k8s.io/v1alpha1)",
				Weight: 1, State: quota.Open, Reclaimable: true}},
		{name: "kube-batch v1alpha2 capability, enforced although kube-batch does not read it; 0 is 0", api: KubeBatchQueueV1alpha2,
			spec: map[string]any{"weight": int64(2), "capability": map[string]any{"cpu": "0", "nvidia.com/gpu": "2"}},
			want: quota.Queue{Kind: KindKubeBatchQueue, Name: "team-a", Source: "kube-batch Queue team-a (scheduling.sigs.dev/v1alpha2)",
				Weight: 2, State: quota.Open, Reclaimable: true, Capability: quota.Limit{Amount: placement.Resources{GPU: 2}, Named: quota.GPU | quota.CPU}}},
		{name: "kube-batch ignores Volcano's fields", api: KubeBatchQueue,
			spec: map[string]any{"reclaimable": "no", "priority": "high", "guarantee": 5}, status: map[string]any{"state": "Shut"},
			want: quota.Queue{Kind: KindKubeBatchQueue, Name: "team-a", Source: "kube-batch Queue team-a (scheduling.incubator.k8s.io/v1alpha1)",
				Weight: 1, State: quota.Open, Reclaimable: true}},
		{name: "ElasticQuota: min, max, and the namespace it applies to", api: ElasticQuota,
			spec: map[string]any{"min": map[string]any{"nvidia.com/gpu": "2", "cpu": "8"}, "max": map[string]any{"nvidia.com/gpu": "6", "cpu": "16", "memory": "64Gi"}},
			want: quota.Queue{Kind: KindElasticQuota, Name: "team-a/quota", Namespace: "team-a", Source: "ElasticQuota team-a/quota (scheduling.x-k8s.io/v1alpha1)",
				Weight: 1, State: quota.Open, Reclaimable: true, BorrowsOnlyMin: true, Min: placement.Resources{GPU: 2, MilliCPU: 8000},
				Capability: quota.Limit{Amount: placement.Resources{GPU: 6, MilliCPU: 16000, Memory: 64 * gi}, Named: quota.Counted}}},
		{name: "ElasticQuota without max: unlimited, min 0", api: ElasticQuota, spec: map[string]any{},
			want: quota.Queue{Kind: KindElasticQuota, Name: "team-a/quota", Namespace: "team-a", Source: "ElasticQuota team-a/quota (scheduling.x-k8s.io/v1alpha1)",
				Weight: 1, State: quota.Open, Reclaimable: true, BorrowsOnlyMin: true}},
		{name: "ElasticQuota max naming GPUs only leaves cpu and memory unlimited", api: ElasticQuota,
			spec: map[string]any{"max": map[string]any{"nvidia.com/gpu": "4"}},
			want: quota.Queue{Kind: KindElasticQuota, Name: "team-a/quota", Namespace: "team-a", Source: "ElasticQuota team-a/quota (scheduling.x-k8s.io/v1alpha1)",
				Weight: 1, State: quota.Open, Reclaimable: true, BorrowsOnlyMin: true, Capability: quota.Limit{Amount: placement.Resources{GPU: 4}, Named: quota.GPU}}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			name := "team-a"
			if tc.api.Namespaced {
				name = "quota"
			}
			require.Equal(t, tc.want, tc.api.Parse(queueObject(tc.api, name, tc.spec, tc.status)))
		})
	}
}

func TestParseQueueErrors(t *testing.T) {
	tests := []struct {
		name      string
		api       QueueAPI
		spec      map[string]any
		status    map[string]any
		wantField string
		wantValue string
	}{
		{name: "negative weight", api: VolcanoQueue, spec: map[string]any{"weight": int64(-1)}, wantField: "spec.weight", wantValue: "-1"},
		{name: "weight past int32", api: KubeBatchQueue, spec: map[string]any{"weight": int64(1) << 31}, wantField: "spec.weight", wantValue: "2147483648"},
		{name: "weight a fraction", api: KubeBatchQueueV1alpha2, spec: map[string]any{"weight": 1.5}, wantField: "spec.weight", wantValue: "1.5"},
		{name: "negative GPUs", api: VolcanoQueue, spec: map[string]any{"capability": map[string]any{"nvidia.com/gpu": "-4"}},
			wantField: "spec.capability.nvidia.com/gpu", wantValue: "-4"},
		{name: "unparsable cpu", api: VolcanoQueue, spec: map[string]any{"capability": map[string]any{"cpu": "lots"}}, wantField: "spec.capability.cpu", wantValue: "lots"},
		{name: "a quantity that is no quantity", api: VolcanoQueue, spec: map[string]any{"capability": map[string]any{"memory": true}}, wantField: "spec.capability.memory", wantValue: "true"},
		{name: "half a GPU", api: ElasticQuota, spec: map[string]any{"max": map[string]any{"nvidia.com/gpu": "0.5"}}, wantField: "spec.max.nvidia.com/gpu", wantValue: "0.5"},
		{name: "more cpu than int64 millicores hold", api: VolcanoQueue, spec: map[string]any{"capability": map[string]any{"cpu": "1e21"}}, wantField: "spec.capability.cpu", wantValue: "1e21"},
		{name: "capability not a list", api: VolcanoQueue, spec: map[string]any{"capability": "8 GPUs"}, wantField: "spec.capability", wantValue: "8 GPUs"},
		{name: "guarantee above capability", api: VolcanoQueue,
			spec:      map[string]any{"capability": map[string]any{"nvidia.com/gpu": "4"}, "guarantee": map[string]any{"resource": map[string]any{"nvidia.com/gpu": "6"}}},
			wantField: "spec.guarantee.resource.nvidia.com/gpu", wantValue: "6"},
		{name: "negative guarantee", api: VolcanoQueue, spec: map[string]any{"guarantee": map[string]any{"resource": map[string]any{"memory": "-1Gi"}}},
			wantField: "spec.guarantee.resource.memory", wantValue: "-1Gi"},
		{name: "deserved above capability", api: VolcanoQueue,
			spec:      map[string]any{"capability": map[string]any{"nvidia.com/gpu": "4"}, "deserved": map[string]any{"nvidia.com/gpu": "6"}},
			wantField: "spec.deserved.nvidia.com/gpu", wantValue: "6"},
		{name: "parent not a name", api: VolcanoQueue, spec: map[string]any{"parent": int64(3)}, wantField: "spec.parent", wantValue: "3"},
		{name: "its own parent", api: VolcanoQueue, spec: map[string]any{"parent": "team-a"}, wantField: "spec.parent", wantValue: "team-a"},
		{name: "reclaimable not a bool", api: VolcanoQueue, spec: map[string]any{"reclaimable": "yes"}, wantField: "spec.reclaimable", wantValue: "yes"},
		{name: "priority past int32", api: VolcanoQueue, spec: map[string]any{"priority": int64(1) << 40}, wantField: "spec.priority", wantValue: "1099511627776"},
		{name: "unknown state", api: VolcanoQueue, status: map[string]any{"state": "Draining"}, wantField: "status.state", wantValue: "Draining"},
		{name: "state not a string", api: VolcanoQueue, status: map[string]any{"state": int64(1)}, wantField: "status.state", wantValue: "1"},
		{name: "negative min", api: ElasticQuota, spec: map[string]any{"min": map[string]any{"cpu": "-1"}}, wantField: "spec.min.cpu", wantValue: "-1"},
		{name: "min above max", api: ElasticQuota,
			spec:      map[string]any{"min": map[string]any{"memory": "2Gi"}, "max": map[string]any{"memory": "1Gi"}},
			wantField: "spec.min.memory", wantValue: "2Gi"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			name := "team-a"
			if tc.api.Namespaced {
				name = "quota"
			}
			got := tc.api.Parse(queueObject(tc.api, name, tc.spec, tc.status))
			var fieldErr *gangspec.FieldError
			require.True(t, errors.As(got.Err, &fieldErr), "want *FieldError, got %T: %v", got.Err, got.Err)
			require.Equal(t, tc.api.Object("team-a", name), fieldErr.Object)
			require.Equal(t, tc.wantField, fieldErr.Field)
			require.Equal(t, tc.wantValue, fieldErr.Value)
			want := tc.api.base("team-a", name)
			want.Err = got.Err
			require.Equal(t, want, got, "a refused queue keeps its identity and nothing it read")
		})
	}
}

func TestParseQueueErrorWording(t *testing.T) {
	spec := map[string]any{"capability": map[string]any{"nvidia.com/gpu": "4"}, "guarantee": map[string]any{"resource": map[string]any{"nvidia.com/gpu": "6"}}}
	got := VolcanoQueue.Parse(queueObject(VolcanoQueue, "team-a", spec, nil))
	require.EqualError(t, got.Err, `Volcano Queue team-a: spec.guarantee.resource.nvidia.com/gpu="6": more than spec.capability.nvidia.com/gpu, 4: a queue cannot be guaranteed more than it may hold`)
}

func TestChooseQueue(t *testing.T) {
	v1 := FoundQueue{API: KubeBatchQueue, Object: queueObject(KubeBatchQueue, "default", map[string]any{"weight": int64(2)}, nil)}
	v2 := FoundQueue{API: KubeBatchQueueV1alpha2, Object: queueObject(KubeBatchQueueV1alpha2, "default", map[string]any{"weight": int64(5)}, nil)}
	tests := []struct {
		name    string
		found   []FoundQueue
		wantOK  bool
		weight  int64
		wantErr string
	}{
		{name: "nothing", found: nil},
		{name: "one object: its reading", found: []FoundQueue{v2}, wantOK: true, weight: 5},
		{name: "both kube-batch versions: refused, naming both", found: []FoundQueue{v1, v2}, wantOK: true, weight: 1,
			wantErr: `kube-batch Queue default: metadata.name="default": exists in scheduling.incubator.k8s.io/v1alpha1 and scheduling.sigs.dev/v1alpha2, which name the same queue: delete all but one`},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			q, ok := ChooseQueue(tc.found)
			require.Equal(t, tc.wantOK, ok)
			if !ok {
				return
			}
			require.Equal(t, "kube-batch Queue default", q.Key())
			require.Equal(t, tc.weight, q.Weight)
			if tc.wantErr == "" {
				require.NoError(t, q.Err)
			} else {
				require.EqualError(t, q.Err, tc.wantErr)
			}
		})
	}
}

func TestAloneInNamespace(t *testing.T) {
	spec := map[string]any{"max": map[string]any{"nvidia.com/gpu": "4"}}
	q := ElasticQuota.Parse(queueObject(ElasticQuota, "gpu", spec, nil))
	require.Equal(t, q, AloneInNamespace(q, "team-a", nil))

	crowded := AloneInNamespace(q, "team-a", []string{"ElasticQuota team-a/z", "Koordinator ElasticQuota team-a"})
	require.EqualError(t, crowded.Err, `ElasticQuota team-a/gpu: metadata.namespace="team-a": namespace team-a also has ElasticQuota team-a/z, Koordinator ElasticQuota team-a; one applies to a namespace: delete all but one`)
	require.Equal(t, "team-a", crowded.Namespace, "it still applies to its namespace, so that its pods wait with the reason")
	require.Equal(t, quota.Limit{}, crowded.Capability)

	bad := ElasticQuota.Parse(queueObject(ElasticQuota, "gpu", map[string]any{"max": "x"}, nil))
	require.Same(t, bad.Err, AloneInNamespace(bad, "team-a", []string{"ElasticQuota team-a/b"}).Err, "its own error comes first")

	koord := KoordinatorElasticQuota.Parse(koordinatorQuota("team-a", spec, map[string]string{wellknown.AnnotationKoordinatorQuotaNamespaces: `["team-b"]`}, nil))
	byName := AloneInNamespace(koord, "team-a", []string{"ElasticQuota team-a/gpu"})
	require.EqualError(t, byName.Err, `Koordinator ElasticQuota team-a: metadata.name="team-a": namespace team-a also has ElasticQuota team-a/gpu; one applies to a namespace: delete all but one`)
	require.Equal(t, []string{"team-a", "team-b"}, byName.Namespaces, "it still covers its namespaces")
	listed := AloneInNamespace(koord, "team-b", []string{"ElasticQuota team-b/gpu"})
	require.EqualError(t, listed.Err, `Koordinator ElasticQuota team-a: metadata.annotations.quota.scheduling.koordinator.sh/namespaces="team-b": namespace team-b also has ElasticQuota team-b/gpu; one applies to a namespace: delete all but one`)
}

// koordinatorQuota is a Koordinator ElasticQuota named name in namespace team-a.
func koordinatorQuota(name string, spec map[string]any, annotations, labels map[string]string) *unstructured.Unstructured {
	obj := queueObject(KoordinatorElasticQuota, name, spec, nil)
	obj.SetAnnotations(annotations)
	obj.SetLabels(labels)
	return obj
}

func TestParseKoordinatorElasticQuota(t *testing.T) {
	const (
		weight    = wellknown.AnnotationKoordinatorQuotaSharedWeight
		spaces    = wellknown.AnnotationKoordinatorQuotaNamespaces
		lent      = wellknown.LabelKoordinatorQuotaAllowLent
		gpuQuota  = `{"nvidia.com/gpu":"8","cpu":"64"}`
		objectErr = `Koordinator ElasticQuota gpu: `
	)
	spec := map[string]any{"min": map[string]any{"nvidia.com/gpu": "2"}, "max": map[string]any{"nvidia.com/gpu": "6", "cpu": "96"}}
	base := quota.Queue{Kind: KindKoordinatorElasticQuota, Name: "gpu", Source: "Koordinator ElasticQuota gpu in namespace team-a (scheduling.sigs.k8s.io/v1alpha1)",
		Weight: 6, State: quota.Open, Reclaimable: true, Min: placement.Resources{GPU: 2},
		Capability: quota.Limit{Amount: placement.Resources{GPU: 6, MilliCPU: 96000}, Named: quota.GPU | quota.CPU}}
	with := func(f func(*quota.Queue)) quota.Queue { q := base; f(&q); return q }
	for _, tc := range []struct {
		name        string
		qname       string
		spec        map[string]any
		annotations map[string]string
		labels      map[string]string
		want        quota.Queue
		wantErr     string
	}{
		{name: "weight defaults to max's GPUs; covers no namespace by a name unlike its own", want: base},
		{name: "named after its namespace, it covers it", qname: "team-a", want: with(func(q *quota.Queue) {
			q.Name, q.Source, q.Namespaces = "team-a", "Koordinator ElasticQuota team-a in namespace team-a (scheduling.sigs.k8s.io/v1alpha1)", []string{"team-a"}
		})},
		{name: "the default quota covers every namespace no other does", qname: "koordinator-default-quota", spec: map[string]any{}, want: quota.Queue{
			Kind: KindKoordinatorElasticQuota, Name: "koordinator-default-quota", Weight: 1, State: quota.Open, Reclaimable: true,
			Source: "Koordinator ElasticQuota koordinator-default-quota in namespace team-a (scheduling.sigs.k8s.io/v1alpha1)", Namespaces: []string{quota.AllNamespaces}}},
		{name: "namespaces annotation", annotations: map[string]string{spaces: `["team-c","team-b","team-c"]`}, want: with(func(q *quota.Queue) { q.Namespaces = []string{"team-b", "team-c"} })},
		{name: "shared weight by GPUs", annotations: map[string]string{weight: gpuQuota}, want: with(func(q *quota.Queue) { q.Weight = 8 })},
		{name: "shared weight by cores without GPUs", annotations: map[string]string{weight: `{"cpu":"2500m","memory":"1Gi"}`}, want: with(func(q *quota.Queue) { q.Weight = 2 })},
		{name: "shared weight below a core is 1", annotations: map[string]string{weight: `{"cpu":"500m"}`}, want: with(func(q *quota.Queue) { q.Weight = 1 })},
		{name: "an all-zero shared weight is max, as Koordinator reads it", annotations: map[string]string{weight: `{"nvidia.com/gpu":0}`}, want: base},
		{name: "max without GPUs weighs by cores", spec: map[string]any{"max": map[string]any{"cpu": "16"}}, want: with(func(q *quota.Queue) {
			q.Min, q.Weight, q.Capability = placement.Resources{}, 16, quota.Limit{Amount: placement.Resources{MilliCPU: 16000}, Named: quota.CPU}
		})},
		{name: "allow-lent-resource false keeps min as a guarantee", labels: map[string]string{lent: "false"}, want: with(func(q *quota.Queue) { q.Guarantee = q.Min })},
		{name: "allow-lent-resource other values lend", labels: map[string]string{lent: "no"}, want: base},
		{name: "the tree labels nest the quota", labels: map[string]string{"quota.scheduling.koordinator.sh/parent": "research", "quota.scheduling.koordinator.sh/is-parent": "true"},
			want: with(func(q *quota.Queue) {
				q.Parent, q.ParentField, q.IsParent = "research", "metadata.labels.quota.scheduling.koordinator.sh/parent", true
			})},
		{name: "the root as parent is the top", labels: map[string]string{"quota.scheduling.koordinator.sh/parent": "koordinator-root-quota", "quota.scheduling.koordinator.sh/is-parent": "false"}, want: base},
		{name: "the root quota is no parent lockstep enforces", qname: "koordinator-root-quota",
			labels: map[string]string{"quota.scheduling.koordinator.sh/is-parent": "true"}, want: func() quota.Queue {
				q := base
				q.Name, q.Source = "koordinator-root-quota", "Koordinator ElasticQuota koordinator-root-quota in namespace team-a (scheduling.sigs.k8s.io/v1alpha1)"
				return q
			}()},
		{name: "its own parent", labels: map[string]string{"quota.scheduling.koordinator.sh/parent": "gpu"},
			wantErr: objectErr + `metadata.labels.quota.scheduling.koordinator.sh/parent="gpu": a quota cannot be its own parent`},
		{name: "bad shared weight", annotations: map[string]string{weight: `8`},
			wantErr: objectErr + `metadata.annotations.quota.scheduling.koordinator.sh/shared-weight="8": must be a JSON resource list, such as {"nvidia.com/gpu":"4"}`},
		{name: "negative shared weight", annotations: map[string]string{weight: `{"nvidia.com/gpu":"-1"}`},
			wantErr: objectErr + `metadata.annotations.quota.scheduling.koordinator.sh/shared-weight.nvidia.com/gpu="-1": must not be negative`},
		{name: "bad namespaces", annotations: map[string]string{spaces: `team-b`},
			wantErr: objectErr + `metadata.annotations.quota.scheduling.koordinator.sh/namespaces="team-b": must be a JSON list of namespace names, such as ["team-a","team-b"]`},
		{name: "min above max", spec: map[string]any{"min": map[string]any{"nvidia.com/gpu": "8"}, "max": map[string]any{"nvidia.com/gpu": "6"}},
			wantErr: objectErr + `spec.min.nvidia.com/gpu="8": more than spec.max.nvidia.com/gpu, 6: a quota's min cannot be more than its max`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			name, sp := tc.qname, tc.spec
			if name == "" {
				name = "gpu"
			}
			if sp == nil {
				sp = spec
			}
			got := KoordinatorElasticQuota.Parse(koordinatorQuota(name, sp, tc.annotations, tc.labels))
			if tc.wantErr != "" {
				require.EqualError(t, got.Err, tc.wantErr)
				var fe *gangspec.FieldError
				require.True(t, errors.As(got.Err, &fe))
				require.Equal(t, 1, int(got.Weight))
				return
			}
			require.NoError(t, got.Err)
			require.Equal(t, tc.want, got)
		})
	}
}

func TestQueueAPIs(t *testing.T) {
	for _, api := range QueueAPIs() {
		require.Equal(t, api.Namespaced, api.Resource.Resource == "elasticquotas", api.Kind)
		require.Equal(t, api.Namespaced && api.Kind == KindElasticQuota, api.pool, "%s: only scheduler-plugins' ElasticQuotas borrow from a pool of mins", api.Kind)
	}
	require.Equal(t, "Koordinator ElasticQuota gpu", KoordinatorElasticQuota.Key("team-a", "gpu"), "Koordinator names quotas by name alone")
	require.Equal(t, "Volcano Queue team-a", VolcanoQueue.Key("ignored", "team-a"))
	require.Equal(t, "ElasticQuota team-a/gpu", ElasticQuota.Key("team-a", "gpu"))
}
