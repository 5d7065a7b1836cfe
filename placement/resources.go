package placement

import (
	"fmt"
	"strconv"
	"strings"

	corev1 "k8s.io/api/core/v1"
	resourcehelper "k8s.io/component-helpers/resource"

	"github.com/lockstep-sched/lockstep/wellknown"
)

// Resources is the small fixed set of quantities lockstep places by. A struct of int64s rather than
// a ResourceList keeps the per-node arithmetic in the filter hot path allocation-free.
type Resources struct {
	MilliCPU int64
	Memory   int64 // bytes
	GPU      int64
	Pods     int64
}

// PodRequests is what a pod takes from a node, computed the way kube-scheduler does (init
// containers, sidecars, overhead, pod-level resources), plus one pod slot.
func PodRequests(pod *corev1.Pod) Resources {
	list := resourcehelper.PodRequests(pod, resourcehelper.PodResourcesOptions{})
	return fromList(list, 1)
}

// NodeAllocatable is what the scheduler may hand out on a node.
func NodeAllocatable(node *corev1.Node) Resources {
	alloc := node.Status.Allocatable
	pods := alloc.Pods().Value()
	return fromList(alloc, pods)
}

// ListResources is a resource list (a PodGroup's minResources, say) as lockstep counts it; it
// takes no pod slot.
func ListResources(list corev1.ResourceList) Resources { return fromList(list, 0) }

func fromList(list corev1.ResourceList, pods int64) Resources {
	r := Resources{Pods: pods}
	if q, ok := list[corev1.ResourceCPU]; ok {
		r.MilliCPU = q.MilliValue()
	}
	if q, ok := list[corev1.ResourceMemory]; ok {
		r.Memory = q.Value()
	}
	if q, ok := list[wellknown.ResourceGPU]; ok {
		r.GPU = q.Value()
	}
	return r
}

func (r Resources) Add(o Resources) Resources {
	return Resources{r.MilliCPU + o.MilliCPU, r.Memory + o.Memory, r.GPU + o.GPU, r.Pods + o.Pods}
}

func (r Resources) Sub(o Resources) Resources {
	return Resources{r.MilliCPU - o.MilliCPU, r.Memory - o.Memory, r.GPU - o.GPU, r.Pods - o.Pods}
}

func (r Resources) IsZero() bool { return r == Resources{} }

// FitsIn reports whether r fits into free and, when it does not, the first resource that is short,
// GPUs first because that is what users of lockstep care about most.
func (r Resources) FitsIn(free Resources) (bool, corev1.ResourceName) {
	switch {
	case r.GPU > free.GPU:
		return false, wellknown.ResourceGPU
	case r.MilliCPU > free.MilliCPU:
		return false, corev1.ResourceCPU
	case r.Memory > free.Memory:
		return false, corev1.ResourceMemory
	case r.Pods > free.Pods:
		return false, corev1.ResourcePods
	}
	return true, ""
}

// Get returns one quantity in the unit FormatQuantity prints.
func (r Resources) Get(name corev1.ResourceName) int64 {
	switch name {
	case wellknown.ResourceGPU:
		return r.GPU
	case corev1.ResourceCPU:
		return r.MilliCPU
	case corev1.ResourceMemory:
		return r.Memory
	case corev1.ResourcePods:
		return r.Pods
	}
	return 0
}

// FormatQuantity renders a quantity of one resource for a human: "10 nvidia.com/gpu",
// "3500m cpu", "12Gi memory", "3 pods".
func FormatQuantity(name corev1.ResourceName, v int64) string {
	return Amount(name, v) + " " + string(name)
}

// Amount prints a quantity without its resource name: "10", "3500m", "12Gi".
func Amount(name corev1.ResourceName, v int64) string {
	switch name {
	case corev1.ResourceCPU:
		if v%1000 == 0 {
			return strconv.FormatInt(v/1000, 10)
		}
		return strconv.FormatInt(v, 10) + "m"
	case corev1.ResourceMemory:
		return formatBytes(v)
	}
	return strconv.FormatInt(v, 10)
}

func formatBytes(v int64) string {
	const unit = 1024
	suffixes := []string{"", "Ki", "Mi", "Gi", "Ti", "Pi"}
	i := 0
	for v >= unit && v%unit == 0 && i < len(suffixes)-1 {
		v /= unit
		i++
	}
	return fmt.Sprintf("%d%s", v, suffixes[i])
}

// String is the compact form used in /debug/gangs and logs.
func (r Resources) String() string {
	var parts []string
	if r.GPU != 0 {
		parts = append(parts, fmt.Sprintf("%s=%d", wellknown.ResourceGPU, r.GPU))
	}
	if r.MilliCPU != 0 {
		parts = append(parts, fmt.Sprintf("cpu=%dm", r.MilliCPU))
	}
	if r.Memory != 0 {
		parts = append(parts, "memory="+formatBytes(r.Memory))
	}
	return strings.Join(parts, ",")
}
