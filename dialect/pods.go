package dialect

import (
	"fmt"
	"strconv"

	corev1 "k8s.io/api/core/v1"

	"github.com/lockstep-sched/lockstep/gangspec"
	"github.com/lockstep-sched/lockstep/quota"
	"github.com/lockstep-sched/lockstep/wellknown"
)

// Pods reads a pod's gang membership in every dialect lockstep knows. The zero value is ready;
// it is safe for concurrent use (it holds nothing).
//
// Each family of markers below is one ecosystem's. A pod that carries markers of two families
// is refused naming both: lockstep does not guess which of two schedulers' rules a pod meant.
// Inside a family the ecosystem's own precedence holds (see koordinator).
type Pods struct{}

var _ gangspec.Reader = Pods{}

// claim is one family's reading of a pod; marker is what on the pod made it, for messages.
type claim struct {
	marker     string
	membership gangspec.Membership
}

// family reads one ecosystem's markers; ok is false when the pod carries none of them.
type family func(p podMarkers) (c claim, ok bool)

var families = []family{koordinator, coscheduling, groupName, kueue, kaiScheduler, yunikorn}

// yielding are markers written on pods by someone other than their author's gang scheduler, read
// in this order only when no family above claims the pod:
//   - Kueue's Workload annotation, which Kueue writes on every pod it admitted: an MPIJob that
//     Kueue admits keeps the gang its PodGroup describes;
//   - Kubernetes' spec.schedulingGroup, which 1.37's Job controller (gate WorkloadWithJob) writes
//     on the pods of every new Job, a basic PodGroup's unless the Job's spec.scheduling asks for a
//     gang: a Job whose pods carry Koordinator's annotations, or that Kueue admitted, keeps that
//     gang rather than being refused for two dialects or placed pod by pod.
var yielding = []family{kueueWorkload, native}

// podMarkers is the part of a pod the readers look at.
type podMarkers struct {
	namespace, name     string
	uid, schedulerName  string
	labels, annotations map[string]string
	// podGroupName is the pod's spec.schedulingGroup.podGroupName, nil when it names none.
	podGroupName *string
}

// object names the pod as messages do. It is built only for a message: filter reads every
// ordinary pod's markers, and most carry none.
func (p podMarkers) object() string { return "pod " + p.namespace + "/" + p.name }

func (Pods) Read(pod *corev1.Pod) gangspec.Membership {
	p := podMarkers{namespace: pod.Namespace, name: pod.Name, uid: string(pod.UID), schedulerName: pod.Spec.SchedulerName,
		labels: pod.Labels, annotations: pod.Annotations}
	if g := pod.Spec.SchedulingGroup; g != nil {
		p.podGroupName = g.PodGroupName
	}
	ms := readGang(p)
	ms.Queue = podQueue(p)
	return ms
}

// podQueue is the queue a pod's own markers name, gang or not; empty values are none, and the
// pod's namespace decides. A pod that names queues of several ecosystems goes by the first of:
// Koordinator's quota label (GetQuotaName), KAI's queue label, YuniKorn's queue keys.
func podQueue(p podMarkers) quota.Ref {
	if q := p.labels[wellknown.LabelKoordinatorQuotaName]; q != "" {
		return quota.Ref{Kind: KindKoordinatorElasticQuota, Name: q}
	}
	if q, ok := kaiPodQueue(p); ok {
		return q
	}
	q, _ := yunikornPodQueue(p)
	return q
}

func readGang(p podMarkers) gangspec.Membership {
	var first claim
	found := false
	for _, read := range families {
		c, ok := read(p)
		if !ok {
			continue
		}
		if found {
			return conflict(p, first, c)
		}
		first, found = c, true
	}
	for _, read := range yielding {
		if found {
			break
		}
		first, found = read(p)
	}
	if found && first.membership.Err == nil {
		first.membership.Topology, first.membership.Err = readTopology(p)
	}
	if found && first.membership.Err == nil {
		first.membership.KeepExtras, first.membership.Err = readKeepExtras(p)
	}
	return first.membership
}

