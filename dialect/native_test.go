package dialect

import (
	"errors"
	"testing"

	"github.com/stretchr/testify/require"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	"github.com/lockstep-sched/lockstep/gangspec"
)

// object builds a group object of api as a dynamic client hands it over: numbers are int64.
func object(api API, content map[string]any) *unstructured.Unstructured {
	obj := &unstructured.Unstructured{Object: content}
	obj.SetAPIVersion(api.Resource.GroupVersion().String())
	obj.SetNamespace("team-a")
	obj.SetName("train")
	return obj
}

// 1.36's PodGroup (v1alpha2): the quorum, the topology, the priority, and the disruption mode as
// a word (PodGroup: the members go only together).
func TestParseNativeV1alpha2(t *testing.T) {
	source := "Kubernetes PodGroup team-a/train (scheduling.k8s.io/v1alpha2)"
	tests := []struct {
		name string
		spec map[string]any
		want gangspec.Spec
	}{
		{name: "gang policy: minCount is the quorum",
			spec: map[string]any{"schedulingPolicy": map[string]any{"gang": map[string]any{"minCount": int64(4)}}},
			want: gangspec.Spec{MinAvailable: 4}},
		{name: "basic policy: every pod on its own",
			spec: map[string]any{"schedulingPolicy": map[string]any{"basic": map[string]any{}}},
			want: gangspec.Spec{MinAvailable: 1}},
		{name: "as the Job controller writes it, with priority and disruption mode PodGroup",
			spec: map[string]any{"podGroupTemplateRef": map[string]any{"workload": map[string]any{"workloadName": "job-a", "podGroupTemplateName": "job-a"}},
				"schedulingPolicy": map[string]any{"gang": map[string]any{"minCount": int64(3)}}, "priority": int64(100), "disruptionMode": "PodGroup"},
			want: gangspec.Spec{MinAvailable: 3, Priority: ptr(int32(100)), DisruptAll: true}},
		{name: "disruption mode Pod, the default: members may go one by one",
			spec: map[string]any{"schedulingPolicy": map[string]any{"gang": map[string]any{"minCount": int64(3)}}, "disruptionMode": "Pod"},
			want: gangspec.Spec{MinAvailable: 3}},
		{name: "one topology key: one domain of that tier, required",
			spec: map[string]any{"schedulingPolicy": map[string]any{"gang": map[string]any{"minCount": int64(2)}},
				"schedulingConstraints": map[string]any{"topology": []any{map[string]any{"key": "example.com/rack"}}}},
			want: gangspec.Spec{MinAvailable: 2, Topology: gangspec.Topology{Key: "example.com/rack", Required: true,
				Source: "spec.schedulingConstraints.topology of Kubernetes PodGroup team-a/train"}}},
		{name: "several keys: every one holds, so the narrowest known",
			spec: map[string]any{"schedulingPolicy": map[string]any{"gang": map[string]any{"minCount": int64(2)}},
				"schedulingConstraints": map[string]any{"topology": []any{map[string]any{"key": "example.com/block"}, map[string]any{"key": "example.com/rack"}}}},
			want: gangspec.Spec{MinAvailable: 2, Topology: gangspec.Topology{Layers: []string{"example.com/block", "example.com/rack"}, Required: true,
				Source: "spec.schedulingConstraints.topology of Kubernetes PodGroup team-a/train"}}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			got, err := NativeV1alpha2.Parse(object(NativeV1alpha2, map[string]any{"spec": tc.spec}))
			require.NoError(t, err)
			tc.want.Namespace, tc.want.Name, tc.want.Source = "team-a", "train", source
			tc.want.QuorumFrom = "spec.schedulingPolicy.gang.minCount of Kubernetes PodGroup team-a/train"
			require.Equal(t, &tc.want, got)
		})
	}
}

