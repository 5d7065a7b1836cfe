package podgroup

import (
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	"github.com/lockstep-sched/lockstep/dialect"
	"github.com/lockstep-sched/lockstep/gang"
	"github.com/lockstep-sched/lockstep/views"
)

var now = time.Date(2026, 11, 22, 10, 0, 0, 0, time.UTC)

func object(status map[string]any) *unstructured.Unstructured {
	obj := &unstructured.Unstructured{Object: map[string]any{"spec": map[string]any{"minMember": int64(2)}}}
	if status != nil {
		obj.Object["status"] = status
	}
	return obj
}

func TestVolcanoStatus(t *testing.T) {
	waiting := gang.Standing{Phase: views.PhaseWaiting, Members: 2, Reason: "gang ns/tf: no room", Since: now}
	tests := []struct {
		name string
		in   statusInput
		want map[string]any // nil: nothing to write
	}{
		{name: "no pods yet and the minimum fits: Inqueue, so that Volcano's controllers create them",
			in:   statusInput{fits: true},
			want: map[string]any{"phase": "Inqueue"}},
		{name: "no pods yet and the minimum does not fit: Pending, saying why",
			in: statusInput{fitsWhy: "lockstep: the group's minimum resources do not fit the cluster's free capacity: needs 10 nvidia.com/gpu in all; the cluster has 8 free"},
			want: map[string]any{"phase": "Pending", "conditions": []any{map[string]any{"type": "Unschedulable", "status": "True", "reason": "NotEnoughResources",
				"message": "lockstep: the group's minimum resources do not fit the cluster's free capacity: needs 10 nvidia.com/gpu in all; the cluster has 8 free", "lastTransitionTime": "2026-11-22T10:00:00Z"}}}},
		{name: "members waiting: lockstep's reason",
			in: statusInput{obj: object(map[string]any{"phase": "Inqueue"}), known: true, standing: waiting, fits: true},
			want: map[string]any{"phase": "Inqueue", "running": int64(0), "conditions": []any{map[string]any{"type": "Unschedulable", "status": "True", "reason": "NotEnoughResources",
				"message": "gang ns/tf: no room", "lastTransitionTime": "2026-11-22T10:00:00Z"}}}},
		{name: "the same reason again: nothing to write",
			in: statusInput{obj: object(map[string]any{"phase": "Inqueue", "running": int64(0), "conditions": []any{map[string]any{"type": "Unschedulable", "status": "True",
				"reason": "NotEnoughResources", "message": "gang ns/tf: no room", "lastTransitionTime": "2026-11-22T09:00:00Z"}}}), known: true, standing: waiting}},
		{name: "enqueued before the gang was known, then its queue turns the quorum away: Pending again",
			in: statusInput{obj: object(map[string]any{"phase": "Inqueue"}), known: true, standing: waiting, queueRefused: true,
				fitsWhy: "lockstep: the group waits for its queue: Volcano Queue a: nvidia.com/gpu would go over its limit of 4"},
			want: map[string]any{"phase": "Pending", "running": int64(0), "conditions": []any{map[string]any{"type": "Unschedulable", "status": "True", "reason": "NotEnoughResources",
				"message": "gang ns/tf: no room", "lastTransitionTime": "2026-11-22T10:00:00Z"}}}},
		{name: "quorum bound: Running, and the condition goes; others' conditions stay",
			in: statusInput{obj: object(map[string]any{"phase": "Inqueue", "conditions": []any{
				map[string]any{"type": "Unschedulable", "status": "True", "message": "old"}, map[string]any{"type": "Other", "status": "True"}}}),
				known: true, standing: gang.Standing{Phase: views.PhaseBound, Members: 2, Bound: 2}},
			want: map[string]any{"phase": "Running", "running": int64(2), "conditions": []any{map[string]any{"type": "Other", "status": "True"}}}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			tc.in.api = dialect.Volcano
			if tc.in.obj == nil {
				tc.in.obj = object(nil)
			}
			require.Equal(t, tc.want, statusPatch(tc.in, now))
		})
	}
}

