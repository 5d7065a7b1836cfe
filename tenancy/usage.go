package tenancy

import (
	"context"
	"encoding/json"
	"fmt"
	"strconv"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/klog/v2"

	"github.com/lockstep-sched/lockstep/dialect"
	"github.com/lockstep-sched/lockstep/quota"
	"github.com/lockstep-sched/lockstep/wellknown"
)

// A queue's usage is what lockstep counts against it: its bound pods' requests and what
// reservations hold for its gangs' quorums (quota.Status.Allocated), in the resources lockstep
// counts. It is written under the field the project's own scheduler or controller fills
// (dialect.QueueAPI.Usage) with a merge patch, so that resources lockstep does not count, which
// those may have written there, stay.

// writeUsage writes changed usage every UsageInterval, and at once on Resync, until ctx ends.
func (w *Watcher) writeUsage(ctx context.Context) {
	tick := time.NewTicker(w.cfg.UsageInterval)
	defer tick.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-tick.C:
		case <-w.resync:
		}
		w.writeUsageOnce(ctx)
	}
}

// usageTarget is one object whose status carries its queue's usage.
type usageTarget struct {
	api       dialect.QueueAPI
	hasStatus bool
	key       string
	obj       *unstructured.Unstructured
}

// writeUsageOnce patches every object whose usage differs from lockstep's count.
func (w *Watcher) writeUsageOnce(ctx context.Context) {
	if !w.mayWriteNow() || (w.cfg.Ready != nil && !w.cfg.Ready()) {
		return
	}
	targets := w.usageTargets()
	if len(targets) == 0 {
		return
	}
	allocated := map[string]quota.Resources{}
	for _, v := range w.cfg.Manager.Queues() {
		allocated[v.Key] = v.Allocated
	}
	for _, t := range targets {
		alloc, known := allocated[t.key]
		if !known {
			continue
		}
		patch := usagePatch(t.api.Usage, t.obj, alloc)
		if patch == nil {
			continue
		}
		if err := w.patchStatus(ctx, t, patch); err != nil {
			klog.V(2).InfoS("Writing queue usage failed; will retry", "queue", t.key, "err", err)
		}
	}
}

// usageTargets lists the objects of watched APIs that carry usage.
func (w *Watcher) usageTargets() []usageTarget {
	w.mu.Lock()
	defer w.mu.Unlock()
	var out []usageTarget
	for key, byAPI := range w.objects {
		for gvr, obj := range byAPI {
			if a, watched := w.queues.Lookup(gvr); watched && a.API.Usage != "" {
				out = append(out, usageTarget{api: a.API, hasStatus: a.HasStatus, key: key, obj: obj})
			}
		}
	}
	return out
}

func (w *Watcher) patchStatus(ctx context.Context, t usageTarget, patch map[string]any) error {
	body, err := json.Marshal(patch)
	if err != nil {
		return err
	}
	var sub []string
	if t.hasStatus {
		sub = []string{"status"}
	}
	_, err = w.cfg.Client.Resource(t.api.Resource).Namespace(t.obj.GetNamespace()).
		Patch(ctx, t.obj.GetName(), types.MergePatchType, body, metav1.PatchOptions{FieldManager: "lockstep"}, sub...)
	if apierrors.IsNotFound(err) {
		return nil // deleted meanwhile
	}
	return err
}

// usagePatch is the merge patch that writes alloc under status.<field>, nil when the object
// already says it.
func usagePatch(field string, obj *unstructured.Unstructured, alloc quota.Resources) map[string]any {
	want := usage(alloc)
	have, _, _ := unstructured.NestedMap(obj.Object, "status", field)
	for name, v := range want {
		if !sameQuantity(have[name], v) {
			return map[string]any{"status": map[string]any{field: want}}
		}
	}
	return nil
}

// usage is alloc as a resource list of the resources lockstep counts, written as the projects'
// own writers format them. A count below zero, which a lost update could leave for a moment,
// is written as 0.
func usage(alloc quota.Resources) map[string]any {
	return map[string]any{
		string(corev1.ResourceCPU):    resource.NewMilliQuantity(max(alloc.MilliCPU, 0), resource.DecimalSI).String(),
		string(corev1.ResourceMemory): resource.NewQuantity(max(alloc.Memory, 0), resource.BinarySI).String(),
		string(wellknown.ResourceGPU): resource.NewQuantity(max(alloc.GPU, 0), resource.DecimalSI).String(),
	}
}

// sameQuantity compares a quantity as the apiserver returned it (a string, or a number when
// someone wrote one) with one lockstep would write: "1000m" and "1" are the same.
func sameQuantity(have, want any) bool {
	var text string
	switch x := have.(type) {
	case string:
		text = x
	case int64:
		text = strconv.FormatInt(x, 10)
	case float64:
		text = strconv.FormatFloat(x, 'f', -1, 64)
	default:
		return false
	}
	a, errA := resource.ParseQuantity(text)
	b, errB := resource.ParseQuantity(fmt.Sprint(want))
	return errA == nil && errB == nil && a.Cmp(b) == 0
}