// 1.37's PodGroup (v1beta1), as users and the Job controller write it: what it says beyond the
// quorum reaches the gang's rules.
func TestParseNativeV1beta1(t *testing.T) {
	gang := func(n int64) map[string]any { return map[string]any{"gang": map[string]any{"minCount": n}} }
	tests := []struct {
		name string
		spec map[string]any
		want gangspec.Spec
	}{
		{name: "gang policy: minCount is the quorum", spec: map[string]any{"schedulingPolicy": gang(4)},
			want: gangspec.Spec{MinAvailable: 4}},
		{name: "basic policy: every pod on its own", spec: map[string]any{"schedulingPolicy": map[string]any{"basic": map[string]any{}}},
			want: gangspec.Spec{MinAvailable: 1}},
		{name: "as the Job controller writes it: a workload reference, priority resolved, disruption single",
			spec: map[string]any{"workloadRef": map[string]any{"workloadName": "job-a", "templateName": "job-a"}, "schedulingPolicy": gang(3),
				"priorityClassName": "team-high", "priority": int64(100), "disruptionMode": map[string]any{"single": map[string]any{}}},
			want: gangspec.Spec{MinAvailable: 3, Priority: ptr(int32(100))}},
		{name: "disruption all: members go only together", spec: map[string]any{"schedulingPolicy": gang(2), "disruptionMode": map[string]any{"all": map[string]any{}}},
			want: gangspec.Spec{MinAvailable: 2, DisruptAll: true}},
		{name: "preemptionPolicy Never: the gang evicts nothing", spec: map[string]any{"schedulingPolicy": gang(2), "preemptionPolicy": "Never"},
			want: gangspec.Spec{MinAvailable: 2, PreemptNever: true}},
		{name: "preemptionPolicy PreemptLowerPriority, the default", spec: map[string]any{"schedulingPolicy": gang(2), "preemptionPolicy": "PreemptLowerPriority"},
			want: gangspec.Spec{MinAvailable: 2}},
		{name: "topology, as in 1.36", spec: map[string]any{"schedulingPolicy": gang(2),
			"schedulingConstraints": map[string]any{"topology": []any{map[string]any{"key": "example.com/rack"}}}},
			want: gangspec.Spec{MinAvailable: 2, Topology: gangspec.Topology{Key: "example.com/rack", Required: true,
				Source: "spec.schedulingConstraints.topology of Kubernetes PodGroup team-a/train"}}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			got, err := Native.Parse(object(Native, map[string]any{"spec": tc.spec}))
			require.NoError(t, err)
			tc.want.Namespace, tc.want.Name, tc.want.Source = "team-a", "train", "Kubernetes PodGroup team-a/train (scheduling.k8s.io/v1beta1)"
			tc.want.QuorumFrom = "spec.schedulingPolicy.gang.minCount of Kubernetes PodGroup team-a/train"
			require.Equal(t, &tc.want, got)
		})
	}
}

func TestParseNativeErrors(t *testing.T) {
	gang := map[string]any{"gang": map[string]any{"minCount": int64(2)}}
	tests := []struct {
		name             string
		api              API
		spec             map[string]any
		field, valueWant string
	}{
		{name: "no policy", spec: map[string]any{}, field: "spec.schedulingPolicy"},
		{name: "both policies", spec: map[string]any{"schedulingPolicy": map[string]any{"gang": map[string]any{"minCount": int64(2)}, "basic": map[string]any{}}},
			field: "spec.schedulingPolicy"},
		{name: "gang without minCount", spec: map[string]any{"schedulingPolicy": map[string]any{"gang": map[string]any{}}},
			field: "spec.schedulingPolicy.gang.minCount"},
		{name: "minCount zero", spec: map[string]any{"schedulingPolicy": map[string]any{"gang": map[string]any{"minCount": int64(0)}}},
			field: "spec.schedulingPolicy.gang.minCount", valueWant: "0"},
		{name: "topology key empty", spec: map[string]any{"schedulingPolicy": gang,
			"schedulingConstraints": map[string]any{"topology": []any{map[string]any{"key": ""}}}},
			field: "spec.schedulingConstraints.topology[0].key", valueWant: "map[key:]"},
		{name: "a CompositePodGroup's member, refused with why", api: Native,
			spec:  map[string]any{"schedulingPolicy": gang, "parentCompositePodGroupName": "all-of-training", "workloadRef": map[string]any{"workloadName": "w"}},
			field: "spec.parentCompositePodGroupName", valueWant: "all-of-training"},
		{name: "both disruption modes", api: Native,
			spec:  map[string]any{"schedulingPolicy": gang, "disruptionMode": map[string]any{"single": map[string]any{}, "all": map[string]any{}}},
			field: "spec.disruptionMode"},
		{name: "unknown disruption mode", api: NativeV1alpha2, spec: map[string]any{"schedulingPolicy": gang, "disruptionMode": "Sometimes"},
			field: "spec.disruptionMode", valueWant: "Sometimes"},
		{name: "unknown preemption policy", api: Native, spec: map[string]any{"schedulingPolicy": gang, "preemptionPolicy": "Sometimes"},
			field: "spec.preemptionPolicy", valueWant: "Sometimes"},
		{name: "priority beyond 32 bits", api: Native, spec: map[string]any{"schedulingPolicy": gang, "priority": int64(1) << 40},
			field: "spec.priority", valueWant: "1099511627776"},
	}
	for _, tc := range tests {
		apis := []API{Native, NativeV1alpha2}
		if tc.api.Resource.Version != "" {
			apis = []API{tc.api}
		}
		for _, api := range apis {
			t.Run(api.Resource.Version+"/"+tc.name, func(t *testing.T) {
				_, err := api.Parse(object(api, map[string]any{"spec": tc.spec}))
				var fieldErr *gangspec.FieldError
				require.True(t, errors.As(err, &fieldErr), "want *FieldError, got %T: %v", err, err)
				require.Equal(t, "Kubernetes PodGroup team-a/train", fieldErr.Object)
				require.Equal(t, tc.field, fieldErr.Field)
				require.Equal(t, tc.valueWant, fieldErr.Value)
			})
		}
	}
}

