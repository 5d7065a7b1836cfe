package dialect

import (
	"errors"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/lockstep-sched/lockstep/gangspec"
	"github.com/lockstep-sched/lockstep/quota"
	"github.com/lockstep-sched/lockstep/test/lib/builders"
	"github.com/lockstep-sched/lockstep/wellknown"
)

const sparkGroups = `[{"name":"spark-driver","minMember":1,"minResource":{"cpu":"1","memory":"2Gi"}},` +
	`{"name":"spark-executor","minMember":4,"minResource":{"cpu":"2","memory":"4Gi"},"nodeSelector":{"pool":"spark"},` +
	`"tolerations":[{"key":"spark","operator":"Exists"}],"affinity":{},"topologySpreadConstraints":[]}]`

func yunikornRef(name string) quota.Ref { return quota.Ref{Kind: KindYuniKornQueue, Name: name} }

// teamA is the queue YuniKorn places the applications of namespace team-a in when their pods
// name none.
var teamA = yunikornRef("root.team-a")

// yunikornSpark is the spec the Spark application's members carry, with changes.
func yunikornSpark(app string, change func(*gangspec.Spec)) *gangspec.Spec {
	s := &gangspec.Spec{Namespace: "team-a", Name: app, MinAvailable: 5, MinPerTask: map[string]int{"spark-driver": 1, "spark-executor": 4},
		WaitingTime: 15 * time.Minute, Mode: "Soft", Policy: gangspec.OnceSatisfied, Source: "YuniKorn task groups", Queue: teamA,
		QuorumFrom: "the minMember of the task groups in annotation " + wellknown.AnnotationYuniKornTaskGroups + " of the members"}
	if change != nil {
		change(s)
	}
	return s
}

