package dialect

import (
	"fmt"

	"github.com/lockstep-sched/lockstep/gangspec"
	"github.com/lockstep-sched/lockstep/wellknown"
)

// topologyKeys are the annotations a gang member asks for a network tier with, lockstep's own
// and Kueue's topology-aware scheduling ones; the value is the tier's node label key.
var topologyKeys = []struct {
	key      string
	required bool
}{
	{wellknown.AnnotationRequiredTopology, true},
	{wellknown.AnnotationPreferredTopology, false},
	{wellknown.AnnotationKueueRequiredTopology, true},
	{wellknown.AnnotationKueuePreferredTopology, false},
}

// readTopology reads a gang member's tier request. Several keys may say the same thing (a Kueue
// job and lockstep's own annotation); two that disagree are refused, naming both.
func readTopology(p podMarkers) (gangspec.Topology, error) {
	var out gangspec.Topology
	for _, k := range topologyKeys {
		v, ok := p.annotations[k.key]
		if !ok {
			continue
		}
		if v == "" {
			return gangspec.Topology{}, badAnnotation(p, k.key, v, "must name a network tier by its node label key, e.g. topology.kubernetes.io/zone")
		}
		here := gangspec.Topology{Key: v, Required: k.required, Source: "annotation " + k.key}
		if out.Key != "" && (out.Key != here.Key || out.Required != here.Required) {
			return gangspec.Topology{}, badAnnotation(p, k.key, v, fmt.Sprintf("disagrees with %s=%q; keep one", out.Source, out.Key))
		}
		if out.Key == "" {
			out = here
		}
	}
	return out, nil
}