// An apiserver serving a PodGroup at two versions hands the one object over twice: the newest
// version's reading is the gang's, and no ambiguity is reported.
func TestChooseReadsOneVersionOfAnObject(t *testing.T) {
	beta := &gangspec.Spec{MinAvailable: 3, Source: "v1beta1"}
	alpha := &gangspec.Spec{MinAvailable: 3, Source: "v1alpha2"}
	got, err := Choose([]Found{{API: Native, Namespace: "team-a", Name: "train", Spec: beta},
		{API: NativeV1alpha2, Namespace: "team-a", Name: "train", Spec: alpha}})
	require.NoError(t, err)
	require.Same(t, beta, got)
}

func TestParseKueueWorkload(t *testing.T) {
	podSets := []any{map[string]any{"name": "main", "count": int64(4)}, map[string]any{"name": "launcher"}}
	tests := []struct {
		name    string
		content map[string]any
		want    int
	}{
		{name: "not admitted yet: the spec's counts, a count absent being 1",
			content: map[string]any{"spec": map[string]any{"podSets": podSets}}, want: 5},
		{name: "partial admission: the admitted count",
			content: map[string]any{"spec": map[string]any{"podSets": podSets}, "status": map[string]any{"admission": map[string]any{
				"podSetAssignments": []any{map[string]any{"name": "main", "count": int64(2)}, map[string]any{"name": "launcher", "count": int64(1)}}}}},
			want: 3},
		{name: "an admission without counts (older Kueue): the spec's",
			content: map[string]any{"spec": map[string]any{"podSets": podSets}, "status": map[string]any{"admission": map[string]any{
				"podSetAssignments": []any{map[string]any{"name": "main"}, map[string]any{"name": "launcher"}}}}},
			want: 5},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			got, err := KueueWorkload.Parse(object(KueueWorkload, tc.content))
			require.NoError(t, err)
			require.Equal(t, &gangspec.Spec{Namespace: "team-a", Name: "train", MinAvailable: tc.want,
				Source: "Kueue Workload team-a/train (kueue.x-k8s.io/v1beta2)"}, got)
		})
	}

	_, err := KueueWorkload.Parse(object(KueueWorkload, map[string]any{"spec": map[string]any{"podSets": []any{map[string]any{"name": "main", "count": "four"}}}}))
	require.ErrorContains(t, err, `Kueue Workload team-a/train: spec.podSets[0].count="four"`)
	_, err = KueueWorkload.Parse(object(KueueWorkload, map[string]any{"spec": map[string]any{"podSets": []any{map[string]any{"name": "main", "count": int64(0)}}}}))
	require.ErrorContains(t, err, "admits no pods")
}

func ptr[T any](v T) *T { return &v }