// conflict refuses a pod two families claim. It keeps the first family's gang name, so that
// /debug/gangs lists the refused pod beside the gang mates it probably meant.
func conflict(p podMarkers, a, b claim) gangspec.Membership {
	return gangspec.Membership{Gang: a.membership.Gang, Err: fmt.Errorf(
		"%s carries the gang markers of two schedulers, %s and %s; lockstep reads one dialect per pod (docs/dialects.md says which keys belong to which), so remove one",
		p.object(), a.marker, b.marker)}
}

func labelMarker(key, value string) string      { return fmt.Sprintf("label %s=%q", key, value) }
func annotationMarker(key, value string) string { return fmt.Sprintf("annotation %s=%q", key, value) }

// koordinator reads Koordinator's markers in koord-scheduler's own order: the PodGroup label,
// then the lightweight labels (which Arena writes), then the gang annotations.
func koordinator(p podMarkers) (claim, bool) {
	if name, ok := p.labels[wellknown.LabelKoordinatorPodGroup]; ok {
		return groupClaim(p, labelMarker(wellknown.LabelKoordinatorPodGroup, name), name, "", KoordinatorKey), true
	}
	if name, ok := p.labels[wellknown.LabelLightweightGangName]; ok {
		return lightweight(p, name), true
	}
	if name, ok := p.annotations[wellknown.AnnotationGangName]; ok {
		c := claim{marker: annotationMarker(wellknown.AnnotationGangName, name)}
		c.membership.Gang = name
		c.membership.Spec, c.membership.Err = koordinatorAnnotations(p, name)
		return c, true
	}
	return claim{}, false
}

func coscheduling(p podMarkers) (claim, bool) {
	name, ok := p.labels[wellknown.LabelCoschedulingPodGroup]
	if !ok {
		return claim{}, false
	}
	return groupClaim(p, labelMarker(wellknown.LabelCoschedulingPodGroup, name), name, "", CoschedulingKey), true
}

// groupName reads the annotation Volcano and kube-batch share; which of their PodGroups it means
// is settled by which exists (see GroupNameKey).
func groupName(p podMarkers) (claim, bool) {
	name, ok := p.annotations[wellknown.AnnotationGroupName]
	if !ok {
		return claim{}, false
	}
	task, ok := p.annotations[wellknown.AnnotationVolcanoTask]
	if !ok {
		task = p.labels[wellknown.AnnotationVolcanoTask] // Volcano falls back to a label of the same key
	}
	return groupClaim(p, annotationMarker(wellknown.AnnotationGroupName, name), name, task, GroupNameKey), true
}

// groupClaim is a membership whose rules live in a group object named name.
func groupClaim(p podMarkers, marker, name, task string, key func(namespace, name string) string) claim {
	c := claim{marker: marker, membership: gangspec.Membership{Gang: name, Task: task}}
	if name == "" {
		c.membership.Err = fmt.Errorf("%s: %s: the group name must not be empty", p.object(), marker)
		return c
	}
	c.membership.Group = key(p.namespace, name)
	return c
}

// lightweight reads the lightweight coscheduling labels: the whole rule on the pod, no object.
func lightweight(p podMarkers, name string) claim {
	c := claim{marker: labelMarker(wellknown.LabelLightweightGangName, name), membership: gangspec.Membership{Gang: name}}
	raw, ok := p.labels[wellknown.LabelLightweightMinAvailable]
	minAvailable, err := strconv.Atoi(raw)
	switch {
	case name == "":
		c.membership.Err = badLabel(p, wellknown.LabelLightweightGangName, "", "the gang name must not be empty")
	case !ok:
		c.membership.Err = badLabel(p, wellknown.LabelLightweightMinAvailable, "", "missing: a gang member must say how many members must be placed together")
	case err != nil || minAvailable < 1:
		c.membership.Err = badLabel(p, wellknown.LabelLightweightMinAvailable, raw, "must be a positive integer")
	default:
		c.membership.Spec = &gangspec.Spec{Namespace: p.namespace, Name: name, MinAvailable: minAvailable, Source: "lightweight coscheduling labels (Arena)",
			QuorumFrom: "label " + wellknown.LabelLightweightMinAvailable + " of the members"}
	}
	return c
}

