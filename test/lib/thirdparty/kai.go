package thirdparty

import (
	"fmt"
	"os"
	"path/filepath"

	"sigs.k8s.io/yaml"
)

// KAIVersion is the KAI Scheduler whose published CRDs (deployments/kai-scheduler/crds of
// github.com/kai-scheduler/KAI-Scheduler v0.17.0, d5bc503a) the suite serves. Its Go module is not
// served here, so the CRDs are written here: the groups, versions, kinds, names, scopes and
// status subresources KAI publishes, with schemas that keep every field, as its own do for the
// fields lockstep reads.
const KAIVersion = "v0.17.0"

// kaiCRD is one of the CRDs KAI publishes.
type kaiCRD struct {
	group, version, kind, plural, singular string
	namespaced, status                     bool
}

var kaiCRDs = []kaiCRD{
	{group: "scheduling.run.ai", version: "v2", kind: "Queue", plural: "queues", singular: "queue", status: true},
	{group: "scheduling.run.ai", version: "v2alpha2", kind: "PodGroup", plural: "podgroups", singular: "podgroup", namespaced: true, status: true},
	{group: "kai.scheduler", version: "v1alpha1", kind: "Topology", plural: "topologies", singular: "topology"},
}

// KAICRDs writes KAI's CRDs into dir, one file each, and returns their paths for InstallCRDs.
func KAICRDs(dir string) ([]string, error) {
	var paths []string
	for _, c := range kaiCRDs {
		raw, err := yaml.Marshal(c.object())
		if err != nil {
			return nil, fmt.Errorf("thirdparty: KAI CRD %s: %w", c.plural, err)
		}
		path := filepath.Join(dir, c.group+"_"+c.plural+".yaml")
		if err := os.WriteFile(path, raw, 0o644); err != nil {
			return nil, fmt.Errorf("thirdparty: KAI CRD %s: %w", c.plural, err)
		}
		paths = append(paths, path)
	}
	return paths, nil
}

func (c kaiCRD) object() map[string]any {
	scope := "Cluster"
	if c.namespaced {
		scope = "Namespaced"
	}
	version := map[string]any{
		"name": c.version, "served": true, "storage": true,
		"schema": map[string]any{"openAPIV3Schema": map[string]any{"type": "object", "x-kubernetes-preserve-unknown-fields": true}},
	}
	if c.status {
		version["subresources"] = map[string]any{"status": map[string]any{}}
	}
	return map[string]any{
		"apiVersion": "apiextensions.k8s.io/v1", "kind": "CustomResourceDefinition",
		"metadata": map[string]any{"name": c.plural + "." + c.group},
		"spec": map[string]any{
			"group": c.group, "scope": scope, "versions": []any{version},
			"names": map[string]any{"kind": c.kind, "listKind": c.kind + "List", "plural": c.plural, "singular": c.singular},
		},
	}
}
