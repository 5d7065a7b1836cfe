package dialect

import (
	"fmt"
	"slices"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	"github.com/lockstep-sched/lockstep/gangspec"
)

// Native is Kubernetes' own PodGroup (1.36, scheduling.k8s.io/v1alpha2, behind the apiserver's
// GenericWorkload gate), named by a pod's spec.schedulingGroup.podGroupName. Users write it by
// hand or from a Workload's template; the Job controller writes one for an Indexed Job when its
// WorkloadWithJob gate is on.
var Native = API{Dialect: "Kubernetes", Resource: podGroups("scheduling.k8s.io", "v1alpha2"),
	Status: StatusConditions, key: NativeKey, quorum: schedulingPolicy, extra: topologyConstraints}

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
