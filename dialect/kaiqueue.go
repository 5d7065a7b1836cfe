package dialect

import (
	"fmt"
	"math"
	"strings"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"

	"github.com/lockstep-sched/lockstep/quota"
	"github.com/lockstep-sched/lockstep/wellknown"
)

// KAIQueue is NVIDIA KAI Scheduler's Queue (scheduling.run.ai/v2, cluster-scoped), as its
// proportion plugin reads it (github.com/kai-scheduler/KAI-Scheduler v0.17.0, d5bc503a:
// pkg/apis/scheduling/v2 and plugins/proportion): a tree by spec.parentQueue, and per resource a quota (what the queue deserves), a
// limit, and an overQuotaWeight by which what is left over the quotas is shared. A PodGroup's
// spec.queue or a pod's kai.scheduler/queue label names it. lockstep writes none of its status:
// KAI writes its own units there (GPU fractions, millicpus, megabytes).
var KAIQueue = QueueAPI{Dialect: "KAI Scheduler", Resource: schema.GroupVersionResource{Group: "scheduling.run.ai", Version: "v2", Resource: "queues"},
	Kind: KindKAIQueue, reads: []queueReader{readKAIParent, readKAIPriority, readKAIResources}}

// kaiDefaultPriority is a KAI queue's priority when spec.priority is absent
// (DefaultQueuePriority).
const kaiDefaultPriority = 100

// kaiUnlimited is KAI's word for "no bound" in a quota or a limit (UnlimitedResourceQuantity).
const kaiUnlimited = -1

func readKAIParent(r fields, q *quota.Queue) error {
	raw, found, _ := unstructured.NestedFieldNoCopy(r.obj, "spec", "parentQueue")
	if !found || raw == nil || raw == "" {
		return nil
	}
	parent, ok := raw.(string)
	switch {
	case !ok:
		return r.bad("spec.parentQueue", fmt.Sprint(raw), "must be a queue's name")
	case parent == q.Name:
		return r.bad("spec.parentQueue", parent, "a queue cannot be its own parent")
	}
	q.Parent, q.ParentField = parent, "spec.parentQueue"
	return nil
}

// readKAIPriority reads spec.priority, 100 when absent. Over KAI's default, a higher queue's
// gangs go first, as in KAI, which divides what is over the quotas among higher queues first.
func readKAIPriority(r fields, q *quota.Queue) error {
	p, ok, err := r.int("spec", "priority")
	switch {
	case err != nil:
		return err
	case !ok:
		p = kaiDefaultPriority
	case p < math.MinInt32 || p > math.MaxInt32:
		return r.bad("spec.priority", fmt.Sprint(p), "must fit in 32 bits")
	}
	q.Priority = int32(p)
	return nil
}

// kaiResource is one of a KAI queue's resources: its field and how many of lockstep's units
// (GPUs, millicores, bytes) one of KAI's is.
type kaiResource struct {
	field string
	name  corev1.ResourceName
	bit   quota.ResourceSet
	unit  int64
}

var kaiResources = []kaiResource{
	{"gpu", wellknown.ResourceGPU, quota.GPU, 1},
	{"cpu", corev1.ResourceCPU, quota.CPU, 1},            // millicpus
	{"memory", corev1.ResourceMemory, quota.Memory, 1e6}, // megabytes, 10^6 bytes
}

// readKAIResources reads spec.resources. KAI's webhook requires the field. A resource's quota of
// -1 deserves all the queue asks; its limit of -1 is none, while an absent or 0 limit allows
// none of it, as KAI's over-limit check reads it. lockstep weighs a queue by one number: the GPU
// overQuotaWeight, else the cpu one, at least 1 (KAI gives a weight of 0 nothing over its quota).
func readKAIResources(r fields, q *quota.Queue) error {
	if _, err := r.mapField("must be an object of gpu, cpu and memory", "spec", "resources"); err != nil {
		return err
	}
	if raw, found, _ := unstructured.NestedFieldNoCopy(r.obj, "spec", "resources"); !found || raw == nil {
		return r.bad("spec.resources", "", "must be given: KAI's webhook refuses a queue without it")
	}
	weights := map[string]int64{}
	for _, res := range kaiResources {
		w, err := readKAIResource(r, q, res)
		if err != nil {
			return err
		}
		weights[res.field] = w
	}
	q.Weight, q.WeighsOverQuota = 1, true
	switch {
	case weights["gpu"] > 0:
		q.Weight = weights["gpu"]
	case weights["cpu"] > 0:
		q.Weight = weights["cpu"]
	}
	return nil
}

// readKAIResource reads one resource's quota, limit and overQuotaWeight into q, returning the
// weight.
func readKAIResource(r fields, q *quota.Queue, res kaiResource) (int64, error) {
	path := []string{"spec", "resources", res.field}
	if _, err := r.mapField("must be an object of quota, limit and overQuotaWeight", path...); err != nil {
		return 0, err
	}
	quotaAmount, err := r.kaiAmount(res, append(path, "quota"))
	if err != nil {
		return 0, err
	}
	switch {
	case quotaAmount == kaiUnlimited:
		q.DeservesAll |= res.bit
	default:
		q.Min = withAmount(q.Min, res.name, quotaAmount*res.unit)
	}
	limit, err := r.kaiAmount(res, append(path, "limit"))
	if err != nil {
		return 0, err
	}
	if limit != kaiUnlimited {
		q.Capability.Named |= res.bit
		q.Capability.Amount = withAmount(q.Capability.Amount, res.name, limit*res.unit)
		if quotaAmount > limit {
			return 0, r.bad(fieldPath(path, "quota"), fmt.Sprint(quotaAmount), fmt.Sprintf("more than %s, %d: a queue cannot deserve more than its limit", fieldPath(path, "limit"), limit))
		}
	}
	w, _, err := r.int(append(path, "overQuotaWeight")...)
	switch {
	case err != nil:
		return 0, err
	case w < 0 || w > math.MaxInt32:
		return 0, r.bad(fieldPath(path, "overQuotaWeight"), fmt.Sprint(w), fmt.Sprintf("must be between 0 and %d", math.MaxInt32))
	}
	return w, nil
}

// kaiAmount reads a quota or a limit: a whole number, 0 when absent, -1 for unbounded. lockstep
// counts whole GPUs, so a fraction of one is refused rather than rounded.
func (r fields) kaiAmount(res kaiResource, path []string) (int64, error) {
	n, _, err := r.int(path...)
	switch {
	case err != nil:
		if res.field == "gpu" {
			return 0, r.bad(fieldPathOf(path), fmt.Sprint(r.raw(path)), "must be a whole number of GPUs: lockstep does not share a GPU between pods")
		}
		return 0, err
	case n < kaiUnlimited:
		return 0, r.bad(fieldPathOf(path), fmt.Sprint(n), "must be -1 (no bound) or more")
	case n*res.unit > MaxQuantity:
		return 0, r.bad(fieldPathOf(path), fmt.Sprint(n), fmt.Sprintf("must be at most %d", MaxQuantity/res.unit))
	}
	return n, nil
}

func (r fields) raw(path []string) any {
	v, _, _ := unstructured.NestedFieldNoCopy(r.obj, path...)
	return v
}

func fieldPath(path []string, last string) string { return fieldPathOf(append(path, last)) }

func fieldPathOf(path []string) string { return strings.Join(path, ".") }
