package main

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/dynamic"
	"sigs.k8s.io/yaml"

	"github.com/lockstep-sched/lockstep/test/lib/harness"
)

const (
	// spTools is the tools module that pins scheduler-plugins (hack/build-scheduler-plugins.sh).
	spTools = "test/tools/scheduler-plugins"
	// spModule is scheduler-plugins' module; its files are read at run time from the module
	// cache, so the repository carries no copies of them.
	spModule = "sigs.k8s.io/scheduler-plugins"
	// spCRD and spSampleConfig are paths inside spModule: the PodGroup CRD, and the project's own
	// example configuration of the Coscheduling plugin.
	spCRD          = "config/crd/bases/scheduling.x-k8s.io_podgroups.yaml"
	spSampleConfig = "manifests/coscheduling/scheduler-config.yaml"
)

// schedulerConfigs are the three modes' KubeSchedulerConfigurations, all derived from the shipped
// lockstep-sidecar.yaml so that only what a mode is about differs.
type schedulerConfigs struct {
	shipped string // lockstep-sidecar.yaml itself (a copy when qps changes it)
	stock   string // without the extenders stanza
	cosched string // without extenders, with scheduler-plugins' Coscheduling profile
}

// writeSchedulerConfigs writes the configurations into dir. spDir is the scheduler-plugins
// module's directory; empty skips the Coscheduling one. qps > 0 sets the schedulers' client rate
// limits (clientConnection.qps, burst twice that) in every configuration; 0 keeps the shipped ones.
func writeSchedulerConfigs(shipped, spDir, dir string, qps int) (schedulerConfigs, error) {
	out := schedulerConfigs{shipped: shipped}
	doc, err := readYAML(shipped)
	if err != nil {
		return out, err
	}
	if qps > 0 {
		conn, _ := doc["clientConnection"].(map[string]any)
		if conn == nil {
			conn = map[string]any{}
			doc["clientConnection"] = conn
		}
		conn["qps"], conn["burst"] = qps, 2*qps
		out.shipped = filepath.Join(dir, "lockstep-scheduler.yaml")
		if err := writeYAML(out.shipped, doc); err != nil {
			return out, err
		}
	}
	delete(doc, "extenders")
	out.stock = filepath.Join(dir, "stock-scheduler.yaml")
	if err := writeYAML(out.stock, doc); err != nil {
		return out, err
	}
	if spDir == "" {
		return out, nil
	}
	sample, err := readYAML(filepath.Join(spDir, spSampleConfig))
	if err != nil {
		return out, err
	}
	// Take the sample's profiles (Coscheduling as queue sort and at every point it implements,
	// with its pluginConfig) and keep everything else of the shipped file, e.g.
	// percentageOfNodesToScore.
	if doc["profiles"], err = coschedulingProfiles(sample, doc["profiles"]); err != nil {
		return out, fmt.Errorf("%s: %w", spSampleConfig, err)
	}
	out.cosched = filepath.Join(dir, "coscheduling-scheduler.yaml")
	return out, writeYAML(out.cosched, doc)
}

// coschedulingProfiles returns the sample's profiles, checking they serve the shipped file's first
// scheduler name, the one the bench pods ask for (the shipped file's other profiles are there for
// other ecosystems' pods, which the bench does not make).
func coschedulingProfiles(sample map[string]any, shipped any) (any, error) {
	names := func(profiles any) []string {
		list, _ := profiles.([]any)
		var out []string
		for _, p := range list {
			m, _ := p.(map[string]any)
			name, _ := m["schedulerName"].(string)
			out = append(out, name)
		}
		return out
	}
	got, want := names(sample["profiles"]), names(shipped)
	if len(want) == 0 || !slices.Contains(got, want[0]) {
		return nil, fmt.Errorf("profiles for schedulers %q, none for %q, which the bench pods ask for", got, want)
	}
	return sample["profiles"], nil
}

