package dialect

import (
	"fmt"
	"math"
	"slices"
	"strings"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	"github.com/lockstep-sched/lockstep/gangspec"
)

// Native is Kubernetes' own PodGroup as 1.37 serves it (scheduling.k8s.io/v1beta1, behind the
// apiserver's GenericWorkload gate), named by a pod's spec.schedulingGroup.podGroupName. Users
// write it by hand or from a Workload's template; the Job controller writes one for an Indexed
// Job when its WorkloadWithJob gate is on. Its status is the PodGroupInitiallyScheduled condition,
// which stays True once the group was placed.
var Native = API{Dialect: "Kubernetes", Resource: podGroups("scheduling.k8s.io", "v1beta1"),
	Status: StatusConditions, Condition: "PodGroupInitiallyScheduled", key: NativeKey, quorum: schedulingPolicy, quorumField: "spec.schedulingPolicy.gang.minCount",
	extra: nativeGroup(disruptionMode)}

// NativeV1alpha2 is the same PodGroup as 1.36 serves it (scheduling.k8s.io/v1alpha2, which 1.37
// no longer serves), with the PodGroupScheduled condition and the disruption mode as a word.
// Whichever version the apiserver serves is the one read.
var NativeV1alpha2 = API{Dialect: "Kubernetes", Resource: podGroups("scheduling.k8s.io", "v1alpha2"),
	Status: StatusConditions, Condition: "PodGroupScheduled", key: NativeKey, quorum: schedulingPolicy, quorumField: "spec.schedulingPolicy.gang.minCount",
	extra: nativeGroup(disruptionModeV1alpha2)}

// NativeKey names a Kubernetes PodGroup the way its pods do.
func NativeKey(namespace, name string) string {
	return "Kubernetes PodGroup " + namespace + "/" + name
}

// schedulingPolicy reads spec.schedulingPolicy, of which the API admits exactly one: gang, whose
// minCount is the quorum, or basic, whose pods each schedule on their own (a quorum of 1).
func schedulingPolicy(r fields) (int, error) {
	gang, err := r.mapField("must be an object with minCount", "spec", "schedulingPolicy", "gang")
	if err != nil {
		return 0, err
	}
	basic, err := r.mapField("must be an object", "spec", "schedulingPolicy", "basic")
	if err != nil {
		return 0, err
	}
	switch {
	case gang != nil && basic != nil:
		return 0, r.bad("spec.schedulingPolicy", "", "names both gang and basic; keep one")
	case basic != nil:
		return 1, nil
	case gang == nil:
		return 0, r.bad("spec.schedulingPolicy", "", "missing: needs gang (with minCount) or basic")
	}
	n, ok, err := r.int("spec", "schedulingPolicy", "gang", "minCount")
	switch {
	case err != nil:
		return 0, err
	case !ok:
		return 0, r.bad("spec.schedulingPolicy.gang.minCount", "", "missing: the group must say how many members must be placed together")
	case n < 1:
		return 0, r.bad("spec.schedulingPolicy.gang.minCount", fmt.Sprint(n), "must be at least 1")
	}
	return int(n), nil
}

// topologyConstraints reads spec.schedulingConstraints.topology: every key names a node label
// whose value all the group's pods must share. lockstep holds a gang to one domain of one tier,
// so several keys become its Layers (the narrowest it knows is the one that holds them all).
func topologyConstraints(_ *unstructured.Unstructured, r fields, spec *gangspec.Spec) error {
	raw, found, _ := unstructured.NestedFieldNoCopy(r.obj, "spec", "schedulingConstraints", "topology")
	if !found || raw == nil {
		return nil
	}
	list, ok := raw.([]any)
	if !ok {
		return r.bad("spec.schedulingConstraints.topology", fmt.Sprint(raw), "must be a list of {key: <node label key>}")
	}
	var keys []string
	for i, item := range list {
		field := fmt.Sprintf("spec.schedulingConstraints.topology[%d].key", i)
		m, _ := item.(map[string]any)
		key, _ := m["key"].(string)
		if key == "" {
			return r.bad(field, fmt.Sprint(item), "must name a node label key, e.g. topology.kubernetes.io/zone")
		}
		if !slices.Contains(keys, key) {
			keys = append(keys, key)
		}
	}
	if len(keys) == 0 {
		return nil
	}
	t := gangspec.Topology{Required: true, Source: "spec.schedulingConstraints.topology of " + r.object}
	if len(keys) == 1 {
		t.Key = keys[0]
	} else {
		t.Layers = keys
	}
	spec.Topology = t
	return nil
}

