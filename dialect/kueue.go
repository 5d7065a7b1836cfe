package dialect

import (
	"fmt"
	"strings"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
)

// KueueWorkload is Kueue's Workload (kueue.x-k8s.io/v1beta2), the unit Kueue admits by quota:
// all of a job's pods, or none. Its pods name it by annotation kueue.x-k8s.io/workload. Kueue
// owns its status; lockstep only reads how many pods were admitted.
var KueueWorkload = API{Dialect: "Kueue", Kind: "Workload",
	Resource: schema.GroupVersionResource{Group: "kueue.x-k8s.io", Version: "v1beta2", Resource: "workloads"},
	Status:   StatusOwned, key: KueueWorkloadKey, quorum: admittedPods}

// KueueWorkloadKey names a Kueue Workload the way its pods do.
func KueueWorkloadKey(namespace, name string) string {
	return "Kueue Workload " + namespace + "/" + name
}

// admittedPods is how many pods Kueue admitted: per pod set, its admission's count, which is less
// than the spec's under partial admission; a pod set the admission does not count (a Workload
// admitted before Kueue wrote counts) takes spec.podSets[].count, whose default is 1.
func admittedPods(r fields) (int, error) {
	sets, err := r.list("spec", "podSets")
	if err != nil {
		return 0, err
	}
	admitted, err := r.list("status", "admission", "podSetAssignments")
	if err != nil {
		return 0, err
	}
	counts := map[string]int64{}
	for i, a := range admitted {
		n, ok, err := r.intIn(a, fmt.Sprintf("status.admission.podSetAssignments[%d].count", i), "count")
		if err != nil {
			return 0, err
		}
		if ok {
			name, _ := a["name"].(string)
			counts[name] = n
		}
	}
	total := int64(0)
	for i, s := range sets {
		name, _ := s["name"].(string)
		n, ok := counts[name]
		if !ok {
			var err error
			if n, ok, err = r.intIn(s, fmt.Sprintf("spec.podSets[%d].count", i), "count"); err != nil {
				return 0, err
			}
			if !ok {
				n = 1
			}
		}
		if n < 0 {
			return 0, r.bad(fmt.Sprintf("spec.podSets[%d].count", i), fmt.Sprint(n), "must not be negative")
		}
		total += n
	}
	if total < 1 {
		return 0, r.bad("spec.podSets", "", "admits no pods, so its pods cannot form a gang")
	}
	return int(total), nil
}

// list reads a list of objects; nil without an error when it is absent.
func (r fields) list(path ...string) ([]map[string]any, error) {
	raw, found, _ := unstructured.NestedFieldNoCopy(r.obj, path...)
	if !found || raw == nil {
		return nil, nil
	}
	items, ok := raw.([]any)
	field := strings.Join(path, ".")
	if !ok {
		return nil, r.bad(field, fmt.Sprint(raw), "must be a list")
	}
	out := make([]map[string]any, len(items))
	for i, item := range items {
		if out[i], ok = item.(map[string]any); !ok {
			return nil, r.bad(fmt.Sprintf("%s[%d]", field, i), fmt.Sprint(item), "must be an object")
		}
	}
	return out, nil
}

// intIn reads an integer field of an object inside the one r reads; field names it in messages.
func (r fields) intIn(obj map[string]any, field, key string) (int64, bool, error) {
	v, ok := obj[key]
	if !ok || v == nil {
		return 0, false, nil
	}
	n, err := r.toInt(field, v)
	return n, err == nil, err
}