func readYAML(path string) (map[string]any, error) {
	raw, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	var doc map[string]any
	if err := yaml.Unmarshal(raw, &doc); err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	return doc, nil
}

func writeYAML(path string, doc map[string]any) error {
	raw, err := yaml.Marshal(doc)
	if err != nil {
		return err
	}
	return os.WriteFile(path, raw, 0o644)
}

// schedulerPluginsDir asks the go command where the tools module's scheduler-plugins lives in
// the module cache (the build script has downloaded it).
func schedulerPluginsDir(root string) (string, error) {
	cmd := exec.Command("go", "list", "-m", "-json", spModule)
	cmd.Dir = filepath.Join(root, spTools)
	// The checksum database does not know several of the pinned k8s.io versions; go.sum has them.
	cmd.Env = append(os.Environ(), "GONOSUMDB=k8s.io")
	out, err := cmd.Output()
	if err != nil {
		return "", fmt.Errorf("go list -m %s in %s: %w", spModule, spTools, err)
	}
	var m struct{ Dir, Version string }
	if err := json.Unmarshal(out, &m); err != nil {
		return "", err
	}
	if m.Dir == "" {
		return "", fmt.Errorf("%s@%s is not in the module cache: run hack/build-scheduler-plugins.sh", spModule, m.Version)
	}
	return m.Dir, nil
}

var crdResource = schema.GroupVersionResource{Group: "apiextensions.k8s.io", Version: "v1", Resource: "customresourcedefinitions"}

// applyPodGroupCRD server-side applies scheduler-plugins' PodGroup CRD and waits until the
// apiserver serves it.
func applyPodGroupCRD(ctx context.Context, dyn dynamic.Interface, spDir string) error {
	objs, err := harness.DecodeFile(filepath.Join(spDir, spCRD))
	if err != nil {
		return err
	}
	if len(objs) != 1 {
		return fmt.Errorf("%s: want one CRD, found %d objects", spCRD, len(objs))
	}
	crd := objs[0]
	raw, err := json.Marshal(crd)
	if err != nil {
		return err
	}
	force := true
	if _, err := dyn.Resource(crdResource).Patch(ctx, crd.GetName(), types.ApplyPatchType, raw,
		metav1.PatchOptions{FieldManager: "lockstep-throughput", Force: &force}); err != nil {
		return fmt.Errorf("applying %s: %w", spCRD, err)
	}
	return wait.PollUntilContextTimeout(ctx, pollEvery, time.Minute, true, func(ctx context.Context) (bool, error) {
		got, err := dyn.Resource(crdResource).Get(ctx, crd.GetName(), metav1.GetOptions{})
		if err != nil {
			return false, err
		}
		return established(got), nil
	})
}

func established(crd *unstructured.Unstructured) bool {
	conds, _, _ := unstructured.NestedSlice(crd.Object, "status", "conditions")
	for _, c := range conds {
		m, _ := c.(map[string]any)
		if m["type"] == "Established" && m["status"] == "True" {
			return true
		}
	}
	return false
}

// koordPlugins are the plugins koord-scheduler v1.8.0 adds to kube-scheduler's
// (cmd/koord-scheduler/main.go). Its profile here keeps Coscheduling alone of them: the others need
// what koordlet reports (NodeMetrics for LoadAwareScheduling, Device objects for DeviceShare, NUMA
// topologies for NodeNUMAResource) or quota objects, none of which a cluster without koordlet has.
var koordPlugins = []string{"LoadAwareScheduling", "NodeNUMAResource", "Reservation", "Coscheduling", "DeviceShare",
	"ElasticQuota", "DefaultPreBind", "NodeResourcesFitPlus", "ScarceResourceAvoidance", "SchedulingHint"}

// koordSampleKey is the data key of Koordinator's scheduler ConfigMap
// (config/manager/scheduler-config.yaml) that holds the KubeSchedulerConfiguration.
const koordSampleKey = "koord-scheduler-config"

