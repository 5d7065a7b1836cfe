package dra

import (
	"context"
	"fmt"
	"slices"

	resourceapi "k8s.io/api/resource/v1"
	"k8s.io/dynamic-resource-allocation/cel"

	"github.com/lockstep-sched/lockstep/wellknown"
)

// DefaultGPUClasses are the DeviceClasses of whole GPUs and MIG devices that NVIDIA's DRA driver
// for GPUs ships (its chart's deviceclass-gpu.yaml and deviceclass-mig.yaml, read at
// kubernetes-sigs/dra-driver-nvidia-gpu chart 0.5.0-dev, May 2026). A class also counts as GPUs
// when its spec.extendedResourceName is nvidia.com/gpu, as the driver's gpu.nvidia.com is.
var DefaultGPUClasses = []string{"gpu.nvidia.com", "mig.nvidia.com"}

// class is a DeviceClass as lockstep reads it: whether its devices count as GPUs, and its
// selectors compiled by the DRA module's own CEL compiler.
type class struct {
	obj       *resourceapi.DeviceClass
	gpu       bool
	selectors []cel.CompilationResult
	// err is a selector that does not compile; the class then selects nothing.
	err error
}

func newClass(obj *resourceapi.DeviceClass, named map[string]bool, cache *cel.Cache) *class {
	c := &class{obj: obj, gpu: named[obj.Name] || servesGPUs(obj)}
	for i, s := range obj.Spec.Selectors {
		if s.CEL == nil {
			continue
		}
		compiled := cache.GetOrCompile(s.CEL.Expression)
		if compiled.Error != nil {
			c.err = fmt.Errorf("DeviceClass %s: spec.selectors[%d].cel.expression: %v", obj.Name, i, compiled.Error)
			return c
		}
		c.selectors = append(c.selectors, compiled)
	}
	return c
}

func servesGPUs(obj *resourceapi.DeviceClass) bool {
	name := obj.Spec.ExtendedResourceName
	return name != nil && *name == string(wellknown.ResourceGPU)
}

// matches reports whether every selector of the class selects the device, as the allocator asks.
// A selector that fails on the device (an attribute it lacks, say) does not select it.
func (c *class) matches(ctx context.Context, driver string, d *resourceapi.Device) bool {
	if c.err != nil {
		return false
	}
	in := cel.Device{Driver: driver, Attributes: d.Attributes, Capacity: d.Capacity}
	for _, s := range c.selectors {
		if ok, _, err := s.DeviceMatches(ctx, in); err != nil || !ok {
			return false
		}
	}
	return true
}

// classNames are the names of the GPU classes among classes that select a device, sorted.
func gpuClassesOf(ctx context.Context, classes map[string]*class, driver string, d *resourceapi.Device) []string {
	var out []string
	for name, c := range classes {
		if c.gpu && c.matches(ctx, driver, d) {
			out = append(out, name)
		}
	}
	slices.Sort(out)
	return out
}