func TestCoschedulingStatus(t *testing.T) {
	reserving := gang.Standing{Phase: views.PhaseReserving, Members: 2, Since: now}
	bound := gang.Standing{Phase: views.PhaseBound, Members: 2, Bound: 2, Since: now}
	require.Equal(t, map[string]any{"phase": "Pending"}, statusPatch(statusInput{api: dialect.Coscheduling, obj: object(nil)}, now))
	require.Equal(t, map[string]any{"phase": "Scheduling", "scheduleStartTime": "2026-11-22T10:00:00Z"},
		statusPatch(statusInput{api: dialect.Coscheduling, obj: object(nil), known: true, standing: reserving}, now))
	require.Equal(t, map[string]any{"phase": "Running", "scheduleStartTime": "2026-11-22T10:00:00Z"},
		statusPatch(statusInput{api: dialect.Coscheduling, obj: object(nil), known: true, standing: bound}, now),
		"scheduler-plugins' v1alpha1 has no Scheduled phase")
	require.Equal(t, map[string]any{"phase": "Scheduled", "scheduled": int64(2), "scheduleStartTime": "2026-11-22T10:00:00Z"},
		statusPatch(statusInput{api: dialect.Koordinator, obj: object(nil), known: true, standing: bound}, now))
	require.Nil(t, statusPatch(statusInput{api: dialect.Koordinator, obj: object(map[string]any{"phase": "Scheduled", "scheduled": int64(2), "scheduleStartTime": "2026-11-22T10:00:00Z"}),
		known: true, standing: bound}, now))
}

// The condition kube-scheduler's gang scheduling writes, of the type each version has:
// PodGroupInitiallyScheduled in 1.37 (v1beta1), PodGroupScheduled in 1.36 (v1alpha2).
func TestNativeStatus(t *testing.T) {
	for _, api := range []dialect.API{dialect.Native, dialect.NativeV1alpha2} {
		t.Run(api.Resource.Version, func(t *testing.T) { testNativeStatus(t, api) })
	}
}

func testNativeStatus(t *testing.T, api dialect.API) {
	waiting := gang.Standing{Phase: views.PhaseWaiting, Members: 3, Reason: "gang ns/pg: needs 3 pods placed together; 2 fit", Since: now}
	bound := gang.Standing{Phase: views.PhaseBound, Members: 3, Bound: 3, Since: now}
	unschedulable := map[string]any{"type": api.Condition, "status": "False", "reason": "Unschedulable",
		"message": waiting.Reason, "observedGeneration": int64(1), "lastTransitionTime": "2026-11-22T09:00:00Z"}
	scheduled := map[string]any{"type": api.Condition, "status": "True", "reason": "Scheduled",
		"message": "lockstep bound 3 of the group's 3 pods together", "observedGeneration": int64(1), "lastTransitionTime": "2026-11-22T10:00:00Z"}
	tests := []struct {
		name     string
		status   map[string]any
		standing gang.Standing
		known    bool
		want     map[string]any // nil: nothing to write
	}{
		{name: "no member known yet: nothing, as kube-scheduler before its first cycle"},
		{name: "waiting: False, Unschedulable, lockstep's reason", known: true, standing: waiting,
			want: map[string]any{"conditions": []any{map[string]any{"type": api.Condition, "status": "False", "reason": "Unschedulable",
				"message": waiting.Reason, "observedGeneration": int64(1), "lastTransitionTime": "2026-11-22T10:00:00Z"}}}},
		{name: "the same words again: nothing to write", known: true, standing: waiting,
			status: map[string]any{"conditions": []any{unschedulable}}},
		{name: "quorum bound: True, Scheduled; others' conditions stay", known: true, standing: bound,
			status: map[string]any{"conditions": []any{map[string]any{"type": "DisruptionTarget", "status": "False"}, unschedulable}},
			want:   map[string]any{"conditions": []any{map[string]any{"type": "DisruptionTarget", "status": "False"}, scheduled}}},
		{name: "never back from True to False, as kube-scheduler", known: true, standing: waiting,
			status: map[string]any{"conditions": []any{scheduled}}},
		{name: "reserving: no change while members bind", known: true, standing: gang.Standing{Phase: views.PhaseReserving, Members: 3}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			obj := object(tc.status)
			obj.SetGeneration(1)
			in := statusInput{api: api, obj: obj, known: tc.known, standing: tc.standing}
			got := statusPatch(in, now)
			if tc.want == nil {
				require.Nil(t, got)
				return
			}
			require.Equal(t, tc.want, got)
		})
	}
}

// Where kube-scheduler's GangScheduling plugin runs beside lockstep, it writes the condition too;
// lockstep then leaves it alone rather than write over it on every cycle.
func TestOtherStatusWriter(t *testing.T) {
	obj := object(nil)
	obj.SetManagedFields([]metav1.ManagedFieldsEntry{{Manager: "kubectl", Operation: metav1.ManagedFieldsOperationUpdate},
		{Manager: "lockstep", Operation: metav1.ManagedFieldsOperationUpdate, Subresource: "status"}})
	require.Empty(t, otherStatusWriter(obj), "the object's creator and lockstep itself are no other status writer")
	obj.SetManagedFields(append(obj.GetManagedFields(), metav1.ManagedFieldsEntry{Manager: "kube-scheduler",
		Operation: metav1.ManagedFieldsOperationUpdate, Subresource: "status"}))
	require.Equal(t, "kube-scheduler", otherStatusWriter(obj))
}
