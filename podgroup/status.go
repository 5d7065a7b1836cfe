package podgroup

import (
	"context"
	"encoding/json"
	"fmt"
	"reflect"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/klog/v2"

	"github.com/lockstep-sched/lockstep/dialect"
	"github.com/lockstep-sched/lockstep/gang"
	"github.com/lockstep-sched/lockstep/placement"
	"github.com/lockstep-sched/lockstep/views"
)

// Status values the projects' own controllers write.
const (
	phasePending    = "Pending"
	phaseInqueue    = "Inqueue" // Volcano: admitted; its job controller now creates the pods
	phaseRunning    = "Running"
	phaseScheduling = "Scheduling"
	phaseScheduled  = "Scheduled"

	conditionUnschedulable = "Unschedulable"
	reasonNotEnough        = "NotEnoughResources"
)

// writeStatuses brings queued objects' status up to date until the queue shuts down.
func (s *Syncer) writeStatuses(ctx context.Context) {
	for {
		r, shutdown := s.queue.Get()
		if shutdown {
			return
		}
		if err := s.syncStatus(ctx, r); err != nil {
			klog.V(2).InfoS("Writing group status failed; will retry", "resource", r.api.Resource, "object", r.namespace+"/"+r.name, "err", err)
			s.queue.AddRateLimited(r)
		} else {
			s.queue.Forget(r)
		}
		s.queue.Done(r)
	}
}

// syncStatus writes one object's status when lockstep's view differs from what it says.
func (s *Syncer) syncStatus(ctx context.Context, r ref) error {
	if s.mayWrite != nil && !s.mayWrite() {
		return nil
	}
	w, watched := s.groups.Lookup(r.api)
	if !watched || w.API.Status == dialect.StatusOwned {
		return nil
	}
	item, exists, err := w.Store.GetByKey(r.namespace + "/" + r.name)
	if err != nil || !exists {
		return err
	}
	obj := item.(*unstructured.Unstructured)
	if w.API.Status == dialect.StatusConditions {
		if writer := otherStatusWriter(obj); writer != "" {
			s.deferTo(r, writer)
			return nil
		}
	}
	in := statusInput{api: w.API, obj: obj}
	in.standing, in.known = s.manager.Standing(r.namespace + "/" + r.name)
	if w.API.Status == dialect.StatusVolcano && w.API.Dialect == dialect.Volcano.Dialect {
		in.fits, in.fitsWhy, in.queueRefused = s.queueable(obj, in)
	}
	patch := statusPatch(in, time.Now())
	if patch == nil {
		return nil
	}
	body, err := json.Marshal(map[string]any{"status": patch})
	if err != nil {
		return err
	}
	var sub []string
	if w.HasStatus {
		sub = []string{"status"}
	}
	_, err = s.client.Resource(r.api).Namespace(r.namespace).Patch(ctx, r.name, types.MergePatchType, body, metav1.PatchOptions{FieldManager: fieldManager}, sub...)
	if apierrors.IsNotFound(err) {
		return nil
	}
	return err
}

// queueable is Volcano's enqueue test: could the group's queue take it, and could its
// minResources (or, without them, its members' requests) be placed on what the cluster has free,
// in total. why is the whole reason a user reads.
func (s *Syncer) queueable(obj *unstructured.Unstructured, in statusInput) (fits bool, why string, queueRefused bool) {
	req, err := minResources(obj)
	if err != nil {
		return false, "lockstep: " + err.Error(), false
	}
	if req.IsZero() && in.known {
		req = in.standing.QuorumRequests
	}
	if spec, err := in.api.Parse(obj); err == nil {
		if ok, why := s.manager.QueueTakes(obj.GetNamespace(), obj.GetName(), spec.Queue, req); !ok {
			return false, "lockstep: the group waits for its queue: " + why, true
		}
	}
	if ok, why := s.manager.FitsInTotal(req); !ok {
		return false, "lockstep: the group's minimum resources do not fit the cluster's free capacity: " + why, false
	}
	return true, "", false
}

// minResources reads spec.minResources, a resource list.
func minResources(obj *unstructured.Unstructured) (placement.Resources, error) {
	raw, found, _ := unstructured.NestedMap(obj.Object, "spec", "minResources")
	if !found {
		return placement.Resources{}, nil
	}
	list := corev1.ResourceList{}
	for name, v := range raw {
		q, err := resource.ParseQuantity(fmt.Sprint(v))
		if err != nil {
			return placement.Resources{}, fmt.Errorf("%s: spec.minResources.%s=%q: not a quantity", dialect.Volcano.Object(obj.GetNamespace(), obj.GetName()), name, fmt.Sprint(v))
		}
		list[corev1.ResourceName(name)] = q
	}
	return placement.ListResources(list), nil
}

