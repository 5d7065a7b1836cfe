package dialect

import (
	"errors"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/lockstep-sched/lockstep/gangspec"
	"github.com/lockstep-sched/lockstep/quota"
	"github.com/lockstep-sched/lockstep/test/lib/builders"
	"github.com/lockstep-sched/lockstep/wellknown"
)

const kaiSource = "KAI Scheduler PodGroup team-a/tf (scheduling.run.ai/v2alpha2)"

func kaiQueueRef(name string) quota.Ref { return quota.Ref{Kind: KindKAIQueue, Name: name} }

// subGroup is one entry of a KAI PodGroup's spec.subGroups; "" parent is none.
func subGroup(name, parent string, fields map[string]any) map[string]any {
	m := map[string]any{"name": name}
	if parent != "" {
		m["parent"] = parent
	}
	for k, v := range fields {
		m[k] = v
	}
	return m
}

func members(n int64) map[string]any { return map[string]any{"minMember": n} }

func TestParseKAIGroup(t *testing.T) {
	rack := func(required bool) gangspec.Topology {
		return gangspec.Topology{Key: "cloud.example.com/rack", Required: required, Source: "spec.topologyConstraint of KAI Scheduler PodGroup team-a/tf"}
	}
	tests := []struct {
		name string
		spec map[string]any
		want gangspec.Spec
	}{
		{name: "as the podgrouper writes a PyTorchJob's: minMember and the queue",
			spec: map[string]any{"minMember": int64(4), "queue": "team-a", "priorityClassName": "train", "preemptibility": "preemptible"},
			want: gangspec.Spec{MinAvailable: 4, Queue: kaiQueueRef("team-a")}},
		{name: "minMember absent: KAI's default pod set asks for 1", spec: map[string]any{"queue": "default-queue"},
			want: gangspec.Spec{MinAvailable: 1, Queue: kaiQueueRef("default-queue")}},
		{name: "minMember 0: elastic, each member on its own", spec: map[string]any{"minMember": int64(0)},
			want: gangspec.Spec{MinAvailable: 1}},
		{name: "an empty queue leaves the members' label to decide", spec: map[string]any{"minMember": int64(2), "queue": ""},
			want: gangspec.Spec{MinAvailable: 2}},
		{name: "non-preemptible is checked, and no lockstep rule keeps it", spec: map[string]any{"minMember": int64(2), "preemptibility": "non-preemptible"},
			want: gangspec.Spec{MinAvailable: 2}},
		{name: "required topology level: the tier of that node label key",
			spec: map[string]any{"minMember": int64(8), "topologyConstraint": map[string]any{"topology": "cluster-topology", "requiredTopologyLevel": "cloud.example.com/rack"}},
			want: gangspec.Spec{MinAvailable: 8, Topology: rack(true)}},
		{name: "preferred topology level alone: a preference",
			spec: map[string]any{"minMember": int64(8), "topologyConstraint": map[string]any{"topology": "cluster-topology", "preferredTopologyLevel": "cloud.example.com/rack"}},
			want: gangspec.Spec{MinAvailable: 8, Topology: rack(false)}},
		{name: "both levels: the required one holds",
			spec: map[string]any{"minMember": int64(8), "topologyConstraint": map[string]any{"topology": "cluster-topology",
				"requiredTopologyLevel": "cloud.example.com/rack", "preferredTopologyLevel": "kubernetes.io/hostname"}},
			want: gangspec.Spec{MinAvailable: 8, Topology: rack(true)}},
		{name: "levels without a Topology: KAI applies none",
			spec: map[string]any{"minMember": int64(8), "topologyConstraint": map[string]any{"requiredTopologyLevel": "cloud.example.com/rack"}},
			want: gangspec.Spec{MinAvailable: 8}},
		{name: "flat subgroups: each its own quorum, the gang their sum; minMember beside them is not KAI's rule",
			spec: map[string]any{"minMember": int64(9), "subGroups": []any{subGroup("leader", "", members(1)), subGroup("workers", "", members(4))}},
			want: gangspec.Spec{MinAvailable: 5, MinPerTask: map[string]int{"leader": 1, "workers": 4}}},
		{name: "a subgroup of minMember 0 asks nothing",
			spec: map[string]any{"subGroups": []any{subGroup("leader", "", members(1)), subGroup("spares", "", members(0))}},
			want: gangspec.Spec{MinAvailable: 1, MinPerTask: map[string]int{"leader": 1}}},
		{name: "nested subgroups flatten to the pod sets; a parent's minMember is ignored, as KAI does",
			spec: map[string]any{"subGroups": []any{
				subGroup("replica-0", "", members(99)),
				subGroup("prefill-0", "replica-0", members(2)), subGroup("decode-0", "replica-0", members(3)),
				subGroup("router", "", members(1))}},
			want: gangspec.Spec{MinAvailable: 6, MinPerTask: map[string]int{"prefill-0": 2, "decode-0": 3, "router": 1}}},
		{name: "minSubGroup equal to the children: all of them",
			spec: map[string]any{"minSubGroup": int64(2), "subGroups": []any{
				subGroup("replica", "", map[string]any{"minSubGroup": int64(1)}), subGroup("worker", "replica", members(2)),
				subGroup("router", "", members(1))}},
			want: gangspec.Spec{MinAvailable: 3, MinPerTask: map[string]int{"worker": 2, "router": 1}}},
		{name: "minSubGroup 0: that subtree is elastic",
			spec: map[string]any{"subGroups": []any{
				subGroup("batch", "", map[string]any{"minSubGroup": int64(0)}), subGroup("a", "batch", members(2)), subGroup("b", "batch", members(2)),
				subGroup("driver", "", members(1))}},
			want: gangspec.Spec{MinAvailable: 1, MinPerTask: map[string]int{"driver": 1}}},
		{name: "spec.minSubGroup 0: the whole group is elastic",
			spec: map[string]any{"minSubGroup": int64(0), "subGroups": []any{subGroup("a", "", members(2))}},
			want: gangspec.Spec{MinAvailable: 1}},
		{name: "a subgroup's required level the gang requires too holds already",
			spec: map[string]any{"topologyConstraint": map[string]any{"topology": "t", "requiredTopologyLevel": "cloud.example.com/rack"},
				"subGroups": []any{subGroup("w", "", map[string]any{"minMember": int64(2),
					"topologyConstraint": map[string]any{"topology": "t", "requiredTopologyLevel": "cloud.example.com/rack"}})}},
			want: gangspec.Spec{MinAvailable: 2, MinPerTask: map[string]int{"w": 2}, Topology: rack(true)}},
		{name: "a subgroup's preference is not read",
			spec: map[string]any{"subGroups": []any{subGroup("w", "", map[string]any{"minMember": int64(2),
				"topologyConstraint": map[string]any{"topology": "t", "preferredTopologyLevel": "cloud.example.com/rack"}})}},
			want: gangspec.Spec{MinAvailable: 2, MinPerTask: map[string]int{"w": 2}}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			got, err := KAI.Parse(group(KAI, tc.spec, nil))
			require.NoError(t, err)
			tc.want.Namespace, tc.want.Name, tc.want.Source = "team-a", "tf", kaiSource
			tc.want.QuorumFrom = "spec.minMember of KAI Scheduler PodGroup team-a/tf"
			if tc.want.MinPerTask != nil {
				tc.want.QuorumFrom = "the minMember of spec.subGroups of KAI Scheduler PodGroup team-a/tf"
			}
			require.Equal(t, &tc.want, got)
		})
	}
}

