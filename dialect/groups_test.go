package dialect

import (
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	"github.com/lockstep-sched/lockstep/gangspec"
	"github.com/lockstep-sched/lockstep/quota"
	"github.com/lockstep-sched/lockstep/wellknown"
)

// volcanoRef is the queue a Volcano PodGroup with spec.queue name goes to.
func volcanoRef(name string) quota.Ref {
	return quota.Ref{Kind: KindVolcanoQueue, Name: name, Fallback: quota.DefaultName}
}

// group builds a PodGroup as the apiserver hands it to a dynamic client: numbers are int64.
func group(api API, spec map[string]any, annotations map[string]string) *unstructured.Unstructured {
	obj := &unstructured.Unstructured{Object: map[string]any{"spec": spec}}
	obj.SetAPIVersion(api.Resource.GroupVersion().String())
	obj.SetKind("PodGroup")
	obj.SetNamespace("team-a")
	obj.SetName("tf")
	obj.SetAnnotations(annotations)
	return obj
}

func TestParseGroup(t *testing.T) {
	tests := []struct {
		name string
		api  API
		spec map[string]any
		ann  map[string]string
		want gangspec.Spec
	}{
		{name: "scheduler-plugins, as the training-operator writes it", api: Coscheduling,
			spec: map[string]any{"minMember": int64(6), "scheduleTimeoutSeconds": int64(90), "minResources": map[string]any{"nvidia.com/gpu": "10"}},
			want: gangspec.Spec{MinAvailable: 6, WaitingTime: 90 * time.Second,
				Source: "scheduler-plugins PodGroup team-a/tf (scheduling.x-k8s.io/v1alpha1)"}},
		{name: "scheduler-plugins, as the MPI operator writes it: timeout 0 is the default", api: Coscheduling,
			spec: map[string]any{"minMember": int64(5), "scheduleTimeoutSeconds": int64(0)},
			want: gangspec.Spec{MinAvailable: 5, Source: "scheduler-plugins PodGroup team-a/tf (scheduling.x-k8s.io/v1alpha1)"}},
		{name: "Koordinator with timeout 0: the default too", api: Koordinator,
			spec: map[string]any{"minMember": int64(2), "scheduleTimeoutSeconds": float64(0)},
			want: gangspec.Spec{MinAvailable: 2, Policy: gangspec.OnceSatisfied, Source: "Koordinator PodGroup team-a/tf (scheduling.sigs.k8s.io/v1alpha1)"}},
		{name: "Volcano's job controller for a vcjob without minAvailable: minMember 0, no quorum", api: Volcano,
			spec: map[string]any{"minMember": int64(0)},
			want: gangspec.Spec{MinAvailable: 1, Source: "Volcano PodGroup team-a/tf (scheduling.volcano.sh/v1beta1)", Queue: volcanoRef("")}},
		{name: "Volcano with task quorums; a task at 0 asks nothing", api: Volcano,
			spec: map[string]any{"minMember": int64(5), "minTaskMember": map[string]any{"ps": int64(1), "worker": int64(4), "chief": int64(0)}, "queue": "default"},
			want: gangspec.Spec{MinAvailable: 5, MinPerTask: map[string]int{"ps": 1, "worker": 4},
				Source: "Volcano PodGroup team-a/tf (scheduling.volcano.sh/v1beta1)", Queue: volcanoRef("default")}},
		{name: "Volcano without spec.queue: the namespace's default queue, else default", api: Volcano,
			spec: map[string]any{"minMember": int64(2)},
			want: gangspec.Spec{MinAvailable: 2, Source: "Volcano PodGroup team-a/tf (scheduling.volcano.sh/v1beta1)", Queue: volcanoRef("")}},
		{name: "Volcano with its queue", api: Volcano,
			spec: map[string]any{"minMember": int64(2), "queue": "team-a"},
			want: gangspec.Spec{MinAvailable: 2, Source: "Volcano PodGroup team-a/tf (scheduling.volcano.sh/v1beta1)", Queue: volcanoRef("team-a")}},
		{name: "Volcano 1.12's network topology, hard by default", api: Volcano,
			spec: map[string]any{"minMember": int64(4), "networkTopology": map[string]any{"highestTierAllowed": int64(2)}},
			want: gangspec.Spec{MinAvailable: 4, Source: "Volcano PodGroup team-a/tf (scheduling.volcano.sh/v1beta1)", Queue: volcanoRef(""),
				Topology: gangspec.Topology{Tier: 2, Required: true, Source: "spec.networkTopology of Volcano PodGroup team-a/tf"}}},
		{name: "Volcano's soft network topology by tier name", api: Volcano,
			spec: map[string]any{"minMember": int64(4), "networkTopology": map[string]any{"mode": "soft", "highestTierName": "rack"}},
			want: gangspec.Spec{MinAvailable: 4, Source: "Volcano PodGroup team-a/tf (scheduling.volcano.sh/v1beta1)", Queue: volcanoRef(""),
				Topology: gangspec.Topology{Key: "rack", Source: "spec.networkTopology of Volcano PodGroup team-a/tf"}}},
		{name: "kube-batch v1alpha1, without spec.queue: --default-queue", api: KubeBatch, spec: map[string]any{"minMember": int64(3)},
			want: gangspec.Spec{MinAvailable: 3, Source: "kube-batch PodGroup team-a/tf (scheduling.incubator.k8s.io/v1alpha1)",
				Queue: quota.Ref{Kind: KindKubeBatchQueue, Fallback: quota.DefaultName}}},
		{name: "kube-batch v1alpha2 with its queue", api: KubeBatchV1alpha2, spec: map[string]any{"minMember": float64(3), "queue": "research"},
			want: gangspec.Spec{MinAvailable: 3, Source: "kube-batch PodGroup team-a/tf (scheduling.sigs.dev/v1alpha2)",
				Queue: quota.Ref{Kind: KindKubeBatchQueue, Name: "research", Fallback: quota.DefaultName}}},
		{name: "Koordinator, with its gang annotations on the object", api: Koordinator,
			spec: map[string]any{"minMember": int64(2), "scheduleTimeoutSeconds": int64(30)},
			ann:  map[string]string{wellknown.AnnotationGangGroups: `["team-a/tf","team-a/ps"]`, wellknown.AnnotationGangMode: "NonStrict", wellknown.AnnotationGangTotalNumber: "3"},
			want: gangspec.Spec{MinAvailable: 2, TotalNumber: 3, WaitingTime: 30 * time.Second, Bundle: []string{"team-a/ps", "team-a/tf"},
				Mode: "NonStrict", Policy: gangspec.OnceSatisfied, Source: "Koordinator PodGroup team-a/tf (scheduling.sigs.k8s.io/v1alpha1)"}},
		{name: "Koordinator's network-topology-spec on the object", api: Koordinator,
			spec: map[string]any{"minMember": int64(2)},
			ann:  map[string]string{wellknown.AnnotationGangNetworkTopologySpec: `{"gatherStrategy":[{"layer":"BlockLayer","strategy":"MustGather"}]}`},
			want: gangspec.Spec{MinAvailable: 2, Policy: gangspec.OnceSatisfied, Source: "Koordinator PodGroup team-a/tf (scheduling.sigs.k8s.io/v1alpha1)",
				Topology: gangspec.Topology{Layers: []string{"BlockLayer"}, Required: true,
					Source: "annotation " + wellknown.AnnotationGangNetworkTopologySpec + " of Koordinator PodGroup team-a/tf"}}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			got, err := tc.api.Parse(group(tc.api, tc.spec, tc.ann))
			require.NoError(t, err)
			tc.want.Namespace, tc.want.Name = "team-a", "tf"
			object, _, _ := strings.Cut(tc.want.Source, " (")
			tc.want.QuorumFrom = "spec.minMember of " + object
			require.Equal(t, &tc.want, got)
		})
	}
}

