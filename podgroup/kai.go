package podgroup

import (
	"strconv"
	"time"

	"github.com/lockstep-sched/lockstep/views"
	"github.com/lockstep-sched/lockstep/wellknown"
)

// What KAI Scheduler's own scheduler writes on its PodGroup (kai-scheduler/KAI-Scheduler v0.17,
// pkg/scheduler/cache/status_updater/default_status_updater.go): no phase, which its v2alpha2 does
// not have; while the group cannot be placed, one entry per node pool in
// status.schedulingConditions, the newest last, with a transitionID one above the highest before;
// once none of its pods waits, no entries at all. Its podgroup controller writes
// status.resourcesStatus, which lockstep leaves alone.
const (
	kaiConditionType   = "UnschedulableOnNodePool"
	kaiReason          = "Unschedulable"
	kaiDefaultNodePool = "default"
)

// kaiStatus is the schedulingConditions lockstep's view of the gang gives: lockstep's reason while
// it waits, none once its quorum is bound, nothing to say before a member is known or while
// members are being reserved and bound.
func kaiStatus(in statusInput, current map[string]any, now time.Time) map[string]any {
	if !in.known {
		return nil
	}
	switch in.standing.Phase {
	case views.PhaseBound:
		return map[string]any{"schedulingConditions": nil} // null: a merge patch removes them
	case views.PhaseWaiting, views.PhaseHolding, views.PhaseTimedOut:
		pool := in.obj.GetLabels()[wellknown.LabelKAINodePool]
		if pool == "" {
			pool = kaiDefaultNodePool
		}
		return map[string]any{"schedulingConditions": kaiConditions(current["schedulingConditions"], pool, in.standing.Reason, now)}
	}
	return nil
}

// kaiConditions is the list with the node pool's entry saying message. An entry that says it
// already and is the newest stays as it is, so that an unchanged status is not rewritten; other
// node pools' entries stay.
func kaiConditions(raw any, pool, message string, now time.Time) []any {
	list, _ := raw.([]any)
	out := []any{}
	var ours map[string]any
	highest := 0
	for _, c := range list {
		m, _ := c.(map[string]any)
		highest = max(highest, kaiTransitionID(m))
		if m != nil && m["nodePool"] == pool {
			ours = m
			continue
		}
		out = append(out, c)
	}
	if ours != nil && kaiSays(ours, message) {
		if newest, _ := list[len(list)-1].(map[string]any); newest["nodePool"] == pool {
			return list
		}
	}
	return append(out, map[string]any{
		"type": kaiConditionType, "nodePool": pool, "status": "True", "reason": kaiReason, "message": message,
		"reasons":      []any{map[string]any{"reason": kaiReason, "message": message}},
		"transitionID": strconv.Itoa(highest + 1), "lastTransitionTime": now.UTC().Format(time.RFC3339),
	})
}

// kaiSays is KAI's own test of an unchanged entry: the same type, reason, message and status.
func kaiSays(c map[string]any, message string) bool {
	return c["type"] == kaiConditionType && c["reason"] == kaiReason && c["message"] == message && c["status"] == "True"
}

// kaiTransitionID reads an entry's transitionID as KAI does: what is not a whole number is 0.
func kaiTransitionID(c map[string]any) int {
	s, _ := c["transitionID"].(string)
	n, err := strconv.Atoi(s)
	if err != nil || n < 0 {
		return 0
	}
	return n
}
