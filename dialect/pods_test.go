package dialect

import (
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/lockstep-sched/lockstep/gangspec"
	"github.com/lockstep-sched/lockstep/quota"
	"github.com/lockstep-sched/lockstep/test/lib/builders"
	"github.com/lockstep-sched/lockstep/wellknown"
)

func read(b *builders.PodBuilder) gangspec.Membership {
	pod := b.Obj()
	return Pods{}.Read(pod)
}

func TestKoordinatorAnnotations(t *testing.T) {
	pod := func() *builders.PodBuilder { return builders.Pod("team-a", "w-0").GPU(1) }
	koord := func(s gangspec.Spec) *gangspec.Spec {
		s.Namespace, s.Name, s.Source = "team-a", "mpi", "Koordinator annotations"
		s.QuorumFrom = "annotation " + wellknown.AnnotationGangMinAvailable + " of the members"
		if s.Policy == "" {
			s.Policy = gangspec.OnceSatisfied
		}
		return &s
	}
	tests := []struct {
		name    string
		pod     *builders.PodBuilder
		want    *gangspec.Spec
		wantKey string // the annotation a refusal names; "" means no error
		wantVal string
	}{
		{name: "every annotation",
			pod: pod().Gang("mpi", 5).WaitingTime("30s").TotalNumber(6).Annotation(wellknown.AnnotationGangMode, "NonStrict").
				Annotation(wellknown.AnnotationGangMatchPolicy, "only-waiting"),
			want: koord(gangspec.Spec{MinAvailable: 5, TotalNumber: 6, WaitingTime: 30 * time.Second, Mode: "NonStrict", Policy: gangspec.OnlyWaiting})},
		{name: "name and min-available only", pod: pod().Gang("mpi", 1), want: koord(gangspec.Spec{MinAvailable: 1})},
		{name: "once-satisfied is the default, spelled or not",
			pod:  pod().Gang("mpi", 2).Annotation(wellknown.AnnotationGangMatchPolicy, "once-satisfied"),
			want: koord(gangspec.Spec{MinAvailable: 2})},
		{name: "waiting-and-running",
			pod:  pod().Gang("mpi", 2).Annotation(wellknown.AnnotationGangMatchPolicy, "waiting-and-running"),
			want: &gangspec.Spec{Namespace: "team-a", Name: "mpi", Source: "Koordinator annotations", MinAvailable: 2, QuorumFrom: "annotation gang.scheduling.koordinator.sh/min-available of the members"}},
		{name: "a gang group lists itself and its mates, sorted",
			pod:  pod().Gang("mpi", 2).Annotation(wellknown.AnnotationGangGroups, `["team-a/ps","team-a/mpi"]`),
			want: koord(gangspec.Spec{MinAvailable: 2, Bundle: []string{"team-a/mpi", "team-a/ps"}})},
		{name: "a gang group of itself alone is no group",
			pod:  pod().Gang("mpi", 2).Annotation(wellknown.AnnotationGangGroups, `["team-a/mpi"]`),
			want: koord(gangspec.Spec{MinAvailable: 2})},
		{name: "Koordinator's network topology: MustGather layers make it required",
			pod: pod().Gang("mpi", 2).Annotation(wellknown.AnnotationGangNetworkTopologySpec,
				`{"gatherStrategy":[{"layer":"SpineLayer","strategy":"MustGather"},{"layer":"BlockLayer","strategy":"MustGather"},{"layer":"RackLayer","strategy":"PreferGather"}]}`),
			want: koord(gangspec.Spec{MinAvailable: 2, Topology: gangspec.Topology{Layers: []string{"SpineLayer", "BlockLayer"}, Required: true,
				Source: "annotation " + wellknown.AnnotationGangNetworkTopologySpec + " of pod team-a/w-0"}})},
		{name: "Koordinator's network topology: PreferGather alone prefers; the cluster layer asks nothing",
			pod: pod().Gang("mpi", 2).Annotation(wellknown.AnnotationGangNetworkTopologySpec,
				`{"gatherStrategy":[{"layer":"BlockLayer","strategy":"PreferGather"},{"layer":"ClusterTopologyLayer","strategy":"MustGather"}]}`),
			want: koord(gangspec.Spec{MinAvailable: 2, Topology: gangspec.Topology{Layers: []string{"BlockLayer"},
				Source: "annotation " + wellknown.AnnotationGangNetworkTopologySpec + " of pod team-a/w-0"}})},
		{name: "network topology not JSON", pod: pod().Gang("mpi", 2).Annotation(wellknown.AnnotationGangNetworkTopologySpec, "BlockLayer"),
			wantKey: wellknown.AnnotationGangNetworkTopologySpec, wantVal: "BlockLayer"},
		{name: "network topology strategy unknown", pod: pod().Gang("mpi", 2).Annotation(wellknown.AnnotationGangNetworkTopologySpec, `{"gatherStrategy":[{"layer":"BlockLayer","strategy":"Gather"}]}`),
			wantKey: wellknown.AnnotationGangNetworkTopologySpec, wantVal: `{"gatherStrategy":[{"layer":"BlockLayer","strategy":"Gather"}]}`},
		{name: "network topology layer missing", pod: pod().Gang("mpi", 2).Annotation(wellknown.AnnotationGangNetworkTopologySpec, `{"gatherStrategy":[{"strategy":"MustGather"}]}`),
			wantKey: wellknown.AnnotationGangNetworkTopologySpec, wantVal: `{"gatherStrategy":[{"strategy":"MustGather"}]}`},
		{name: "missing min-available", pod: pod().GangName("mpi"), wantKey: wellknown.AnnotationGangMinAvailable},
		{name: "min-available zero", pod: pod().GangName("mpi").MinAvailable("0"), wantKey: wellknown.AnnotationGangMinAvailable, wantVal: "0"},
		{name: "min-available negative", pod: pod().GangName("mpi").MinAvailable("-1"), wantKey: wellknown.AnnotationGangMinAvailable, wantVal: "-1"},
		{name: "min-available not a number", pod: pod().GangName("mpi").MinAvailable("abc"), wantKey: wellknown.AnnotationGangMinAvailable, wantVal: "abc"},
		{name: "waiting-time not a duration", pod: pod().Gang("mpi", 2).WaitingTime("soon"), wantKey: wellknown.AnnotationGangWaitingTime, wantVal: "soon"},
		{name: "waiting-time negative", pod: pod().Gang("mpi", 2).WaitingTime("-5s"), wantKey: wellknown.AnnotationGangWaitingTime, wantVal: "-5s"},
		{name: "waiting-time zero", pod: pod().Gang("mpi", 2).WaitingTime("0s"), wantKey: wellknown.AnnotationGangWaitingTime, wantVal: "0s"},
		{name: "total-number below min-available", pod: pod().Gang("mpi", 5).TotalNumber(3), wantKey: wellknown.AnnotationGangTotalNumber, wantVal: "3"},
		{name: "total-number not a number", pod: pod().Gang("mpi", 5).Annotation(wellknown.AnnotationGangTotalNumber, "many"), wantKey: wellknown.AnnotationGangTotalNumber, wantVal: "many"},
		{name: "empty gang name", pod: pod().GangName("").MinAvailable("2"), wantKey: wellknown.AnnotationGangName},
		{name: "unknown mode", pod: pod().Gang("mpi", 2).Annotation(wellknown.AnnotationGangMode, "Lenient"), wantKey: wellknown.AnnotationGangMode, wantVal: "Lenient"},
		{name: "unknown match policy", pod: pod().Gang("mpi", 2).Annotation(wellknown.AnnotationGangMatchPolicy, "any"), wantKey: wellknown.AnnotationGangMatchPolicy, wantVal: "any"},
		{name: "gang group not JSON", pod: pod().Gang("mpi", 2).Annotation(wellknown.AnnotationGangGroups, "a,b"), wantKey: wellknown.AnnotationGangGroups, wantVal: "a,b"},
		{name: "gang group entry without namespace", pod: pod().Gang("mpi", 2).Annotation(wellknown.AnnotationGangGroups, `["ps"]`), wantKey: wellknown.AnnotationGangGroups, wantVal: `["ps"]`},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			ms := read(tc.pod)
			if tc.wantKey == "" {
				require.NoError(t, ms.Err)
				require.Equal(t, tc.want, ms.Spec)
				require.Equal(t, "mpi", ms.Gang)
				return
			}
			require.Nil(t, ms.Spec)
			var fieldErr *gangspec.FieldError
			require.True(t, errors.As(ms.Err, &fieldErr), "want *FieldError, got %T: %v", ms.Err, ms.Err)
			require.Equal(t, "pod team-a/w-0", fieldErr.Object)
			require.Equal(t, "annotation "+tc.wantKey, fieldErr.Field)
			require.Equal(t, tc.wantVal, fieldErr.Value)
			require.NotEmpty(t, fieldErr.Reason)
		})
	}
}

