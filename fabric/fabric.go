// Package fabric models the network between nodes as tiers of domains read from node labels:
// an ordered list of label keys from the narrowest domain (an NVLink fabric, a rack) to the
// widest (a zone). A node's domain at a tier is the value of that tier's label; a node without
// the label sits alone at that tier. It knows labels and names only: which domain a gang should
// use is decided by package gang with package placement.
package fabric

import (
	"fmt"
	"slices"
	"strings"

	"k8s.io/apimachinery/pkg/util/validation"
)

// Tiers are label keys, narrowest domain first.
type Tiers []string

// Presets are the tier lists for the labels clouds and NVIDIA's GPU Feature Discovery set
// already (docs/topology.md says where each comes from). Each ends with the zone: a gang that
// fits nowhere narrower should at least stay in one zone.
var Presets = map[string]Tiers{
	// GPU Feature Discovery labels each node of a multi-node NVLink domain (GB200 NVL72) with its
	// clique; a rack label, where the cluster has one, goes in a list of its own.
	"gfd": {"nvidia.com/gpu.clique", "topology.kubernetes.io/zone"},
	// GKE's compact placement labels, host (a physical machine) within sub-block within block.
	"gke": {"cloud.google.com/gce-topology-subblock", "cloud.google.com/gce-topology-block", "topology.kubernetes.io/zone"},
	// EC2's network node layers, layer 3 nearest the instance.
	"aws":  {"topology.k8s.aws/network-node-layer-3", "topology.k8s.aws/network-node-layer-2", "topology.k8s.aws/network-node-layer-1", "topology.kubernetes.io/zone"},
	"zone": {"topology.kubernetes.io/zone"},
}

// Parse reads the --topology-tiers flag: a comma-separated list of label keys, narrowest first,
// or the name of a preset. Empty means no tiers.
func Parse(flag string) (Tiers, error) {
	flag = strings.TrimSpace(flag)
	if flag == "" {
		return nil, nil
	}
	if p, ok := Presets[flag]; ok {
		return slices.Clone(p), nil
	}
	var tiers Tiers
	for _, key := range strings.Split(flag, ",") {
		key = strings.TrimSpace(key)
		if errs := validation.IsQualifiedName(key); len(errs) > 0 {
			return nil, fmt.Errorf("topology tier %q is not a label key: %s (or name a preset: %s)", key, strings.Join(errs, "; "), PresetNames())
		}
		if slices.Contains(tiers, key) {
			return nil, fmt.Errorf("topology tier %q is listed twice", key)
		}
		tiers = append(tiers, key)
	}
	return tiers, nil
}

// PresetNames lists the presets, for help and errors.
func PresetNames() string {
	names := make([]string, 0, len(Presets))
	for n := range Presets {
		names = append(names, n)
	}
	slices.Sort(names)
	return strings.Join(names, ", ")
}

// Index is the position of a tier's label key, -1 when it is not one of the tiers.
func (t Tiers) Index(key string) int { return slices.Index(t, key) }

// Domains are a node's domain at each tier, named by the label values from the widest tier down
// to that one ("zone-a/block-1/rack-3"): two racks both called rack-3 in different blocks are two
// domains. A node without a tier's label has a domain of its own there, named after the node.
func (t Tiers) Domains(node string, labels map[string]string) []string {
	if len(t) == 0 {
		return nil
	}
	out := make([]string, len(t))
	for i := len(t) - 1; i >= 0; i-- {
		v, ok := labels[t[i]]
		switch {
		case !ok || v == "":
			out[i] = AloneDomain(node)
		case i == len(t)-1:
			out[i] = v
		default:
			out[i] = out[i+1] + "/" + v
		}
	}
	return out
}

// AloneDomain is the domain of a node without a tier's label.
func AloneDomain(node string) string { return "node/" + node }

// Short is a tier's name as people say it: the last part of its label key
// ("topology.example.com/rack" -> "rack", "nvidia.com/gpu.clique" -> "gpu.clique").
func Short(key string) string {
	if i := strings.LastIndex(key, "/"); i >= 0 {
		return key[i+1:]
	}
	return key
}
