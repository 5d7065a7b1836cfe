// Package builders makes Kubernetes objects for lockstep's tests in one readable line, in the
// style of Kueue's test wrappers:
//
//	builders.Pod("default", "w-0").GPU(2).CPU("1").Memory("1Gi").Gang("mpi", 5).Created(t0).Obj()
//	builders.Node("n1").GPU(8).CPU("64").Memory("256Gi").Pods(110).Obj()
//
// Every setter returns the builder; Obj returns a fresh deep copy, so one builder can stamp out
// many variants. The objects pass API validation (extended resources carry equal requests and
// limits), so end-to-end tests can create them on a real apiserver.
//
// The package imports no lockstep package but the vocabulary (wellknown): the gang package's
// internal tests use it, and Go forbids the import cycle that importing gang would make.
package builders

import (
	"strconv"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/lockstep-sched/lockstep/wellknown"
)

// DefaultImage is the image of the container every built pod starts with.
const DefaultImage = "registry.k8s.io/pause:3.10"

// UIDFor is the UID Pod gives a pod unless told otherwise: stable and readable in failures.
func UIDFor(namespace, name string) types.UID {
	return types.UID("uid-" + namespace + "-" + name)
}

// PodBuilder builds a *corev1.Pod. Resource setters act on the first container.
type PodBuilder struct {
	pod    corev1.Pod
	uidSet bool
}

// Pod starts a pod with one container and no requests.
func Pod(namespace, name string) *PodBuilder {
	return &PodBuilder{pod: corev1.Pod{
		TypeMeta:   metav1.TypeMeta{Kind: "Pod", APIVersion: "v1"},
		ObjectMeta: metav1.ObjectMeta{Namespace: namespace, Name: name},
		Spec: corev1.PodSpec{
			Containers: []corev1.Container{{Name: "main", Image: DefaultImage}},
		},
	}}
}

// Obj returns a deep copy of the pod built so far. Its UID is UIDFor(namespace, name) unless UID
// set one.
func (b *PodBuilder) Obj() *corev1.Pod {
	p := b.pod.DeepCopy()
	if !b.uidSet {
		p.UID = UIDFor(p.Namespace, p.Name)
	}
	return p
}

// Clone returns an independent builder with the same settings.
func (b *PodBuilder) Clone() *PodBuilder {
	return &PodBuilder{pod: *b.pod.DeepCopy(), uidSet: b.uidSet}
}

// Name renames the pod (and its derived UID, unless UID was set).
func (b *PodBuilder) Name(name string) *PodBuilder {
	b.pod.Name = name
	return b
}

// UID sets the UID; an empty one leaves the pod without a UID.
func (b *PodBuilder) UID(uid types.UID) *PodBuilder {
	b.pod.UID, b.uidSet = uid, true
	return b
}

// Label sets a label.
func (b *PodBuilder) Label(key, value string) *PodBuilder {
	if b.pod.Labels == nil {
		b.pod.Labels = map[string]string{}
	}
	b.pod.Labels[key] = value
	return b
}

// Annotation sets an annotation, verbatim: the way to write invalid gang values.
func (b *PodBuilder) Annotation(key, value string) *PodBuilder {
	if b.pod.Annotations == nil {
		b.pod.Annotations = map[string]string{}
	}
	b.pod.Annotations[key] = value
	return b
}

// WithoutAnnotation removes an annotation.
func (b *PodBuilder) WithoutAnnotation(key string) *PodBuilder {
	delete(b.pod.Annotations, key)
	return b
}

// Gang makes the pod a member of gang name needing minAvailable members placed together.
func (b *PodBuilder) Gang(name string, minAvailable int) *PodBuilder {
	return b.Annotation(wellknown.AnnotationGangName, name).Annotation(wellknown.AnnotationGangMinAvailable, strconv.Itoa(minAvailable))
}

// GangName sets only the gang name annotation.
func (b *PodBuilder) GangName(name string) *PodBuilder {
	return b.Annotation(wellknown.AnnotationGangName, name)
}

// MinAvailable sets the min-available annotation verbatim ("0", "abc" are allowed).
func (b *PodBuilder) MinAvailable(v string) *PodBuilder {
	return b.Annotation(wellknown.AnnotationGangMinAvailable, v)
}

// WaitingTime sets the waiting-time annotation verbatim, e.g. "30s".
func (b *PodBuilder) WaitingTime(d string) *PodBuilder {
	return b.Annotation(wellknown.AnnotationGangWaitingTime, d)
}

// TotalNumber sets the total-number annotation.
func (b *PodBuilder) TotalNumber(n int) *PodBuilder {
	return b.Annotation(wellknown.AnnotationGangTotalNumber, strconv.Itoa(n))
}

// Created sets the creation timestamp (lockstep orders gang members by it).
func (b *PodBuilder) Created(t time.Time) *PodBuilder {
	b.pod.CreationTimestamp = metav1.NewTime(t)
	return b
}

// Node sets spec.nodeName: the pod is bound there.
func (b *PodBuilder) Node(name string) *PodBuilder {
	b.pod.Spec.NodeName = name
	return b
}

// SchedulerName sets spec.schedulerName.
func (b *PodBuilder) SchedulerName(name string) *PodBuilder {
	b.pod.Spec.SchedulerName = name
	return b
}