func TestYuniKornPods(t *testing.T) {
	pod := func() *builders.PodBuilder { return builders.Pod("team-a", "w-0").GPU(1).SchedulerName("yunikorn") }
	spark := func() *builders.PodBuilder {
		return pod().Label(wellknown.LabelYuniKornAppID, "spark-pi").Annotation(wellknown.AnnotationYuniKornTaskGroups, sparkGroups)
	}
	tests := []struct {
		name string
		pod  *builders.PodBuilder
		want gangspec.Membership
	}{
		{name: "a member of the driver's task group: the application's task groups are its rules",
			pod:  spark().Annotation(wellknown.AnnotationYuniKornTaskGroupName, "spark-driver"),
			want: gangspec.Membership{Gang: "spark-pi", Task: "spark-driver", Queue: teamA, Spec: yunikornSpark("spark-pi", nil)}},
		{name: "a member of no task group counts toward the sum only",
			pod:  spark(),
			want: gangspec.Membership{Gang: "spark-pi", Queue: teamA, Spec: yunikornSpark("spark-pi", nil)}},
		{name: "the app id annotation when the label is absent",
			pod:  pod().Annotation(wellknown.AnnotationYuniKornAppID, "job-7").Annotation(wellknown.AnnotationYuniKornTaskGroups, sparkGroups),
			want: gangspec.Membership{Gang: "job-7", Queue: teamA, Spec: yunikornSpark("job-7", nil)}},
		{name: "the label wins over the annotation",
			pod:  spark().Annotation(wellknown.AnnotationYuniKornAppID, "other"),
			want: gangspec.Membership{Gang: "spark-pi", Queue: teamA, Spec: yunikornSpark("spark-pi", nil)}},
		{name: "the legacy applicationId label",
			pod:  pod().Label(wellknown.LabelYuniKornAppIDLegacy, "legacy").Annotation(wellknown.AnnotationYuniKornTaskGroups, sparkGroups),
			want: gangspec.Membership{Gang: "legacy", Queue: teamA, Spec: yunikornSpark("legacy", nil)}},
		{name: "Spark's own label, last",
			pod: pod().Label(wellknown.LabelSparkAppSelector, "spark-5f2c").Label(wellknown.LabelYuniKornAppIDLegacy, "legacy").
				Annotation(wellknown.AnnotationYuniKornTaskGroups, sparkGroups),
			want: gangspec.Membership{Gang: "legacy", Queue: teamA, Spec: yunikornSpark("legacy", nil)}},
		{name: "an empty app id label is none",
			pod: pod().Label(wellknown.LabelYuniKornAppID, "").Label(wellknown.LabelSparkAppSelector, "spark-5f2c").
				Annotation(wellknown.AnnotationYuniKornTaskGroups, sparkGroups),
			want: gangspec.Membership{Gang: "spark-5f2c", Queue: teamA, Spec: yunikornSpark("spark-5f2c", nil)}},
		{name: "no app id: the namespace's generated application, as the shim makes it",
			pod:  pod().Annotation(wellknown.AnnotationYuniKornTaskGroups, sparkGroups),
			want: gangspec.Membership{Gang: "yunikorn-team-a-autogen", Queue: teamA, Spec: yunikornSpark("yunikorn-team-a-autogen", nil)}},
		{name: "the admission controller's unique app id: the pod's own application",
			pod:  pod().UID("5d3c").Label(wellknown.LabelYuniKornAppID, "team-a-uniqueautogen").Annotation(wellknown.AnnotationYuniKornTaskGroups, sparkGroups),
			want: gangspec.Membership{Gang: "team-a-5d3c", Queue: teamA, Spec: yunikornSpark("team-a-5d3c", nil)}},
		{name: "the timeout and the Hard style",
			pod:  spark().Annotation(wellknown.AnnotationYuniKornSchedulingPolicy, "placeholderTimeoutInSeconds=60 gangSchedulingStyle=Hard"),
			want: gangspec.Membership{Gang: "spark-pi", Queue: teamA, Spec: yunikornSpark("spark-pi", func(s *gangspec.Spec) { s.WaitingTime, s.Mode = time.Minute, "Hard" })}},
		{name: "a timeout of 0 is YuniKorn's 900 seconds; extra spaces are no pairs",
			pod:  spark().Annotation(wellknown.AnnotationYuniKornSchedulingPolicy, " placeholderTimeoutInSeconds=0  gangSchedulingStyle=Soft "),
			want: gangspec.Membership{Gang: "spark-pi", Queue: teamA, Spec: yunikornSpark("spark-pi", nil)}},
		{name: "the queue label: the application's queue and the pod's",
			pod: spark().Label(wellknown.LabelYuniKornQueue, "root.spark"),
			want: gangspec.Membership{Gang: "spark-pi", Queue: yunikornRef("root.spark"),
				Spec: yunikornSpark("spark-pi", func(s *gangspec.Spec) { s.Queue = yunikornRef("root.spark") })}},
		{name: "an application without task groups is no gang, and keeps its queue",
			pod:  pod().Label(wellknown.LabelYuniKornAppID, "web").Annotation(wellknown.AnnotationYuniKornQueue, "root.web"),
			want: gangspec.Membership{Queue: yunikornRef("root.web")}},
		{name: "the queue label wins over the annotation, which wins over the legacy label",
			pod: pod().Label(wellknown.LabelYuniKornQueueLegacy, "legacy").Annotation(wellknown.AnnotationYuniKornQueue, "annotated").
				Label(wellknown.LabelYuniKornQueue, "labelled"),
			want: gangspec.Membership{Queue: yunikornRef("root.labelled")}},
		{name: "the legacy queue label on a YuniKorn pod", pod: pod().Label(wellknown.LabelYuniKornQueueLegacy, "legacy"),
			want: gangspec.Membership{Queue: yunikornRef("root.legacy")}},
		{name: "a bare queue label on someone else's pod names no YuniKorn queue",
			pod: builders.Pod("team-a", "w-0").Label(wellknown.LabelYuniKornQueueLegacy, "high")},
		{name: "an empty task-groups annotation is none", pod: pod().Label(wellknown.LabelYuniKornAppID, "web").Annotation(wellknown.AnnotationYuniKornTaskGroups, ""),
			want: gangspec.Membership{Queue: teamA}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			require.Equal(t, tc.want, read(tc.pod))
		})
	}
}