// kueue reads a Kueue plain pod group: every member must be placed, so min-available is the
// group's total count.
func kueue(p podMarkers) (claim, bool) {
	name, ok := p.labels[wellknown.LabelKueuePodGroup]
	if !ok {
		return claim{}, false
	}
	c := claim{marker: labelMarker(wellknown.LabelKueuePodGroup, name), membership: gangspec.Membership{Gang: name}}
	raw, ok := p.annotations[wellknown.AnnotationKueueTotalCount]
	count, err := strconv.Atoi(raw)
	switch {
	case name == "":
		c.membership.Err = badLabel(p, wellknown.LabelKueuePodGroup, "", "the pod group name must not be empty")
	case !ok:
		c.membership.Err = badAnnotation(p, wellknown.AnnotationKueueTotalCount, "", "missing: a Kueue pod group member must say how many pods the group has")
	case err != nil || count < 1:
		c.membership.Err = badAnnotation(p, wellknown.AnnotationKueueTotalCount, raw, "must be a positive integer")
	default:
		c.membership.Spec = &gangspec.Spec{Namespace: p.namespace, Name: name, MinAvailable: count, TotalNumber: count, Source: "Kueue pod group"}
	}
	return c, true
}

func badLabel(p podMarkers, key, value, reason string) error {
	return &gangspec.FieldError{Object: p.object(), Field: "label " + key, Value: value, Reason: reason}
}

// readKeepExtras reads a member's opt-out from yielding its place beyond its gang's quorum.
// Anything but "true" or "false" is refused: a typo that silently let the member be evicted
// would be found only when it was.
func readKeepExtras(p podMarkers) (bool, error) {
	v, ok := p.annotations[wellknown.AnnotationKeepExtras]
	if !ok {
		return false, nil
	}
	switch v {
	case "true":
		return true, nil
	case "false":
		return false, nil
	}
	return false, badAnnotation(p, wellknown.AnnotationKeepExtras, v, `must be "true" or "false"`)
}

func badAnnotation(p podMarkers, key, value, reason string) error {
	return &gangspec.FieldError{Object: p.object(), Field: "annotation " + key, Value: value, Reason: reason}
}

// native reads Kubernetes' own gang API (1.36, scheduling.k8s.io/v1alpha2): the pod's
// spec.schedulingGroup.podGroupName names a PodGroup in its namespace, which holds the rules.
// The apiserver drops the field unless its GenericWorkload gate is on, so a pod carries it only
// where that API is served.
func native(p podMarkers) (claim, bool) {
	if p.podGroupName == nil {
		return claim{}, false
	}
	name := *p.podGroupName
	return groupClaim(p, fmt.Sprintf("spec.schedulingGroup.podGroupName=%q", name), name, "", NativeKey), true
}

// kueueWorkload reads the Workload Kueue admitted the pod under: Kueue puts the annotation on the
// pod template of every job it admits (its TopologyAwareScheduling gate, on by default since
// v0.14). Kueue admits a Workload's pods all together or not at all, so lockstep places them
// the same way; the Workload says how many were admitted.
func kueueWorkload(p podMarkers) (claim, bool) {
	name, ok := p.annotations[wellknown.AnnotationKueueWorkload]
	if !ok {
		return claim{}, false
	}
	return groupClaim(p, annotationMarker(wellknown.AnnotationKueueWorkload, name), name, "", KueueWorkloadKey), true
}
