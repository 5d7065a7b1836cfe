package podgroup

import (
	"fmt"
	"time"

	"github.com/lockstep-sched/lockstep/views"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/klog/v2"
)

// What kube-scheduler's own gang scheduling writes on a Kubernetes PodGroup
// (pkg/scheduler/schedule_one_podgroup.go, 1.36 and 1.37): one condition (dialect.API.Condition:
// PodGroupScheduled in 1.36, PodGroupInitiallyScheduled in 1.37), True with reason Scheduled once
// the group is placed and never False again after, False with reason Unschedulable and the
// scheduler's message while it cannot be.
const (
	reasonScheduled     = "Scheduled"
	reasonUnschedulable = "Unschedulable"
)

// fieldManager is who lockstep's status writes are recorded as in managedFields.
const fieldManager = "lockstep"

// otherStatusWriter is who else writes the object's status, "" when nobody does: on a
// Kubernetes PodGroup, kube-scheduler, when it runs with its GenericWorkload gate on. It then
// schedules the group's pods in one cycle of its own, asking lockstep's filter about each, and
// writes the condition from that cycle's outcome. The two agree on whether the group is placed,
// but their words differ, and writing over each other's on every cycle would only churn.
func otherStatusWriter(obj *unstructured.Unstructured) string {
	for _, f := range obj.GetManagedFields() {
		if f.Subresource == "status" && f.Manager != fieldManager {
			return f.Manager
		}
	}
	return ""
}

// deferTo records, and says once per object, that lockstep leaves its status to writer.
func (s *Syncer) deferTo(r ref, writer string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.deferred == nil {
		s.deferred = map[ref]bool{}
	}
	if s.deferred[r] {
		return
	}
	s.deferred[r] = true
	klog.InfoS("Another scheduler writes this PodGroup's status (kube-scheduler does with its GenericWorkload gate on); lockstep leaves the group's condition to it, still decides the gang, and gives its reason on the pods and in /debug/gangs",
		"podGroup", r.namespace+"/"+r.name, "writer", writer)
}

// nativeStatus is the condition lockstep's view of the gang gives (in.api.Condition), nil when
// there is nothing to say yet (no member known, or members being reserved or bound right now).
// Like kube-scheduler, it never turns a True condition back to False: extra members that wait
// after the quorum was placed do not unschedule the group.
func nativeStatus(in statusInput, current map[string]any, now time.Time) map[string]any {
	if !in.known {
		return nil
	}
	st := in.standing
	var status, reason, message string
	switch st.Phase {
	case views.PhaseBound:
		status, reason = "True", reasonScheduled
		message = fmt.Sprintf("lockstep bound %d of the group's %d pods together", st.Bound, st.Members)
	case views.PhaseWaiting, views.PhaseHolding, views.PhaseTimedOut:
		status, reason, message = "False", reasonUnschedulable, st.Reason
	default:
		return nil
	}
	list, _ := current["conditions"].([]any)
	var previous map[string]any
	out := make([]any, 0, len(list)+1)
	for _, c := range list {
		if m, ok := c.(map[string]any); ok && m["type"] == in.api.Condition {
			previous = m
			continue
		}
		out = append(out, c)
	}
	if previous != nil && previous["status"] == "True" && status != "True" {
		return nil
	}
	cond := map[string]any{"type": in.api.Condition, "status": status, "reason": reason, "message": message,
		"observedGeneration": in.obj.GetGeneration(), "lastTransitionTime": now.UTC().Format(time.RFC3339)}
	if previous != nil && previous["status"] == status {
		cond["lastTransitionTime"] = previous["lastTransitionTime"]
	}
	return map[string]any{"conditions": append(out, cond)}
}