// Members of one application that carry different task groups: each reads its own, and the gang
// refuses the one that disagrees with the rules it has (gangspec.Disagreement), as for Koordinator.
func TestYuniKornMembersThatDisagree(t *testing.T) {
	pod := builders.Pod("team-a", "w-0").Label(wellknown.LabelYuniKornAppID, "spark-pi").Annotation(wellknown.AnnotationYuniKornTaskGroups, sparkGroups)
	other := pod.Clone().Name("w-1").Annotation(wellknown.AnnotationYuniKornTaskGroups, `[{"name":"spark-driver","minMember":1},{"name":"spark-executor","minMember":8}]`)
	a, b := read(pod), read(other)
	require.Equal(t, a.Gang, b.Gang)
	err := gangspec.Disagreement("team-a/w-1", b.Spec, a.Spec, "team-a/w-0")
	require.ErrorContains(t, err, `min-available="9": gang team-a/spark-pi already has "5" (from pod team-a/w-0)`)

	styled := pod.Clone().Name("w-2").Annotation(wellknown.AnnotationYuniKornSchedulingPolicy, "gangSchedulingStyle=Hard")
	require.ErrorContains(t, gangspec.Disagreement("team-a/w-2", read(styled).Spec, a.Spec, "team-a/w-0"), `mode="Hard"`)
}