// nativeGroup reads what a PodGroup says beyond its quorum, its disruption mode by the version's
// reader:
//   - spec.schedulingConstraints.topology (topologyConstraints);
//   - spec.priority, which the apiserver's Priority admission resolves from priorityClassName:
//     kube-scheduler refuses a group whose pods' priority differs from it, and so does lockstep
//     (gangspec.Spec.Priority);
//   - spec.preemptionPolicy (1.37): Never keeps the gang from evicting anything;
//   - the disruption mode: members that go only together are never taken alone, as a member
//     beyond the quorum would be;
//   - spec.parentCompositePodGroupName (1.37): a member of a CompositePodGroup
//     (scheduling.k8s.io/v1alpha3) is refused, since lockstep does not place composites whole
//     (docs/dialects.md).
func nativeGroup(disruption func(fields, *gangspec.Spec) error) func(*unstructured.Unstructured, fields, *gangspec.Spec) error {
	return func(obj *unstructured.Unstructured, r fields, spec *gangspec.Spec) error {
		if parent, _, _ := unstructured.NestedString(r.obj, "spec", "parentCompositePodGroupName"); parent != "" {
			return r.bad("spec.parentCompositePodGroupName", parent, "lockstep does not place a CompositePodGroup (scheduling.k8s.io/v1alpha3) whole, "+
				"and placing its PodGroups one by one could leave it partial: schedule composites with kube-scheduler's own gang scheduling, or make this PodGroup stand alone")
		}
		for _, read := range []func(fields, *gangspec.Spec) error{groupPriority, preemptionPolicy, disruption} {
			if err := read(r, spec); err != nil {
				return err
			}
		}
		return topologyConstraints(obj, r, spec)
	}
}

func groupPriority(r fields, spec *gangspec.Spec) error {
	n, ok, err := r.int("spec", "priority")
	switch {
	case err != nil || !ok:
		return err
	case n < math.MinInt32 || n > math.MaxInt32:
		return r.bad("spec.priority", fmt.Sprint(n), "must fit a 32-bit integer, as a PriorityClass's value does")
	}
	p := int32(n)
	spec.Priority = &p
	return nil
}

func preemptionPolicy(r fields, spec *gangspec.Spec) error {
	return r.choice(&spec.PreemptNever, "PreemptLowerPriority", "Never", "spec", "preemptionPolicy")
}

// disruptionMode reads 1.37's spec.disruptionMode, of which the API admits exactly one of single
// and all.
func disruptionMode(r fields, spec *gangspec.Spec) error {
	single, err := r.mapField("must be an object", "spec", "disruptionMode", "single")
	if err != nil {
		return err
	}
	all, err := r.mapField("must be an object", "spec", "disruptionMode", "all")
	if err != nil {
		return err
	}
	if single != nil && all != nil {
		return r.bad("spec.disruptionMode", "", "names both single and all; keep one")
	}
	spec.DisruptAll = all != nil
	return nil
}

// disruptionModeV1alpha2 reads 1.36's spec.disruptionMode, a word: Pod (the default) or PodGroup.
func disruptionModeV1alpha2(r fields, spec *gangspec.Spec) error {
	return r.choice(&spec.DisruptAll, "Pod", "PodGroup", "spec", "disruptionMode")
}

// choice reads a field of two words: absent or byDefault leaves *set alone, other sets it.
func (r fields) choice(set *bool, byDefault, other string, path ...string) error {
	v, _, _ := unstructured.NestedString(r.obj, path...)
	switch v {
	case "", byDefault:
	case other:
		*set = true
	default:
		return r.bad(strings.Join(path, "."), v, "must be "+byDefault+" or "+other)
	}
	return nil
}