// Priority sets spec.priority.
func (b *PodBuilder) Priority(p int32) *PodBuilder {
	b.pod.Spec.Priority = &p
	return b
}

// Phase sets status.phase (Succeeded and Failed pods hold no capacity).
func (b *PodBuilder) Phase(phase corev1.PodPhase) *PodBuilder {
	b.pod.Status.Phase = phase
	return b
}

// SchedulingGates adds scheduling gates.
func (b *PodBuilder) SchedulingGates(names ...string) *PodBuilder {
	for _, n := range names {
		b.pod.Spec.SchedulingGates = append(b.pod.Spec.SchedulingGates, corev1.PodSchedulingGate{Name: n})
	}
	return b
}

// Unschedulable adds the PodScheduled=False condition the scheduler writes, with message.
func (b *PodBuilder) Unschedulable(message string) *PodBuilder {
	b.pod.Status.Conditions = append(b.pod.Status.Conditions, corev1.PodCondition{
		Type: corev1.PodScheduled, Status: corev1.ConditionFalse, Reason: corev1.PodReasonUnschedulable, Message: message,
	})
	return b
}

// Toleration adds a toleration.
func (b *PodBuilder) Toleration(t corev1.Toleration) *PodBuilder {
	b.pod.Spec.Tolerations = append(b.pod.Spec.Tolerations, t)
	return b
}

// Affinity sets the pod's affinity.
func (b *PodBuilder) Affinity(a *corev1.Affinity) *PodBuilder {
	b.pod.Spec.Affinity = a
	return b
}

// SpreadConstraint adds a topology spread constraint over the pod's own labels.
func (b *PodBuilder) SpreadConstraint(topologyKey string, maxSkew int32, when corev1.UnsatisfiableConstraintAction) *PodBuilder {
	b.pod.Spec.TopologySpreadConstraints = append(b.pod.Spec.TopologySpreadConstraints, corev1.TopologySpreadConstraint{
		MaxSkew:           maxSkew,
		TopologyKey:       topologyKey,
		WhenUnsatisfiable: when,
		LabelSelector:     &metav1.LabelSelector{MatchLabels: b.pod.Labels},
	})
	return b
}

// ControlledBy makes the pod's controller an object of the given kind.
func (b *PodBuilder) ControlledBy(apiVersion, kind, name string) *PodBuilder {
	controller := true
	b.pod.OwnerReferences = append(b.pod.OwnerReferences, metav1.OwnerReference{
		APIVersion: apiVersion, Kind: kind, Name: name, UID: UIDFor(b.pod.Namespace, kind+"/"+name), Controller: &controller,
	})
	return b
}

// PodGroup makes the pod a member of a Kubernetes PodGroup (scheduling.k8s.io/v1alpha2) through
// spec.schedulingGroup.podGroupName.
func (b *PodBuilder) PodGroup(name string) *PodBuilder {
	b.pod.Spec.SchedulingGroup = &corev1.PodSchedulingGroup{PodGroupName: &name}
	return b
}

// NodeSelector sets one node selector entry.
func (b *PodBuilder) NodeSelector(key, value string) *PodBuilder {
	if b.pod.Spec.NodeSelector == nil {
		b.pod.Spec.NodeSelector = map[string]string{}
	}
	b.pod.Spec.NodeSelector[key] = value
	return b
}

// Request sets a request of the first container.
func (b *PodBuilder) Request(name corev1.ResourceName, quantity string) *PodBuilder {
	c := &b.pod.Spec.Containers[0]
	if c.Resources.Requests == nil {
		c.Resources.Requests = corev1.ResourceList{}
	}
	c.Resources.Requests[name] = resource.MustParse(quantity)
	return b
}

// Limit sets a limit of the first container.
func (b *PodBuilder) Limit(name corev1.ResourceName, quantity string) *PodBuilder {
	c := &b.pod.Spec.Containers[0]
	if c.Resources.Limits == nil {
		c.Resources.Limits = corev1.ResourceList{}
	}
	c.Resources.Limits[name] = resource.MustParse(quantity)
	return b
}

// CPU sets the first container's CPU request, e.g. "1" or "500m".
func (b *PodBuilder) CPU(quantity string) *PodBuilder { return b.Request(corev1.ResourceCPU, quantity) }

// Memory sets the first container's memory request, e.g. "1Gi".
func (b *PodBuilder) Memory(quantity string) *PodBuilder {
	return b.Request(corev1.ResourceMemory, quantity)
}

// GPU sets the first container's nvidia.com/gpu request and limit (an extended resource must
// have both, equal).
func (b *PodBuilder) GPU(n int64) *PodBuilder {
	q := strconv.FormatInt(n, 10)
	return b.Request(wellknown.ResourceGPU, q).Limit(wellknown.ResourceGPU, q)
}

// InitContainer adds an init container with the given requests (for tests of the effective
// request computation).
func (b *PodBuilder) InitContainer(name string, requests corev1.ResourceList) *PodBuilder {
	b.pod.Spec.InitContainers = append(b.pod.Spec.InitContainers, corev1.Container{
		Name: name, Image: DefaultImage, Resources: corev1.ResourceRequirements{Requests: requests},
	})
	return b
}

// Overhead sets spec.overhead.
func (b *PodBuilder) Overhead(list corev1.ResourceList) *PodBuilder {
	b.pod.Spec.Overhead = list
	return b
}
