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

// --- one node: does a pod fit, and if not why -------------------------------------------------

// NodeState is one node as a filter decision sees it.
type NodeState struct {
	// Seen is false for a node that lockstep's informer has not delivered yet.
	Seen bool
	// Free is what the node has left after the pods bound there.
	Free Resources
	// Leaving is what pods being deleted hold of the node, counted in Free as taken. The
	// scheduler counts them too until they are gone, so a node it offers with room only
	// without them means their deletion reached the scheduler before lockstep's informer: the
	// scheduler retries a pod the moment a pod is deleted, and lockstep refusing it then on a
	// stale view would leave the pod waiting for some later event (up to five minutes).
	Leaving Resources
	// Held is what reservations of other gangs set aside on the node.
	Held Resources
}

// Holders names the gangs holding capacity on a node. It is asked only when a node fails for that
// reason, so that the usual passing node costs no lookup.
type Holders func(node string) string

// Refusal is which of WhyNot's checks turned a node down.
type Refusal uint8

const (
	// Fits: none did.
	Fits Refusal = iota
	// NotSeen: lockstep has not seen the node.
	NotSeen
	// ShortBesideBound: the pods bound there leave too little.
	ShortBesideBound
	// ReservedForOthers: what bound pods leave is held by other gangs' reservations.
	ReservedForOthers
)

// Preemptible reports whether evicting pods bound to the node might cure the refusal, so that
// the scheduler should try its preemption there. Only a shortfall beside bound pods might: a node
// lockstep has not seen and a gang's reservation are no pods to evict. Whether the scheduler's
// chosen victims do cure it is decided when it asks (the preempt verb).
func (r Refusal) Preemptible() bool { return r == ShortBesideBound }

// WhyNot says why req does not fit on a node, in the words the scheduler shows for the node, and
// which check refused it; "" and Fits when it fits. The checks run in order, each paired with the
// words of its reason, and the first to fail speaks.
//
// Filter asks this of every offered node, thousands per call, and nearly all fit: the node comes
// by pointer, the checks are small enough for the compiler to inline, and a reason is worded, in
// a call of its own, only when a check fails.
func WhyNot(req Resources, node string, n *NodeState, holders Holders) (string, Refusal) {
	if !seen(n) {
		return notSeen, NotSeen
	}
	if short := shortBesideBound(req, n); short != "" {
		return insufficient(req, n, short), ShortBesideBound
	}
	// Nothing held leaves nothing more to check: the usual case, spared the arithmetic.
	if !n.Held.IsZero() {
		if short := shortOutsideReservations(req, n); short != "" {
			return reservedForOthers(req, node, n, holders, short), ReservedForOthers
		}
	}
	return "", Fits
}

// seen is false for a node lockstep cannot account for, which it refuses: passing it would offer
// capacity that pods lockstep has not counted may hold.
func seen(n *NodeState) bool { return n.Seen }

const notSeen = "lockstep has not seen this node yet"

// shortBesideBound checks req against what bound pods leave, returning the resource short, ""
// when req fits.
func shortBesideBound(req Resources, n *NodeState) corev1.ResourceName {
	_, short := req.FitsIn(n.Free.Add(n.Leaving))
	return short
}

func insufficient(req Resources, n *NodeState, short corev1.ResourceName) string {
	return fmt.Sprintf("insufficient %s: needs %s, %s free", short, Amount(short, req.Get(short)), Amount(short, max(n.Free.Get(short), 0)))
}

// shortOutsideReservations checks req against what bound pods and other gangs' reservations
// leave: the usual reason a node that looks free is refused.
func shortOutsideReservations(req Resources, n *NodeState) corev1.ResourceName {
	_, short := req.FitsIn(n.Free.Add(n.Leaving).Sub(n.Held))
	return short
}

// reservedForOthers words a shortOutsideReservations failure, naming the gangs holding the node.
func reservedForOthers(req Resources, node string, n *NodeState, holders Holders, short corev1.ResourceName) string {
	left := n.Free.Add(n.Leaving).Sub(n.Held)
	return fmt.Sprintf("%s reserved for gang %s: needs %s, %s free outside reservations",
		FormatQuantity(short, n.Held.Get(short)), holders(node), Amount(short, req.Get(short)), Amount(short, max(left.Get(short), 0)))
}