func TestParseKAIGroupErrors(t *testing.T) {
	tests := []struct {
		name      string
		spec      map[string]any
		wantField string
		wantValue string
		wantIn    string
	}{
		{name: "minMember negative", spec: map[string]any{"minMember": int64(-1)}, wantField: "spec.minMember", wantValue: "-1"},
		{name: "minMember not a number", spec: map[string]any{"minMember": "four"}, wantField: "spec.minMember", wantValue: "four"},
		{name: "minMember beyond int32", spec: map[string]any{"minMember": int64(1) << 31}, wantField: "spec.minMember", wantValue: "2147483648"},
		{name: "minMember and minSubGroup", spec: map[string]any{"minMember": int64(2), "minSubGroup": int64(1), "subGroups": []any{subGroup("a", "", members(1))}},
			wantField: "spec.minSubGroup", wantValue: "1", wantIn: "mutually exclusive"},
		{name: "minSubGroup without subgroups", spec: map[string]any{"minSubGroup": int64(1)}, wantField: "spec.minSubGroup", wantValue: "1"},
		{name: "queue not a name", spec: map[string]any{"queue": int64(3)}, wantField: "spec.queue", wantValue: "3"},
		{name: "preemptibility unknown", spec: map[string]any{"preemptibility": "never"}, wantField: "spec.preemptibility", wantValue: "never"},
		{name: "topology without a level", spec: map[string]any{"topologyConstraint": map[string]any{"topology": "t"}},
			wantField: "spec.topologyConstraint", wantValue: "map[topology:t]", wantIn: "no level"},
		{name: "topology level not a string", spec: map[string]any{"topologyConstraint": map[string]any{"topology": "t", "requiredTopologyLevel": int64(2)}},
			wantField: "spec.topologyConstraint.requiredTopologyLevel", wantValue: "2"},
		{name: "topologyConstraint not an object", spec: map[string]any{"topologyConstraint": "rack"}, wantField: "spec.topologyConstraint", wantValue: "rack"},
		{name: "subGroups not a list", spec: map[string]any{"subGroups": "a"}, wantField: "spec.subGroups", wantValue: "a"},
		{name: "subgroup without a name", spec: map[string]any{"subGroups": []any{map[string]any{"minMember": int64(1)}}},
			wantField: "spec.subGroups[0].name", wantValue: ""},
		{name: "subgroup names twice", spec: map[string]any{"subGroups": []any{subGroup("a", "", members(1)), subGroup("a", "", members(2))}},
			wantField: "spec.subGroups[1].name", wantValue: "a", wantIn: "unique"},
		{name: "subgroup minMember negative", spec: map[string]any{"subGroups": []any{subGroup("a", "", members(-2))}},
			wantField: "spec.subGroups[0].minMember", wantValue: "-2"},
		{name: "subgroup minMember not a number", spec: map[string]any{"subGroups": []any{subGroup("a", "", map[string]any{"minMember": "two"})}},
			wantField: "spec.subGroups[0].minMember", wantValue: "two"},
		{name: "pod set without minMember", spec: map[string]any{"subGroups": []any{subGroup("a", "", nil)}},
			wantField: "spec.subGroups[0].minMember", wantValue: "", wantIn: "missing"},
		{name: "pod set with minSubGroup", spec: map[string]any{"subGroups": []any{subGroup("a", "", map[string]any{"minSubGroup": int64(1)})}},
			wantField: "spec.subGroups[0].minSubGroup", wantValue: "1"},
		{name: "subgroup with minMember and minSubGroup", spec: map[string]any{"subGroups": []any{subGroup("a", "", map[string]any{"minMember": int64(1), "minSubGroup": int64(1)})}},
			wantField: "spec.subGroups[0].minSubGroup", wantValue: "1", wantIn: "mutually exclusive"},
		{name: "parent that does not exist", spec: map[string]any{"subGroups": []any{subGroup("a", "ghost", members(1))}},
			wantField: "spec.subGroups[0].parent", wantValue: "ghost", wantIn: "names no subgroup"},
		{name: "parent not a name", spec: map[string]any{"subGroups": []any{subGroup("a", "", map[string]any{"minMember": int64(1), "parent": int64(1)})}},
			wantField: "spec.subGroups[0].parent", wantValue: "1"},
		{name: "a cycle of parents", spec: map[string]any{"subGroups": []any{subGroup("a", "b", members(1)), subGroup("b", "a", members(1)), subGroup("c", "", members(1))}},
			wantField: "spec.subGroups[0].parent", wantValue: "b", wantIn: "a -> b -> a"},
		{name: "its own parent", spec: map[string]any{"subGroups": []any{subGroup("a", "a", members(1))}},
			wantField: "spec.subGroups[0].parent", wantValue: "a", wantIn: "cycle"},
		{name: "some of the subgroups, any of them", spec: map[string]any{"minSubGroup": int64(1), "subGroups": []any{subGroup("a", "", members(1)), subGroup("b", "", members(1))}},
			wantField: "spec.minSubGroup", wantValue: "1", wantIn: "1 of its 2"},
		{name: "some of a subgroup's children", spec: map[string]any{"subGroups": []any{subGroup("r", "", map[string]any{"minSubGroup": int64(1)}),
			subGroup("a", "r", members(1)), subGroup("b", "r", members(1))}},
			wantField: "spec.subGroups[0].minSubGroup", wantValue: "1", wantIn: "1 of its 2"},
		{name: "more subgroups than there are", spec: map[string]any{"minSubGroup": int64(3), "subGroups": []any{subGroup("a", "", members(1))}},
			wantField: "spec.minSubGroup", wantValue: "3", wantIn: "never be placed"},
		{name: "a subgroup's own required level", spec: map[string]any{"subGroups": []any{subGroup("w", "", map[string]any{"minMember": int64(2),
			"topologyConstraint": map[string]any{"topology": "t", "requiredTopologyLevel": "cloud.example.com/rack"}})}},
			wantField: "spec.subGroups[0].topologyConstraint.requiredTopologyLevel", wantValue: "cloud.example.com/rack"},
		{name: "a subgroup's required level of another Topology", spec: map[string]any{
			"topologyConstraint": map[string]any{"topology": "t", "requiredTopologyLevel": "rack"},
			"subGroups": []any{subGroup("w", "", map[string]any{"minMember": int64(2),
				"topologyConstraint": map[string]any{"topology": "other", "requiredTopologyLevel": "rack"}})}},
			wantField: "spec.subGroups[0].topologyConstraint.requiredTopologyLevel", wantValue: "rack"},
		{name: "a subgroup's topology without a level", spec: map[string]any{"subGroups": []any{subGroup("w", "", map[string]any{"minMember": int64(2),
			"topologyConstraint": map[string]any{"topology": "t"}})}},
			wantField: "spec.subGroups[0].topologyConstraint", wantValue: "map[topology:t]"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			_, err := KAI.Parse(group(KAI, tc.spec, nil))
			var fieldErr *gangspec.FieldError
			require.True(t, errors.As(err, &fieldErr), "want *FieldError, got %T: %v", err, err)
			require.Equal(t, "KAI Scheduler PodGroup team-a/tf", fieldErr.Object)
			require.Equal(t, tc.wantField, fieldErr.Field)
			require.Equal(t, tc.wantValue, fieldErr.Value)
			require.NotEmpty(t, fieldErr.Reason)
			require.Contains(t, fieldErr.Reason, tc.wantIn)
		})
	}
}

