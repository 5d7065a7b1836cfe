package main

import (
	"context"
	"fmt"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/dynamic"

	"github.com/lockstep-sched/lockstep/test/lib/builders"
	"github.com/lockstep-sched/lockstep/wellknown"
)

// dialect is how a mode's pods ask for their scheduler and say they form a gang: every mode gets
// the same jobs, each written the way its scheduler's own users write them.
type dialect int

const (
	// annotations: Koordinator's gang annotations, which lockstep reads (and the stock scheduler
	// ignores), on pods for the shipped configuration's default-scheduler profile.
	annotations dialect = iota
	// xk8sPodGroup: a scheduler-plugins PodGroup (scheduling.x-k8s.io/v1alpha1, minMember) and
	// the pod-group label.
	xk8sPodGroup
	// volcanoPodGroup: a Volcano PodGroup (scheduling.volcano.sh/v1beta1, minMember,
	// minResources, the default queue), the scheduling.k8s.io/group-name annotation and
	// schedulerName volcano, as Volcano's job controller and the MPI operator write them. Pods
	// that are no gang's get no PodGroup from the bench: Volcano's controller-manager makes one
	// for each, as it does in a Volcano install.
	volcanoPodGroup
	// koordAnnotations: the same gang annotations with schedulerName koord-scheduler.
	koordAnnotations
)

const (
	// podGroupLabel is what scheduler-plugins' Coscheduling reads (v1alpha1.PodGroupLabel).
	podGroupLabel = "scheduling.x-k8s.io/pod-group"
	// volcanoGroupAnnotation names a pod's Volcano PodGroup (v1beta1.KubeGroupNameAnnotationKey).
	volcanoGroupAnnotation = "scheduling.k8s.io/group-name"
	volcanoQueue           = "default"
	volcanoSchedulerName   = "volcano"
	koordSchedulerName     = "koord-scheduler"
)

var (
	podGroupResource        = schema.GroupVersionResource{Group: "scheduling.x-k8s.io", Version: "v1alpha1", Resource: "podgroups"}
	volcanoPodGroupResource = schema.GroupVersionResource{Group: "scheduling.volcano.sh", Version: "v1beta1", Resource: "podgroups"}
)

// schedulerName is what the dialect's pods put in spec.schedulerName; "" leaves the default.
func (d dialect) schedulerName() string {
	switch d {
	case volcanoPodGroup:
		return volcanoSchedulerName
	case koordAnnotations:
		return koordSchedulerName
	}
	return ""
}

// podGroups is the resource of the dialect's PodGroups, and whether it has any.
func (d dialect) podGroups() (schema.GroupVersionResource, bool) {
	switch d {
	case xk8sPodGroup:
		return podGroupResource, true
	case volcanoPodGroup:
		return volcanoPodGroupResource, true
	}
	return schema.GroupVersionResource{}, false
}

// pod is a pod of the dialect that belongs to no gang.
func (d dialect) pod(name string, gpus int) *builders.PodBuilder {
	b := pod(name, gpus)
	if s := d.schedulerName(); s != "" {
		b.SchedulerName(s)
	}
	return b
}

// member is a pod of gang, which needs size members placed together.
func (d dialect) member(name, gang string, size, gpus int) *corev1.Pod {
	b := d.pod(name, gpus).Label(gangLabel, gang)
	switch d {
	case xk8sPodGroup:
		b.Label(podGroupLabel, gang)
	case volcanoPodGroup:
		b.Annotation(volcanoGroupAnnotation, gang)
	default:
		b.Gang(gang, size)
	}
	return b.Obj()
}

// podGroup is the gang's PodGroup in the dialect, nil when it has none. member is one member's
// pod: Volcano's PodGroup asks for size of its requests (minResources), as Volcano's job
// controller computes it, so that its enqueue action can admit the gang whole.
func (d dialect) podGroup(gang string, size int, member *corev1.Pod) *unstructured.Unstructured {
	gvr, ok := d.podGroups()
	if !ok {
		return nil
	}
	spec := map[string]any{"minMember": int64(size)}
	if d == volcanoPodGroup {
		spec["queue"] = volcanoQueue
		spec["minResources"] = timesRequests(member, size)
	}
	return &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": gvr.GroupVersion().String(),
		"kind":       "PodGroup",
		"metadata":   map[string]any{"name": gang, "namespace": namespace},
		"spec":       spec,
	}}
}

// timesRequests is n times a pod's requests, as a resource list in JSON form.
func timesRequests(p *corev1.Pod, n int) map[string]any {
	out := map[string]any{}
	for name, q := range p.Spec.Containers[0].Resources.Requests {
		total := q.DeepCopy()
		for range n - 1 {
			total.Add(q)
		}
		out[string(name)] = total.String()
	}
	return out
}

// createPodGroup creates the gang's PodGroup when the dialect has one.
func (d dialect) createPodGroup(ctx context.Context, dyn dynamic.Interface, gang string, size int, member *corev1.Pod) error {
	obj := d.podGroup(gang, size, member)
	if obj == nil {
		return nil
	}
	gvr, _ := d.podGroups()
	if _, err := dyn.Resource(gvr).Namespace(namespace).Create(ctx, obj, metav1.CreateOptions{}); err != nil {
		return fmt.Errorf("creating %s %s: %w", gvr.Resource, gang, err)
	}
	return nil
}

// deletePodGroup deletes the gang's PodGroup when the dialect has one.
func (d dialect) deletePodGroup(ctx context.Context, dyn dynamic.Interface, gang string) error {
	gvr, ok := d.podGroups()
	if !ok {
		return nil
	}
	return dyn.Resource(gvr).Namespace(namespace).Delete(ctx, gang, metav1.DeleteOptions{})
}

// gpusOf is a pod's nvidia.com/gpu request.
func gpusOf(p *corev1.Pod) int {
	q, ok := p.Spec.Containers[0].Resources.Requests[wellknown.ResourceGPU]
	if !ok {
		return 0
	}
	return int(q.Value())
}
