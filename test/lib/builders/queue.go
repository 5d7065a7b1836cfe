package builders

import (
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	"github.com/lockstep-sched/lockstep/wellknown"
)

// The other gang schedulers' group and queue objects, built as their users write them. They are
// unstructured: the suite speaks to them through the dynamic client, with the projects' own CRDs
// installed (test/lib/thirdparty), and this package imports none of those projects.
//
//	builders.VolcanoQueue("team-a").Weight(3).Capability("nvidia.com/gpu", "4").Obj()
//	builders.VolcanoPodGroup("ns", "g").MinMember(5).Queue("team-a").Obj()
//	builders.ElasticQuota("ns", "quota").Min("nvidia.com/gpu", "2").Max("nvidia.com/gpu", "2").Obj()

// ObjectBuilder builds an *unstructured.Unstructured; Obj returns a fresh deep copy.
type ObjectBuilder struct {
	obj unstructured.Unstructured
}

func object(apiVersion, kind, namespace, name string) *ObjectBuilder {
	b := &ObjectBuilder{obj: unstructured.Unstructured{Object: map[string]any{
		"apiVersion": apiVersion, "kind": kind, "spec": map[string]any{},
	}}}
	b.obj.SetName(name)
	if namespace != "" {
		b.obj.SetNamespace(namespace)
	}
	return b
}

// Obj returns a deep copy of the object built so far.
func (b *ObjectBuilder) Obj() *unstructured.Unstructured { return b.obj.DeepCopy() }

// Clone returns an independent builder with the same settings.
func (b *ObjectBuilder) Clone() *ObjectBuilder { return &ObjectBuilder{obj: *b.obj.DeepCopy()} }

// Set sets a field verbatim at path (e.g. "spec", "capability", "nvidia.com/gpu"): the way to
// write values the typed setters would not, such as "-1" or "lots".
func (b *ObjectBuilder) Set(value any, path ...string) *ObjectBuilder {
	if err := unstructured.SetNestedField(b.obj.Object, value, path...); err != nil {
		panic(err) // a path through a non-map: a bug in the test
	}
	return b
}

// VolcanoQueue starts a Volcano Queue (scheduling.volcano.sh/v1beta1, cluster-scoped) as
// Volcano's admission webhook would leave one that says nothing: weight 1, reclaimable.
func VolcanoQueue(name string) *ObjectBuilder {
	return object("scheduling.volcano.sh/v1beta1", "Queue", "", name).Weight(1).Reclaimable(true)
}

// KubeBatchQueue starts a kube-batch Queue (scheduling.incubator.k8s.io/v1alpha1,
// cluster-scoped) of weight 1.
func KubeBatchQueue(name string) *ObjectBuilder {
	return object("scheduling.incubator.k8s.io/v1alpha1", "Queue", "", name).Weight(1)
}

// ElasticQuota starts a scheduler-plugins ElasticQuota (scheduling.x-k8s.io/v1alpha1) of
// namespace, with neither min nor max.
func ElasticQuota(namespace, name string) *ObjectBuilder {
	return object("scheduling.x-k8s.io/v1alpha1", "ElasticQuota", namespace, name)
}

// KoordinatorElasticQuota starts a Koordinator ElasticQuota (scheduling.sigs.k8s.io/v1alpha1) of
// namespace, with neither min nor max.
func KoordinatorElasticQuota(namespace, name string) *ObjectBuilder {
	return object("scheduling.sigs.k8s.io/v1alpha1", "ElasticQuota", namespace, name)
}

// VolcanoPodGroup starts a Volcano PodGroup (scheduling.volcano.sh/v1beta1) of minMember 1 that
// names no queue.
func VolcanoPodGroup(namespace, name string) *ObjectBuilder {
	return object("scheduling.volcano.sh/v1beta1", "PodGroup", namespace, name).MinMember(1)
}

// CoschedulingPodGroup starts a scheduler-plugins PodGroup (scheduling.x-k8s.io/v1alpha1) of
// minMember 1.
func CoschedulingPodGroup(namespace, name string) *ObjectBuilder {
	return object("scheduling.x-k8s.io/v1alpha1", "PodGroup", namespace, name).MinMember(1)
}

// Weight sets a queue's spec.weight.
func (b *ObjectBuilder) Weight(w int64) *ObjectBuilder { return b.Set(w, "spec", "weight") }

// Reclaimable sets a Volcano Queue's spec.reclaimable.
func (b *ObjectBuilder) Reclaimable(r bool) *ObjectBuilder { return b.Set(r, "spec", "reclaimable") }

// Priority sets a Volcano Queue's spec.priority.
func (b *ObjectBuilder) Priority(p int64) *ObjectBuilder { return b.Set(p, "spec", "priority") }

// Capability sets one resource of a queue's spec.capability.
func (b *ObjectBuilder) Capability(resource, quantity string) *ObjectBuilder {
	return b.Set(quantity, "spec", "capability", resource)
}

// Guarantee sets one resource of a Volcano Queue's spec.guarantee.resource.
func (b *ObjectBuilder) Guarantee(resource, quantity string) *ObjectBuilder {
	return b.Set(quantity, "spec", "guarantee", "resource", resource)
}

// Parent sets a Volcano Queue's spec.parent: the queue it nests under (Volcano's hierarchical
// queues).
func (b *ObjectBuilder) Parent(name string) *ObjectBuilder { return b.Set(name, "spec", "parent") }

// Deserved sets one resource of a Volcano Queue's spec.deserved (its capacity plugin's share).
func (b *ObjectBuilder) Deserved(resource, quantity string) *ObjectBuilder {
	return b.Set(quantity, "spec", "deserved", resource)
}

// State sets a Volcano Queue's status.state (Open, Closed, Closing). The apiserver drops status
// on create where the CRD has a status subresource, as Volcano's does: write it there after.
func (b *ObjectBuilder) State(state string) *ObjectBuilder { return b.Set(state, "status", "state") }

// Min and Max set one resource of an ElasticQuota's spec.min and spec.max.
func (b *ObjectBuilder) Min(resource, quantity string) *ObjectBuilder {
	return b.Set(quantity, "spec", "min", resource)
}

func (b *ObjectBuilder) Max(resource, quantity string) *ObjectBuilder {
	return b.Set(quantity, "spec", "max", resource)
}

// MinMember sets a PodGroup's spec.minMember.
func (b *ObjectBuilder) MinMember(n int64) *ObjectBuilder { return b.Set(n, "spec", "minMember") }

// Queue sets a PodGroup's spec.queue.
func (b *ObjectBuilder) Queue(name string) *ObjectBuilder { return b.Set(name, "spec", "queue") }

// MinResources sets one resource of a PodGroup's spec.minResources.
func (b *ObjectBuilder) MinResources(resource, quantity string) *ObjectBuilder {
	return b.Set(quantity, "spec", "minResources", resource)
}

// VolcanoGroup makes the pod a member of Volcano PodGroup name, as Volcano's job controller
// writes its pods: annotation scheduling.k8s.io/group-name and schedulerName volcano.
func (b *PodBuilder) VolcanoGroup(name string) *PodBuilder {
	return b.Annotation(wellknown.AnnotationGroupName, name).SchedulerName("volcano")
}

// CoschedulingGroup makes the pod a member of scheduler-plugins PodGroup name, by label
// scheduling.x-k8s.io/pod-group.
func (b *PodBuilder) CoschedulingGroup(name string) *PodBuilder {
	return b.Label(wellknown.LabelCoschedulingPodGroup, name)
}