func TestParseGroupErrors(t *testing.T) {
	tests := []struct {
		name      string
		api       API
		spec      map[string]any
		ann       map[string]string
		wantField string
		wantValue string
	}{
		{name: "minMember negative", api: Coscheduling, spec: map[string]any{"minMember": int64(-2)}, wantField: "spec.minMember", wantValue: "-2"},
		{name: "minMember missing", api: KubeBatch, spec: map[string]any{}, wantField: "spec.minMember"},
		{name: "minMember a string", api: Volcano, spec: map[string]any{"minMember": "four"}, wantField: "spec.minMember", wantValue: "four"},
		{name: "minMember a fraction", api: Volcano, spec: map[string]any{"minMember": 2.5}, wantField: "spec.minMember", wantValue: "2.5"},
		{name: "timeout negative", api: Coscheduling, spec: map[string]any{"minMember": int64(2), "scheduleTimeoutSeconds": int64(-1)}, wantField: "spec.scheduleTimeoutSeconds", wantValue: "-1"},
		{name: "network topology mode", api: Volcano, spec: map[string]any{"minMember": int64(2), "networkTopology": map[string]any{"mode": "strict", "highestTierAllowed": int64(1)}},
			wantField: "spec.networkTopology.mode", wantValue: "strict"},
		{name: "network topology tier zero", api: Volcano, spec: map[string]any{"minMember": int64(2), "networkTopology": map[string]any{"highestTierAllowed": int64(0)}},
			wantField: "spec.networkTopology.highestTierAllowed", wantValue: "0"},
		{name: "network topology both tier forms", api: Volcano, spec: map[string]any{"minMember": int64(2), "networkTopology": map[string]any{"highestTierAllowed": int64(1), "highestTierName": "rack"}},
			wantField: "spec.networkTopology", wantValue: "map[highestTierAllowed:1 highestTierName:rack]"},
		{name: "queue not a name", api: Volcano, spec: map[string]any{"minMember": int64(2), "queue": int64(3)}, wantField: "spec.queue", wantValue: "3"},
		{name: "kube-batch queue not a name", api: KubeBatch, spec: map[string]any{"minMember": int64(2), "queue": []any{"a"}}, wantField: "spec.queue", wantValue: "[a]"},
		{name: "task quorum negative", api: Volcano, spec: map[string]any{"minMember": int64(2), "minTaskMember": map[string]any{"worker": int64(-1)}}, wantField: "spec.minTaskMember.worker", wantValue: "-1"},
		{name: "Koordinator mode on the object", api: Koordinator, spec: map[string]any{"minMember": int64(2)},
			ann: map[string]string{wellknown.AnnotationGangMode: "Soft"}, wantField: "annotation " + wellknown.AnnotationGangMode, wantValue: "Soft"},
		{name: "Koordinator network topology on the object", api: Koordinator, spec: map[string]any{"minMember": int64(2)},
			ann:       map[string]string{wellknown.AnnotationGangNetworkTopologySpec: `{"gatherStrategy":"BlockLayer"}`},
			wantField: "annotation " + wellknown.AnnotationGangNetworkTopologySpec, wantValue: `{"gatherStrategy":"BlockLayer"}`},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			_, err := tc.api.Parse(group(tc.api, tc.spec, tc.ann))
			var fieldErr *gangspec.FieldError
			require.True(t, errors.As(err, &fieldErr), "want *FieldError, got %T: %v", err, err)
			require.Equal(t, tc.api.Dialect+" PodGroup team-a/tf", fieldErr.Object)
			require.Equal(t, tc.wantField, fieldErr.Field)
			require.Equal(t, tc.wantValue, fieldErr.Value)
		})
	}
}

// Volcano and kube-batch pods share one annotation: the object that exists decides, and two
// objects of one name are refused naming both.
func TestChoose(t *testing.T) {
	volcano := &gangspec.Spec{MinAvailable: 2}
	spec, err := Choose(nil)
	require.NoError(t, err)
	require.Nil(t, spec)

	spec, err = Choose([]Found{{API: Volcano, Namespace: "team-a", Name: "tf", Spec: volcano}})
	require.NoError(t, err)
	require.Same(t, volcano, spec)

	_, err = Choose([]Found{{API: Volcano, Namespace: "team-a", Name: "tf", Spec: volcano}, {API: KubeBatch, Namespace: "team-a", Name: "tf", Spec: volcano}})
	require.ErrorContains(t, err, "Volcano PodGroup team-a/tf (scheduling.volcano.sh/v1beta1) and kube-batch PodGroup team-a/tf (scheduling.incubator.k8s.io/v1alpha1)")
}
