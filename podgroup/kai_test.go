package podgroup

import (
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/lockstep-sched/lockstep/dialect"
	"github.com/lockstep-sched/lockstep/gang"
	"github.com/lockstep-sched/lockstep/views"
	"github.com/lockstep-sched/lockstep/wellknown"
)

// What KAI's own scheduler writes: an UnschedulableOnNodePool entry per node pool while the group
// waits, the newest last with the next transitionID, and none once the group is placed.
func TestKAIStatus(t *testing.T) {
	waiting := gang.Standing{Phase: views.PhaseWaiting, Members: 2, Reason: "gang ns/pg: needs 2 pods placed together; 1 fits", Since: now}
	bound := gang.Standing{Phase: views.PhaseBound, Members: 2, Bound: 2, Since: now}
	entry := func(pool, message, id, at string) map[string]any {
		return map[string]any{"type": "UnschedulableOnNodePool", "nodePool": pool, "status": "True", "reason": "Unschedulable", "message": message,
			"reasons": []any{map[string]any{"reason": "Unschedulable", "message": message}}, "transitionID": id, "lastTransitionTime": at}
	}
	tests := []struct {
		name     string
		status   map[string]any
		labels   map[string]string
		standing gang.Standing
		known    bool
		want     map[string]any // nil: nothing to write
	}{
		{name: "no member known yet: nothing"},
		{name: "waiting: lockstep's reason for the default node pool, transition 1", known: true, standing: waiting,
			want: map[string]any{"schedulingConditions": []any{entry("default", waiting.Reason, "1", "2026-11-22T10:00:00Z")}}},
		{name: "the same words, newest already: nothing to write", known: true, standing: waiting,
			status: map[string]any{"schedulingConditions": []any{entry("default", waiting.Reason, "4", "2026-11-22T09:00:00Z")}}},
		{name: "new words: the next transition, replacing the pool's entry", known: true, standing: waiting,
			status: map[string]any{"schedulingConditions": []any{entry("default", "old", "4", "2026-11-22T09:00:00Z")}},
			want:   map[string]any{"schedulingConditions": []any{entry("default", waiting.Reason, "5", "2026-11-22T10:00:00Z")}}},
		{name: "the group's node pool label; other pools' entries stay, ours goes last", known: true, standing: waiting,
			labels: map[string]string{wellknown.LabelKAINodePool: "h100"},
			status: map[string]any{"schedulingConditions": []any{entry("h100", waiting.Reason, "2", "2026-11-22T08:00:00Z"), entry("a100", "full", "3", "2026-11-22T09:00:00Z")}},
			want: map[string]any{"schedulingConditions": []any{entry("a100", "full", "3", "2026-11-22T09:00:00Z"),
				entry("h100", waiting.Reason, "4", "2026-11-22T10:00:00Z")}}},
		{name: "quorum bound: the entries go", known: true, standing: bound,
			status: map[string]any{"schedulingConditions": []any{entry("default", waiting.Reason, "1", "2026-11-22T09:00:00Z")}},
			want:   map[string]any{"schedulingConditions": nil}},
		{name: "quorum bound and none there: nothing to write", known: true, standing: bound},
		{name: "reserving: no change while members bind", known: true, standing: gang.Standing{Phase: views.PhaseReserving, Members: 2},
			status: map[string]any{"schedulingConditions": []any{entry("default", "old", "1", "2026-11-22T09:00:00Z")}}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			obj := object(tc.status)
			obj.SetLabels(tc.labels)
			got := statusPatch(statusInput{api: dialect.KAI, obj: obj, known: tc.known, standing: tc.standing}, now)
			require.Equal(t, tc.want, got)
		})
	}
}