// writeKoordConfig writes koord-scheduler's configuration into dir: the stock configuration (the
// shipped one without extenders, with -scheduler-qps applied) with its profiles replaced by the
// koord-scheduler profile of Koordinator's own ConfigMap (sample), trimmed by koordProfile.
func writeKoordConfig(stock, sample, dir string) (string, error) {
	doc, err := readYAML(stock)
	if err != nil {
		return "", err
	}
	cm, err := readYAML(sample)
	if err != nil {
		return "", err
	}
	data, _ := cm["data"].(map[string]any)
	text, _ := data[koordSampleKey].(string)
	var cfg map[string]any
	if err := yaml.Unmarshal([]byte(text), &cfg); err != nil || cfg == nil {
		return "", fmt.Errorf("%s: data.%s is not a KubeSchedulerConfiguration: %v", sample, koordSampleKey, err)
	}
	profile, err := koordProfile(cfg["profiles"])
	if err != nil {
		return "", fmt.Errorf("%s: %w", sample, err)
	}
	doc["profiles"] = []any{profile}
	out := filepath.Join(dir, "koord-scheduler.yaml")
	return out, writeYAML(out, doc)
}

// koordProfile is the koord-scheduler profile of Koordinator's configuration with Coscheduling at
// every extension point it has it (weights and order kept) and every other Koordinator plugin
// taken out, along with their pluginConfig; kube-scheduler's own plugins and the disabled lists
// stay as Koordinator wrote them.
func koordProfile(profiles any) (map[string]any, error) {
	list, _ := profiles.([]any)
	for _, p := range list {
		profile, _ := p.(map[string]any)
		if profile["schedulerName"] != koordSchedulerName {
			continue
		}
		out := map[string]any{"schedulerName": koordSchedulerName}
		plugins, _ := profile["plugins"].(map[string]any)
		kept := map[string]any{}
		for point, set := range plugins {
			if s := keepPlugins(set); s != nil {
				kept[point] = s
			}
		}
		if !hasCoscheduling(kept) {
			return nil, fmt.Errorf("profile %s enables Coscheduling nowhere", koordSchedulerName)
		}
		out["plugins"] = kept
		if cfgs := keepPluginConfig(profile["pluginConfig"]); len(cfgs) > 0 {
			out["pluginConfig"] = cfgs
		}
		return out, nil
	}
	return nil, fmt.Errorf("no profile for %s", koordSchedulerName)
}

// isKoordOnly says whether a plugin is one of Koordinator's other than Coscheduling.
func isKoordOnly(name any) bool {
	return name != "Coscheduling" && slices.Contains(koordPlugins, fmt.Sprint(name))
}

// keepPlugins is one extension point's set without Koordinator's other plugins; nil when nothing
// is left enabled or disabled.
func keepPlugins(set any) map[string]any {
	m, _ := set.(map[string]any)
	out := map[string]any{}
	enabled, _ := m["enabled"].([]any)
	var keep []any
	for _, e := range enabled {
		if p, _ := e.(map[string]any); !isKoordOnly(p["name"]) {
			keep = append(keep, e)
		}
	}
	if len(keep) > 0 {
		out["enabled"] = keep
	}
	if d, ok := m["disabled"]; ok && len(keep) > 0 {
		out["disabled"] = d
	}
	if len(out) == 0 {
		return nil
	}
	return out
}

func hasCoscheduling(plugins map[string]any) bool {
	for _, set := range plugins {
		enabled, _ := set.(map[string]any)["enabled"].([]any)
		for _, e := range enabled {
			if p, _ := e.(map[string]any); p["name"] == "Coscheduling" {
				return true
			}
		}
	}
	return false
}

func keepPluginConfig(cfgs any) []any {
	list, _ := cfgs.([]any)
	var out []any
	for _, c := range list {
		if m, _ := c.(map[string]any); !isKoordOnly(m["name"]) {
			out = append(out, c)
		}
	}
	return out
}
