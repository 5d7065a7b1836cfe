package dra

import (
	"context"
	"fmt"
	"slices"
	"strings"

	corev1 "k8s.io/api/core/v1"
	resourceapi "k8s.io/api/resource/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/util/sets"
	"k8s.io/dynamic-resource-allocation/structured"
)

// allocatorFeatures are those kube-scheduler 1.37 runs its allocator with by default
// (dynamicresources.AllocatorFeatures over its gates' defaults): an allocation lockstep plans is
// then one the scheduler finds too.
var allocatorFeatures = structured.Features{
	AdminAccess:            true,
	PrioritizedList:        true,
	DeviceTaints:           true,
	OptionalNodeOperations: true,
	DerivedAttributes:      true,
}

// Fits allocates claims on node as kube-scheduler's allocator would, beside the devices other
// claims' allocations take and those in held (devices lockstep keeps for other gangs' reserved
// members). It returns the devices the allocation would take, or why the claims do not fit. A
// claim allocated already fits only where its devices are; it takes nothing more.
func (inv *Inventory) Fits(ctx context.Context, node *corev1.Node, claims []*resourceapi.ResourceClaim, held []DeviceKey) ([]DeviceKey, error) {
	var pending []*resourceapi.ResourceClaim
	for _, c := range claims {
		if c.Status.Allocation == nil {
			pending = append(pending, c)
			continue
		}
		for _, r := range c.Status.Allocation.Devices.Results {
			if n := inv.DeviceNode(DeviceKey{r.Driver, r.Pool, r.Device}); n != "" && n != node.Name {
				return nil, fmt.Errorf("%s is allocated on node %s already", objectName(c), n)
			}
		}
	}
	if len(pending) == 0 {
		return nil, nil
	}
	state := structured.AllocatedState{AllocatedDevices: sets.New[structured.DeviceID]()}
	for k := range inv.takenBy {
		state.AllocatedDevices.Insert(structured.MakeDeviceID(k.Driver, k.Pool, k.Name))
	}
	for _, k := range held {
		state.AllocatedDevices.Insert(structured.MakeDeviceID(k.Driver, k.Pool, k.Name))
	}
	alloc, err := structured.NewAllocator(ctx, allocatorFeatures, state, classLister{inv}, inv.slicesFor(node.Name), inv.cache)
	if err != nil {
		return nil, fmt.Errorf("node %s: %w", node.Name, err)
	}
	results, err := alloc.Allocate(ctx, node, pending)
	switch {
	case err != nil:
		return nil, fmt.Errorf("node %s: %w", node.Name, err)
	case results == nil:
		return nil, fmt.Errorf("node %s has not the devices %s ask%s", node.Name, names(pending), inv.freeOf(node.Name, pending, held))
	}
	var took []DeviceKey
	for _, r := range results {
		for _, d := range r.Devices.Results {
			took = append(took, DeviceKey{d.Driver, d.Pool, d.Device})
		}
	}
	return took, nil
}

// slicesFor are the slices the allocator may take devices of for a node: the node's own, and
// those of many nodes, which it matches against the node itself.
func (inv *Inventory) slicesFor(node string) []*resourceapi.ResourceSlice {
	var out []*resourceapi.ResourceSlice
	for _, s := range inv.slices {
		if n := sliceNode(s); n == node || n == "" {
			out = append(out, s)
		}
	}
	return out
}

func names(claims []*resourceapi.ResourceClaim) string {
	out := make([]string, len(claims))
	for i, c := range claims {
		out[i] = objectName(c)
	}
	return strings.Join(out, ", ")
}

// freeOf says how many GPUs of the classes the claims ask are free on the node, for the reason.
func (inv *Inventory) freeOf(node string, claims []*resourceapi.ResourceClaim, held []DeviceKey) string {
	var classes []string
	for _, c := range claims {
		for _, r := range c.Spec.Devices.Requests {
			if r.Exactly != nil && inv.IsGPUClass(r.Exactly.DeviceClassName) && !slices.Contains(classes, r.Exactly.DeviceClassName) {
				classes = append(classes, r.Exactly.DeviceClassName)
			}
		}
	}
	var parts []string
	for _, class := range classes {
		parts = append(parts, fmt.Sprintf("%d of class %s free", inv.FreeOfClass(node, class, held), class))
	}
	if len(parts) == 0 {
		return ""
	}
	return " (" + strings.Join(parts, ", ") + ")"
}

// FreeOfClass is how many of the node's GPUs of the class no allocation and nothing held takes.
func (inv *Inventory) FreeOfClass(node, class string, held []DeviceKey) int64 {
	g := inv.nodes[node]
	if g == nil {
		return 0
	}
	var n int64
	for _, d := range g.Devices {
		if slices.Contains(d.Classes, class) && inv.takenBy[d.Key] == "" && !slices.Contains(held, d.Key) {
			n++
		}
	}
	return n
}

// classLister hands the allocator the inventory's classes.
type classLister struct{ inv *Inventory }

func (l classLister) List() ([]*resourceapi.DeviceClass, error) {
	out := make([]*resourceapi.DeviceClass, 0, len(l.inv.classes))
	for _, c := range l.inv.classes {
		out = append(out, c.obj)
	}
	return out, nil
}

func (l classLister) Get(name string) (*resourceapi.DeviceClass, error) {
	if c := l.inv.classes[name]; c != nil {
		return c.obj, nil
	}
	return nil, apierrors.NewNotFound(resourceapi.Resource("deviceclasses"), name)
}