// Each dialect's markers, as its ecosystem writes them on pods.
func TestPodMarkers(t *testing.T) {
	pod := func() *builders.PodBuilder { return builders.Pod("team-a", "w-0").GPU(1) }
	tests := []struct {
		name string
		pod  *builders.PodBuilder
		want gangspec.Membership
	}{
		{name: "ordinary pod", pod: pod()},
		{name: "scheduler-plugins PodGroup label",
			pod:  pod().Label(wellknown.LabelCoschedulingPodGroup, "tf"),
			want: gangspec.Membership{Gang: "tf", Group: "scheduler-plugins PodGroup team-a/tf"}},
		{name: "Volcano or kube-batch annotation, with the Volcano task",
			pod:  pod().Annotation(wellknown.AnnotationGroupName, "tf").Annotation(wellknown.AnnotationVolcanoTask, "worker"),
			want: gangspec.Membership{Gang: "tf", Task: "worker", Group: "Volcano or kube-batch PodGroup team-a/tf"}},
		{name: "Koordinator PodGroup label",
			pod:  pod().Label(wellknown.LabelKoordinatorPodGroup, "tf"),
			want: gangspec.Membership{Gang: "tf", Group: "Koordinator PodGroup team-a/tf"}},
		{name: "Koordinator's PodGroup label wins over its annotations, as in koord-scheduler",
			pod:  pod().Label(wellknown.LabelKoordinatorPodGroup, "tf").Gang("other", 3),
			want: gangspec.Membership{Gang: "tf", Group: "Koordinator PodGroup team-a/tf"}},
		{name: "lightweight labels (Arena)",
			pod: pod().Label(wellknown.LabelLightweightGangName, "mpi").Label(wellknown.LabelLightweightMinAvailable, "4"),
			want: gangspec.Membership{Gang: "mpi", Spec: &gangspec.Spec{Namespace: "team-a", Name: "mpi", MinAvailable: 4,
				Source: "lightweight coscheduling labels (Arena)", QuorumFrom: "label " + wellknown.LabelLightweightMinAvailable + " of the members"}}},
		{name: "Kueue pod group: every member must be placed",
			pod: pod().Label(wellknown.LabelKueuePodGroup, "grp").Annotation(wellknown.AnnotationKueueTotalCount, "3"),
			want: gangspec.Membership{Gang: "grp", Spec: &gangspec.Spec{Namespace: "team-a", Name: "grp", MinAvailable: 3, TotalNumber: 3,
				Source: "Kueue pod group"}}},
		{name: "Koordinator quota label on an ordinary pod",
			pod:  pod().Label(wellknown.LabelKoordinatorQuotaName, "gpu-team"),
			want: gangspec.Membership{Queue: quota.Ref{Kind: KindKoordinatorElasticQuota, Name: "gpu-team"}}},
		{name: "Koordinator quota label on a gang member",
			pod:  pod().Label(wellknown.LabelKoordinatorPodGroup, "tf").Label(wellknown.LabelKoordinatorQuotaName, "gpu-team"),
			want: gangspec.Membership{Gang: "tf", Group: "Koordinator PodGroup team-a/tf", Queue: quota.Ref{Kind: KindKoordinatorElasticQuota, Name: "gpu-team"}}},
		{name: "an empty quota label names none", pod: pod().Label(wellknown.LabelKoordinatorQuotaName, "")},
		{name: "Kubernetes PodGroup, by spec.schedulingGroup.podGroupName",
			pod:  pod().PodGroup("train"),
			want: gangspec.Membership{Gang: "train", Group: "Kubernetes PodGroup team-a/train"}},
		{name: "a job Kueue admitted: its Workload",
			pod:  pod().Annotation(wellknown.AnnotationKueueWorkload, "job-train-3f2a1").Label("kueue.x-k8s.io/podset", "main"),
			want: gangspec.Membership{Gang: "job-train-3f2a1", Group: "Kueue Workload team-a/job-train-3f2a1"}},
		{name: "a job Kueue admitted that has a gang of its own keeps that gang",
			pod:  pod().Annotation(wellknown.AnnotationKueueWorkload, "mpijob-pi-9c1d0").Label(wellknown.LabelCoschedulingPodGroup, "pi"),
			want: gangspec.Membership{Gang: "pi", Group: "scheduler-plugins PodGroup team-a/pi"}},
		{name: "a Job's PodGroup (1.37's Job controller) yields to Volcano's annotation on its pods",
			pod:  pod().Annotation(wellknown.AnnotationGroupName, "tf").PodGroup("train-pgt-0"),
			want: gangspec.Membership{Gang: "tf", Group: "Volcano or kube-batch PodGroup team-a/tf"}},
		{name: "a Job's PodGroup yields to Koordinator's annotations on its pods",
			pod: pod().Gang("mpi", 2).PodGroup("mpi-pgt-0"),
			want: gangspec.Membership{Gang: "mpi", Spec: &gangspec.Spec{Namespace: "team-a", Name: "mpi", MinAvailable: 2,
				Policy: gangspec.OnceSatisfied, Source: "Koordinator annotations", QuorumFrom: "annotation gang.scheduling.koordinator.sh/min-available of the members"}}},
		{name: "a Job Kueue admitted keeps Kueue's Workload beside the Job controller's PodGroup",
			pod:  pod().Annotation(wellknown.AnnotationKueueWorkload, "job-train-3f2a1").PodGroup("train-pgt-0"),
			want: gangspec.Membership{Gang: "job-train-3f2a1", Group: "Kueue Workload team-a/job-train-3f2a1"}},
		{name: "a member that keeps its place beyond quorum",
			pod:  pod().Label(wellknown.LabelCoschedulingPodGroup, "tf").Annotation(wellknown.AnnotationKeepExtras, "true"),
			want: gangspec.Membership{Gang: "tf", Group: "scheduler-plugins PodGroup team-a/tf", KeepExtras: true}},
		{name: "keep-extras on an ordinary pod means nothing", pod: pod().Annotation(wellknown.AnnotationKeepExtras, "yes")},
		{name: "a Kueue pod group's own markers come before its Workload's",
			pod: pod().Label(wellknown.LabelKueuePodGroup, "grp").Annotation(wellknown.AnnotationKueueTotalCount, "2").
				Annotation(wellknown.AnnotationKueueWorkload, "grp-5b7e"),
			want: gangspec.Membership{Gang: "grp", Spec: &gangspec.Spec{Namespace: "team-a", Name: "grp", MinAvailable: 2, TotalNumber: 2,
				Source: "Kueue pod group"}}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			require.Equal(t, tc.want, read(tc.pod))
		})
	}
}

