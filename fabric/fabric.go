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

// Tier is one level of the network: the node label key whose values name its domains, and the
// name gangs may also ask for it by (a Koordinator ClusterNetworkTopology layer such as
// BlockLayer, a Volcano HyperNode tierName), given in --topology-tiers as name=key.
type Tier struct {
	Key  string
	Name string
}

// Tiers are the network's levels, narrowest domain first.
type Tiers []Tier

// Keys are tiers by label key alone, narrowest first.
func Keys(keys ...string) Tiers {
	out := make(Tiers, len(keys))
	for i, k := range keys {
		out[i] = Tier{Key: k}
	}
	return out
}

// Presets are the tier lists for the labels clouds and NVIDIA's GPU Feature Discovery set
// already (docs/packing-network.md, "Tiers", says where each comes from). Each ends with the zone: a gang that
// fits nowhere narrower should at least stay in one zone.
var Presets = map[string]Tiers{
	// GPU Feature Discovery labels each node of a multi-node NVLink domain (GB200 NVL72) with its
	// clique; a rack label, where the cluster has one, goes in a list of its own.
	"gfd": Keys("nvidia.com/gpu.clique", "topology.kubernetes.io/zone"),
	// GKE's compact placement labels, host (a physical machine) within sub-block within block.
	"gke": Keys("cloud.google.com/gce-topology-subblock", "cloud.google.com/gce-topology-block", "topology.kubernetes.io/zone"),
	// EC2's network node layers, layer 3 nearest the instance.
	"aws":  Keys("topology.k8s.aws/network-node-layer-3", "topology.k8s.aws/network-node-layer-2", "topology.k8s.aws/network-node-layer-1", "topology.kubernetes.io/zone"),
	"zone": Keys("topology.kubernetes.io/zone"),
}

// Parse reads the --topology-tiers flag: a comma-separated list of tiers, narrowest first, each
// a node label key or name=key, or the name of a preset. Empty means no tiers.
func Parse(flag string) (Tiers, error) {
	flag = strings.TrimSpace(flag)
	if flag == "" {
		return nil, nil
	}
	if p, ok := Presets[flag]; ok {
		return slices.Clone(p), nil
	}
	var tiers Tiers
	for _, entry := range strings.Split(flag, ",") {
		t, err := parseTier(strings.TrimSpace(entry))
		if err != nil {
			return nil, err
		}
		for _, word := range []string{t.Key, t.Name} {
			if word != "" && tiers.Find(word) >= 0 {
				return nil, fmt.Errorf("topology tier %q: %q names an earlier tier too", entry, word)
			}
		}
		tiers = append(tiers, t)
	}
	return tiers, nil
}

func parseTier(entry string) (Tier, error) {
	t := Tier{Key: entry}
	if name, key, ok := strings.Cut(entry, "="); ok {
		t = Tier{Key: strings.TrimSpace(key), Name: strings.TrimSpace(name)}
		if t.Name == "" || strings.ContainsAny(t.Name, " /") {
			return Tier{}, fmt.Errorf("topology tier %q: the name before = must be one word, e.g. BlockLayer=example.com/block", entry)
		}
	}
	if errs := validation.IsQualifiedName(t.Key); len(errs) > 0 {
		return Tier{}, fmt.Errorf("topology tier %q: %q is not a label key: %s (or name a preset: %s)", entry, t.Key, strings.Join(errs, "; "), PresetNames())
	}
	return t, nil
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

// Find is the position of the tier a gang names by its label key, its name, or its short name
// (Short), -1 when none of them.
func (t Tiers) Find(word string) int {
	if word == "" {
		return -1
	}
	for _, match := range []func(Tier) bool{
		func(x Tier) bool { return x.Key == word },
		func(x Tier) bool { return x.Name == word },
		func(x Tier) bool { return Short(x.Key) == word },
	} {
		if i := slices.IndexFunc(t, match); i >= 0 {
			return i
		}
	}
	return -1
}

// String lists the tiers as --topology-tiers takes them.
func (t Tiers) String() string {
	parts := make([]string, len(t))
	for i, x := range t {
		parts[i] = x.Key
		if x.Name != "" {
			parts[i] = x.Name + "=" + x.Key
		}
	}
	return strings.Join(parts, ",")
}

// Domains are a node's domain at each tier, named by the label values from the widest tier down
// to that one ("zone-a/block-1/rack-3"): two racks both called rack-3 in different blocks are two
// domains. A node without a tier's label has a domain of its own there, named after the node.
func (t Tiers) Domains(node string, labels map[string]string) []string {
	if len(t) == 0 {
		return nil
	}
	out := make([]string, len(t))
	for i := len(t) - 1; i >= 0; i-- {
		v, ok := labels[t[i].Key]
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