// statusInput is what a group object's status is computed from.
type statusInput struct {
	api      dialect.API
	obj      *unstructured.Unstructured
	standing gang.Standing
	known    bool // lockstep knows members of the gang
	// fits and fitsWhy are the Volcano enqueue test's answer; queueRefused says its queue, not the
	// cluster, turned the group away.
	fits         bool
	fitsWhy      string
	queueRefused bool
}

// statusPatch is the merge patch of the status lockstep writes, nil when the object already says
// it: the fields the project's own controllers write, from lockstep's view of the gang.
func statusPatch(in statusInput, now time.Time) map[string]any {
	current, _, _ := unstructured.NestedMap(in.obj.Object, "status")
	var want map[string]any
	switch in.api.Status {
	case dialect.StatusVolcano:
		want = volcanoStatus(in, current, now)
	case dialect.StatusKoordinator:
		want = coschedulingStatus(in, phaseScheduled)
		if in.known {
			want["scheduled"] = int64(in.standing.Bound)
		}
	case dialect.StatusConditions:
		want = nativeStatus(in, current, now)
	case dialect.StatusKAI:
		want = kaiStatus(in, current, now)
	default:
		want = coschedulingStatus(in, phaseRunning)
	}
	for k, v := range want {
		if !sameJSON(current[k], v) {
			return want
		}
	}
	return nil
}

// volcanoStatus: phase moves Pending → Inqueue → Running and never back (as Volcano's own do),
// running counts members bound, and an Unschedulable condition carries lockstep's reason while
// the gang waits.
func volcanoStatus(in statusInput, current map[string]any, now time.Time) map[string]any {
	phase, _ := current["phase"].(string)
	st := in.standing
	switch {
	case in.known && st.Phase == views.PhaseBound:
		phase = phaseRunning
	case phase == phaseInqueue && in.queueRefused && in.known && st.Bound == 0:
		// Enqueued before lockstep knew what the gang asks (no minResources, members not yet
		// seen): now that its queue turns the whole quorum away, the group waits again.
		phase = phasePending
	case phase == phaseRunning || phase == phaseInqueue:
	case in.fits:
		phase = phaseInqueue
	default:
		phase = phasePending
	}
	why := ""
	switch {
	case phase == phaseRunning:
	case in.known && (st.Phase == views.PhaseWaiting || st.Phase == views.PhaseHolding || st.Phase == views.PhaseTimedOut):
		why = st.Reason
	case phase == phasePending:
		why = in.fitsWhy
	}
	out := map[string]any{"phase": phase}
	if conditions := withCondition(current["conditions"], conditionUnschedulable, why, now); conditions != nil {
		out["conditions"] = conditions
	}
	if in.known {
		out["running"] = int64(st.Bound)
	}
	return out
}

// coschedulingStatus: scheduler-plugins' and Koordinator's phases; bound is the phase their API
// has for a gang whose quorum is bound (lockstep knows bindings, not whether containers run).
// Only fields the CRD's schema keeps are written: a field the apiserver drops would differ on
// every look and be written forever.
func coschedulingStatus(in statusInput, bound string) map[string]any {
	st := in.standing
	out := map[string]any{"phase": phasePending}
	if !in.known {
		return out
	}
	switch st.Phase {
	case views.PhaseBound:
		out["phase"] = bound
	case views.PhaseReserving, views.PhaseBinding:
		out["phase"] = phaseScheduling
	}
	out["scheduleStartTime"] = st.Since.UTC().Format(time.RFC3339)
	return out
}

// withCondition is the object's conditions with lockstep's one condition set to message (True),
// or removed when message is empty; other controllers' conditions stay. A condition whose words
// did not change keeps its transition time, so that an unchanged status is not rewritten.
func withCondition(raw any, kind, message string, now time.Time) []any {
	list, _ := raw.([]any)
	out := []any{}
	var previous map[string]any
	for _, c := range list {
		if m, ok := c.(map[string]any); ok && m["type"] == kind {
			previous = m
			continue
		}
		out = append(out, c)
	}
	if message == "" {
		if raw == nil {
			return nil // no conditions then, none now: nothing to write
		}
		return out
	}
	cond := map[string]any{"type": kind, "status": "True", "reason": reasonNotEnough, "message": message,
		"lastTransitionTime": now.UTC().Format(time.RFC3339)}
	if previous != nil && previous["message"] == message && previous["status"] == "True" {
		cond["lastTransitionTime"] = previous["lastTransitionTime"]
	}
	return append(out, cond)
}

// sameJSON compares a field as the apiserver returned it with the value lockstep would write.
func sameJSON(have, want any) bool {
	a, errA := json.Marshal(have)
	b, errB := json.Marshal(want)
	if errA != nil || errB != nil {
		return false
	}
	var x, y any
	_ = json.Unmarshal(a, &x)
	_ = json.Unmarshal(b, &y)
	return reflect.DeepEqual(x, y)
}
