package dialect

import (
	"encoding/json"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/lockstep-sched/lockstep/gangspec"
	"github.com/lockstep-sched/lockstep/wellknown"
)

// annotations reads one object's annotations and words every refusal as a FieldError naming the
// object, the key and the value.
type annotations struct {
	object string
	values map[string]string
}

func (a annotations) bad(key, reason string) error {
	return &gangspec.FieldError{Object: a.object, Field: "annotation " + key, Value: a.values[key], Reason: reason}
}

// positiveInt reads key as an integer of at least 1; ok is false when the key is absent.
func (a annotations) positiveInt(key string) (n int, ok bool, err error) {
	raw, ok := a.values[key]
	if !ok {
		return 0, false, nil
	}
	n, convErr := strconv.Atoi(raw)
	if convErr != nil || n < 1 {
		return 0, true, a.bad(key, "must be a positive integer")
	}
	return n, true, nil
}

// koordinatorAnnotations reads a pod's Koordinator gang annotations: the gang's whole rules.
func koordinatorAnnotations(p podMarkers, name string) (*gangspec.Spec, error) {
	a := annotations{object: p.object(), values: p.annotations}
	if name == "" {
		return nil, a.bad(wellknown.AnnotationGangName, "gang name must not be empty")
	}
	spec := &gangspec.Spec{Namespace: p.namespace, Name: name, Source: "Koordinator annotations"}
	minAvailable, ok, err := a.positiveInt(wellknown.AnnotationGangMinAvailable)
	switch {
	case err != nil:
		return nil, err
	case !ok:
		return nil, a.bad(wellknown.AnnotationGangMinAvailable, "missing: a gang member must say how many members must be placed together")
	}
	spec.MinAvailable = minAvailable
	spec.QuorumFrom = "annotation " + wellknown.AnnotationGangMinAvailable + " of the members"
	if raw, ok := a.values[wellknown.AnnotationGangWaitingTime]; ok {
		d, err := time.ParseDuration(raw)
		if err != nil {
			return nil, a.bad(wellknown.AnnotationGangWaitingTime, "must be a duration such as 90s or 10m")
		}
		if d <= 0 {
			return nil, a.bad(wellknown.AnnotationGangWaitingTime, "must be positive")
		}
		spec.WaitingTime = d
	}
	if err := a.koordinatorOptions(spec); err != nil {
		return nil, err
	}
	return spec, nil
}

// koordinatorOptions reads the annotations Koordinator allows on pods and PodGroups alike;
// spec.MinAvailable must be set already.
func (a annotations) koordinatorOptions(spec *gangspec.Spec) error {
	total, ok, err := a.positiveInt(wellknown.AnnotationGangTotalNumber)
	if err != nil {
		return err
	}
	if ok && total < spec.MinAvailable {
		return a.bad(wellknown.AnnotationGangTotalNumber, fmt.Sprintf("must not be below min-available (%d)", spec.MinAvailable))
	}
	spec.TotalNumber = total
	if mode, ok := a.values[wellknown.AnnotationGangMode]; ok {
		if mode != "Strict" && mode != "NonStrict" {
			return a.bad(wellknown.AnnotationGangMode, "must be Strict or NonStrict")
		}
		spec.Mode = mode
	}
	spec.Policy = gangspec.OnceSatisfied // Koordinator's default
	if policy, ok := a.values[wellknown.AnnotationGangMatchPolicy]; ok {
		switch policy {
		case "once-satisfied":
		case "waiting-and-running":
			spec.Policy = gangspec.WaitingAndRunning
		case "only-waiting":
			spec.Policy = gangspec.OnlyWaiting
		default:
			return a.bad(wellknown.AnnotationGangMatchPolicy, "must be once-satisfied, waiting-and-running or only-waiting")
		}
	}
	if raw, ok := a.values[wellknown.AnnotationGangGroups]; ok {
		bundle, err := a.bundle(raw, spec.Key())
		if err != nil {
			return err
		}
		spec.Bundle = bundle
	}
	return a.networkTopology(spec)
}

// networkTopology reads Koordinator's network-topology-spec. MustGather layers make the gang
// require one domain; PreferGather layers alone make it a preference. Layers are names the
// manager matches to lockstep's tiers (a tier's name=key in --topology-tiers). Koordinator's
// built-in ClusterTopologyLayer asks nothing: the whole cluster is what a gang falls back to.
func (a annotations) networkTopology(spec *gangspec.Spec) error {
	const key = wellknown.AnnotationGangNetworkTopologySpec
	raw, ok := a.values[key]
	if !ok {
		return nil
	}
	var v struct {
		GatherStrategy []struct {
			Layer    string `json:"layer"`
			Strategy string `json:"strategy"`
		} `json:"gatherStrategy"`
	}
	if err := json.Unmarshal([]byte(raw), &v); err != nil {
		return a.bad(key, `must be JSON such as {"gatherStrategy":[{"layer":"BlockLayer","strategy":"MustGather"}]}: `+err.Error())
	}
	var must, prefer []string
	for i, rule := range v.GatherStrategy {
		switch {
		case rule.Layer == "":
			return a.bad(key, fmt.Sprintf("gatherStrategy[%d] names no layer", i))
		case rule.Layer == "ClusterTopologyLayer":
		case rule.Strategy == "MustGather":
			must = append(must, rule.Layer)
		case rule.Strategy == "PreferGather":
			prefer = append(prefer, rule.Layer)
		default:
			return a.bad(key, fmt.Sprintf("gatherStrategy[%d].strategy %q must be MustGather or PreferGather", i, rule.Strategy))
		}
	}
	t := gangspec.Topology{Layers: prefer, Source: "annotation " + key + " of " + a.object}
	if len(must) > 0 {
		t.Required, t.Layers = true, must
	}
	if len(t.Layers) > 0 {
		spec.Topology = t
	}
	return nil
}

// bundle reads a gang group, a JSON list of namespace/name gangs. It returns the list sorted,
// with self in it (Koordinator lists the gang itself; lockstep does not require it), or nil
// when the gang is alone in it.
func (a annotations) bundle(raw, self string) ([]string, error) {
	var keys []string
	if err := json.Unmarshal([]byte(raw), &keys); err != nil {
		return nil, a.bad(wellknown.AnnotationGangGroups, `must be a JSON list of "namespace/name" gangs, e.g. ["team-a/ps","team-a/workers"]`)
	}
	for _, k := range keys {
		ns, name, ok := strings.Cut(k, "/")
		if !ok || ns == "" || name == "" || strings.Contains(name, "/") {
			return nil, a.bad(wellknown.AnnotationGangGroups, fmt.Sprintf("%q is not namespace/name", k))
		}
	}
	if !slices.Contains(keys, self) {
		keys = append(keys, self)
	}
	slices.Sort(keys)
	keys = slices.Compact(keys)
	if len(keys) == 1 {
		return nil, nil
	}
	return keys, nil
}