// A keep-extras value lockstep cannot read refuses the member, naming the value: a typo that let
// it be evicted unawares would be found only when it was.
func TestKeepExtrasMustBeABool(t *testing.T) {
	for _, v := range []string{"yes", "True", "1", ""} {
		ms := read(builders.Pod("team-a", "w-0").Gang("tf", 2).Annotation(wellknown.AnnotationKeepExtras, v))
		require.Error(t, ms.Err, "value %q", v)
		require.Contains(t, ms.Err.Error(), fmt.Sprintf(`annotation lockstep.dev/keep-extras=%q`, v))
		require.Contains(t, ms.Err.Error(), `must be "true" or "false"`)
	}
	require.False(t, read(builders.Pod("team-a", "w-0").Gang("tf", 2).Annotation(wellknown.AnnotationKeepExtras, "false")).KeepExtras)
}

// Markers that cannot be used refuse the pod with a message naming it, the key and the value,
// and keep the gang name so the pod is listed beside its mates.
func TestPodMarkerErrors(t *testing.T) {
	pod := func() *builders.PodBuilder { return builders.Pod("team-a", "w-0").GPU(1) }
	tests := []struct {
		name     string
		pod      *builders.PodBuilder
		wantGang string
		wantIn   []string
	}{
		{name: "two ecosystems' markers",
			pod:      pod().Label(wellknown.LabelCoschedulingPodGroup, "tf").Annotation(wellknown.AnnotationGroupName, "tf"),
			wantGang: "tf",
			wantIn:   []string{"pod team-a/w-0", `label scheduling.x-k8s.io/pod-group="tf"`, `annotation scheduling.k8s.io/group-name="tf"`}},
		{name: "Kueue beside Koordinator",
			pod:      pod().Gang("mpi", 2).Label(wellknown.LabelKueuePodGroup, "grp").Annotation(wellknown.AnnotationKueueTotalCount, "2"),
			wantGang: "mpi",
			wantIn:   []string{`annotation gang.scheduling.koordinator.sh/name="mpi"`, `label kueue.x-k8s.io/pod-group-name="grp"`}},
		{name: "Kueue total count not a number",
			pod:      pod().Label(wellknown.LabelKueuePodGroup, "grp").Annotation(wellknown.AnnotationKueueTotalCount, "all"),
			wantGang: "grp",
			wantIn:   []string{"pod team-a/w-0", `annotation kueue.x-k8s.io/pod-group-total-count="all"`, "positive integer"}},
		{name: "Kueue total count missing",
			pod:      pod().Label(wellknown.LabelKueuePodGroup, "grp"),
			wantGang: "grp",
			wantIn:   []string{"kueue.x-k8s.io/pod-group-total-count", "missing"}},
		{name: "lightweight min-available zero",
			pod:      pod().Label(wellknown.LabelLightweightGangName, "mpi").Label(wellknown.LabelLightweightMinAvailable, "0"),
			wantGang: "mpi",
			wantIn:   []string{`label pod-group.scheduling.sigs.k8s.io/min-available="0"`}},
		{name: "empty Kueue Workload name",
			pod:    pod().Annotation(wellknown.AnnotationKueueWorkload, ""),
			wantIn: []string{"pod team-a/w-0", "must not be empty"}},
		{name: "empty PodGroup name",
			pod:    pod().Label(wellknown.LabelCoschedulingPodGroup, ""),
			wantIn: []string{"pod team-a/w-0", "must not be empty"}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			ms := read(tc.pod)
			require.Error(t, ms.Err)
			require.Nil(t, ms.Spec)
			require.Equal(t, tc.wantGang, ms.Gang)
			for _, s := range tc.wantIn {
				require.Contains(t, ms.Err.Error(), s)
			}
		})
	}
}