func TestKAIPodMarkers(t *testing.T) {
	pod := func() *builders.PodBuilder {
		return builders.Pod("team-a", "w-0").GPU(1).SchedulerName("kai-scheduler")
	}
	tests := []struct {
		name string
		pod  *builders.PodBuilder
		want gangspec.Membership
	}{
		{name: "the podgrouper's annotation names the PodGroup",
			pod:  pod().Annotation(wellknown.AnnotationKAIPodGroup, "pg-tf-1a2b"),
			want: gangspec.Membership{Gang: "pg-tf-1a2b", Group: "KAI Scheduler PodGroup team-a/pg-tf-1a2b"}},
		{name: "the subgroup label is the member's task",
			pod:  pod().Annotation(wellknown.AnnotationKAIPodGroup, "lws").Label(wellknown.LabelKAISubGroup, "leader"),
			want: gangspec.Membership{Gang: "lws", Task: "leader", Group: "KAI Scheduler PodGroup team-a/lws"}},
		{name: "the queue label, on a member",
			pod:  pod().Annotation(wellknown.AnnotationKAIPodGroup, "tf").Label(wellknown.LabelKAIQueue, "research"),
			want: gangspec.Membership{Gang: "tf", Group: "KAI Scheduler PodGroup team-a/tf", Queue: kaiQueueRef("research")}},
		{name: "the queue label on an ordinary pod", pod: pod().Label(wellknown.LabelKAIQueue, "research"),
			want: gangspec.Membership{Queue: kaiQueueRef("research")}},
		{name: "the label before KAI v0.6", pod: pod().Label(wellknown.LabelKAIQueueLegacy, "old"),
			want: gangspec.Membership{Queue: kaiQueueRef("old")}},
		{name: "the current label wins over the old", pod: pod().Label(wellknown.LabelKAIQueue, "new").Label(wellknown.LabelKAIQueueLegacy, "old"),
			want: gangspec.Membership{Queue: kaiQueueRef("new")}},
		{name: "Koordinator's quota label comes before KAI's", pod: pod().Label(wellknown.LabelKAIQueue, "kai").Label(wellknown.LabelKoordinatorQuotaName, "koord"),
			want: gangspec.Membership{Queue: quota.Ref{Kind: KindKoordinatorElasticQuota, Name: "koord"}}},
		{name: "an empty queue label names none", pod: pod().Label(wellknown.LabelKAIQueue, "")},
		{name: "a subgroup label alone makes no gang", pod: pod().Label(wellknown.LabelKAISubGroup, "leader")},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			require.Equal(t, tc.want, read(tc.pod))
		})
	}
}

func TestKAIPodMarkerErrors(t *testing.T) {
	pod := builders.Pod("team-a", "w-0")
	ms := read(pod.Clone().Annotation(wellknown.AnnotationKAIPodGroup, ""))
	require.ErrorContains(t, ms.Err, `pod team-a/w-0: annotation pod-group-name="": the group name must not be empty`)

	ms = read(pod.Clone().Annotation(wellknown.AnnotationKAIPodGroup, "tf").Annotation(wellknown.AnnotationGroupName, "tf"))
	require.Error(t, ms.Err)
	require.Contains(t, ms.Err.Error(), `annotation scheduling.k8s.io/group-name="tf"`)
	require.Contains(t, ms.Err.Error(), `annotation pod-group-name="tf"`)
}