func TestYuniKornErrors(t *testing.T) {
	pod := func() *builders.PodBuilder {
		return builders.Pod("team-a", "w-0").Label(wellknown.LabelYuniKornAppID, "app")
	}
	groups, name, policy := wellknown.AnnotationYuniKornTaskGroups, wellknown.AnnotationYuniKornTaskGroupName, wellknown.AnnotationYuniKornSchedulingPolicy
	tests := []struct {
		name    string
		pod     *builders.PodBuilder
		wantKey string
		wantIn  string
	}{
		{name: "task groups not JSON", pod: pod().Annotation(groups, "workers:4"), wantKey: groups, wantIn: "must be a JSON list"},
		{name: "task groups an object", pod: pod().Annotation(groups, `{"name":"w","minMember":2}`), wantKey: groups, wantIn: "must be a JSON list"},
		{name: "no task groups listed", pod: pod().Annotation(groups, `[]`), wantKey: groups, wantIn: "lists no task groups"},
		{name: "null", pod: pod().Annotation(groups, `null`), wantKey: groups, wantIn: "lists no task groups"},
		{name: "a task group without a name", pod: pod().Annotation(groups, `[{"minMember":2}]`), wantKey: groups, wantIn: "task group 0 has no name"},
		{name: "a name not a string", pod: pod().Annotation(groups, `[{"name":7,"minMember":2}]`), wantKey: groups, wantIn: "must be a JSON list"},
		{name: "a task group twice", pod: pod().Annotation(groups, `[{"name":"w","minMember":2},{"name":"w","minMember":1}]`), wantKey: groups, wantIn: "listed twice"},
		{name: "minMember missing", pod: pod().Annotation(groups, `[{"name":"w"}]`), wantKey: groups, wantIn: "has no minMember"},
		{name: "minMember negative", pod: pod().Annotation(groups, `[{"name":"w","minMember":-1}]`), wantKey: groups, wantIn: "at least 1"},
		{name: "minMember zero", pod: pod().Annotation(groups, `[{"name":"w","minMember":0}]`), wantKey: groups, wantIn: "at least 1"},
		{name: "minMember a string", pod: pod().Annotation(groups, `[{"name":"w","minMember":"2"}]`), wantKey: groups, wantIn: "whole number"},
		{name: "minMember a fraction", pod: pod().Annotation(groups, `[{"name":"w","minMember":2.5}]`), wantKey: groups, wantIn: "whole number"},
		{name: "minMember a string, then a number: refused as YuniKorn refuses it",
			pod: pod().Annotation(groups, `[{"name":"w","minMember":"0","MINMEMBER":1}]`), wantKey: groups, wantIn: "not string"},
		{name: "minMember beyond int32", pod: pod().Annotation(groups, `[{"name":"w","minMember":2147483648}]`), wantKey: groups, wantIn: "whole number"},
		{name: "a task group name and no task groups", pod: pod().Annotation(name, "workers"), wantKey: name, wantIn: "carries no annotation"},
		{name: "a task group the application does not list", pod: pod().Annotation(groups, sparkGroups).Annotation(name, "workers"), wantKey: name, wantIn: "is not one of"},
		{name: "a pair without =", pod: pod().Annotation(groups, sparkGroups).Annotation(policy, "placeholderTimeoutInSeconds"), wantKey: policy, wantIn: "not key=value"},
		{name: "pairs separated by commas", pod: pod().Annotation(groups, sparkGroups).Annotation(policy, "placeholderTimeoutInSeconds=60,gangSchedulingStyle=Hard"),
			wantKey: policy, wantIn: "not key=value"},
		{name: "timeout not a number", pod: pod().Annotation(groups, sparkGroups).Annotation(policy, "placeholderTimeoutInSeconds=1m"), wantKey: policy, wantIn: "whole seconds"},
		{name: "timeout negative", pod: pod().Annotation(groups, sparkGroups).Annotation(policy, "placeholderTimeoutInSeconds=-5"), wantKey: policy, wantIn: "must not be negative"},
		{name: "timeout past 292 years", pod: pod().Annotation(groups, sparkGroups).Annotation(policy, "placeholderTimeoutInSeconds=9223372037"), wantKey: policy, wantIn: "at most"},
		{name: "unknown style", pod: pod().Annotation(groups, sparkGroups).Annotation(policy, "gangSchedulingStyle=Strict"), wantKey: policy, wantIn: "Soft or Hard"},
		{name: "unknown parameter", pod: pod().Annotation(groups, sparkGroups).Annotation(policy, "placeholderTimeout=60"), wantKey: policy, wantIn: "not a parameter"},
		{name: "a parameter twice", pod: pod().Annotation(groups, sparkGroups).Annotation(policy, "gangSchedulingStyle=Hard gangSchedulingStyle=Soft"), wantKey: policy, wantIn: "twice"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			ms := read(tc.pod)
			require.Nil(t, ms.Spec)
			require.Equal(t, "app", ms.Gang, "a refused member is listed beside its application's")
			var fieldErr *gangspec.FieldError
			require.True(t, errors.As(ms.Err, &fieldErr), "want *FieldError, got %T: %v", ms.Err, ms.Err)
			require.Equal(t, "pod team-a/w-0", fieldErr.Object)
			require.Equal(t, "annotation "+tc.wantKey, fieldErr.Field)
			require.Equal(t, tc.pod.Obj().Annotations[tc.wantKey], fieldErr.Value)
			require.Contains(t, fieldErr.Reason, tc.wantIn)
		})
	}
}

func TestYuniKornBesideAnotherDialect(t *testing.T) {
	pod := builders.Pod("team-a", "w-0").Label(wellknown.LabelYuniKornAppID, "app").Annotation(wellknown.AnnotationYuniKornTaskGroups, sparkGroups).
		Annotation(wellknown.AnnotationYuniKornTaskGroupName, "spark-driver").Label(wellknown.LabelCoschedulingPodGroup, "tf")
	ms := read(pod)
	require.Error(t, ms.Err)
	require.Contains(t, ms.Err.Error(), `label scheduling.x-k8s.io/pod-group="tf"`)
	require.Contains(t, ms.Err.Error(), `annotation yunikorn.apache.org/task-group-name="spark-driver"`)
}
