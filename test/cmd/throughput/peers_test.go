package main

import (
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/lockstep-sched/lockstep/test/lib/cluster"
	"github.com/lockstep-sched/lockstep/test/lib/thirdparty"
	"github.com/lockstep-sched/lockstep/wellknown"
)

// A stand-in for Koordinator's config/manager/scheduler-config.yaml: the parts that are read.
const sampleKoord = `apiVersion: v1
kind: ConfigMap
metadata:
  name: scheduler-config
data:
  koord-scheduler-config: |
    apiVersion: kubescheduler.config.k8s.io/v1
    kind: KubeSchedulerConfiguration
    leaderElection:
      leaderElect: true
    profiles:
      - schedulerName: koord-scheduler
        pluginConfig:
        - name: NodeResourcesFit
          args:
            apiVersion: kubescheduler.config.k8s.io/v1
            kind: NodeResourcesFitArgs
            scoringStrategy:
              type: LeastAllocated
        - name: LoadAwareScheduling
          args:
            apiVersion: kubescheduler.config.k8s.io/v1
            kind: LoadAwareSchedulingArgs
        plugins:
          preEnqueue:
            enabled:
              - name: Coscheduling
          filter:
            enabled:
              - name: LoadAwareScheduling
              - name: DeviceShare
          postFilter:
            disabled:
              - name: "*"
            enabled:
              - name: Reservation
              - name: Coscheduling
              - name: DefaultPreemption
          score:
            enabled:
              - name: LoadAwareScheduling
                weight: 1
              - name: Coscheduling
                weight: 1
          bind:
            disabled:
              - name: "*"
            enabled:
              - name: Reservation
              - name: DefaultBinder
`

// koord-scheduler's profile keeps Coscheduling where Koordinator puts it, kube-scheduler's own
// plugins and disabled lists as written, and drops Koordinator's other plugins, which need
// koordlet's objects; everything else comes from the stock configuration.
func TestWriteKoordConfig(t *testing.T) {
	root, err := cluster.RepoRoot()
	require.NoError(t, err)
	dir := t.TempDir()
	configs, err := writeSchedulerConfigs(filepath.Join(root, sidecarConfig), "", dir, 500)
	require.NoError(t, err)
	sample := filepath.Join(dir, "sample.yaml")
	require.NoError(t, os.WriteFile(sample, []byte(sampleKoord), 0o644))

	path, err := writeKoordConfig(configs.stock, sample, dir)
	require.NoError(t, err)
	cfg, stock := parse(t, path), parse(t, configs.stock)
	assert.Equal(t, stock.ClientConnection, cfg.ClientConnection, "-scheduler-qps reaches koord-scheduler too")
	assert.Equal(t, stock.PercentageOfNodesToScore, cfg.PercentageOfNodesToScore)
	assert.Empty(t, cfg.Extenders)
	require.Len(t, cfg.Profiles, 1)
	p := cfg.Profiles[0]
	assert.Equal(t, koordSchedulerName, *p.SchedulerName)
	assert.Equal(t, "Coscheduling", p.Plugins.PreEnqueue.Enabled[0].Name)
	assert.Empty(t, p.Plugins.Filter.Enabled, "no Koordinator filter is left")
	require.Len(t, p.Plugins.PostFilter.Enabled, 2)
	assert.Equal(t, "Coscheduling", p.Plugins.PostFilter.Enabled[0].Name)
	assert.Equal(t, "DefaultPreemption", p.Plugins.PostFilter.Enabled[1].Name, "order kept")
	assert.Equal(t, "*", p.Plugins.PostFilter.Disabled[0].Name)
	require.Len(t, p.Plugins.Score.Enabled, 1)
	assert.Equal(t, "Coscheduling", p.Plugins.Score.Enabled[0].Name)
	require.Len(t, p.Plugins.Bind.Enabled, 1)
	assert.Equal(t, "DefaultBinder", p.Plugins.Bind.Enabled[0].Name)
	require.Len(t, p.PluginConfig, 1)
	assert.Equal(t, "NodeResourcesFit", p.PluginConfig[0].Name)

	// A configuration without Coscheduling would run koord-scheduler without gangs.
	require.NoError(t, os.WriteFile(sample, []byte(`data: {koord-scheduler-config: "profiles: [{schedulerName: koord-scheduler}]"}`), 0o644))
	_, err = writeKoordConfig(configs.stock, sample, dir)
	assert.ErrorContains(t, err, "Coscheduling nowhere")
}

// Each dialect writes a gang the way its scheduler's users do.
func TestDialects(t *testing.T) {
	member := volcanoPodGroup.member("g-0", "g", 4, 2)
	assert.Equal(t, volcanoSchedulerName, member.Spec.SchedulerName)
	assert.Equal(t, "g", member.Annotations[volcanoGroupAnnotation])
	assert.Empty(t, member.Annotations[wellknown.AnnotationGangName])
	pg := volcanoPodGroup.podGroup("g", 4, member)
	assert.Equal(t, "scheduling.volcano.sh/v1beta1", pg.GetAPIVersion())
	spec := pg.Object["spec"].(map[string]any)
	assert.Equal(t, int64(4), spec["minMember"])
	assert.Equal(t, "default", spec["queue"])
	assert.Equal(t, map[string]any{"cpu": "400m", "memory": "1Gi", string(wellknown.ResourceGPU): "8"}, spec["minResources"])

	koord := koordAnnotations.member("k-0", "k", 3, 1)
	assert.Equal(t, koordSchedulerName, koord.Spec.SchedulerName)
	assert.Equal(t, "k", koord.Annotations[wellknown.AnnotationGangName])
	assert.Equal(t, "3", koord.Annotations[wellknown.AnnotationGangMinAvailable])
	assert.Nil(t, koordAnnotations.podGroup("k", 3, koord))

	sp := xk8sPodGroup.member("s-0", "s", 2, 1)
	assert.Equal(t, "s", sp.Labels[podGroupLabel])
	assert.Empty(t, sp.Spec.SchedulerName, "the shipped configuration's default-scheduler profile")
	assert.Equal(t, map[string]any{"minMember": int64(2)}, xk8sPodGroup.podGroup("s", 2, sp).Object["spec"])

	plain := annotations.pod("p", 8).Obj()
	assert.Empty(t, plain.Spec.SchedulerName)
	assert.Equal(t, 8, gpusOf(plain))
}

// The files the bench reads from the peers' modules (CRDs, configurations) are of the versions
// their tools modules build.
func TestPeerVersionsMatchToolsModules(t *testing.T) {
	root, err := cluster.RepoRoot()
	require.NoError(t, err)
	for tools, want := range map[string]string{
		"test/tools/volcano/go.mod":     "volcano.sh/volcano " + thirdparty.VolcanoVersion,
		"test/tools/koordinator/go.mod": "github.com/koordinator-sh/koordinator " + thirdparty.KoordinatorVersion,
	} {
		raw, err := os.ReadFile(filepath.Join(root, tools))
		require.NoError(t, err)
		assert.Contains(t, string(raw), "require "+want+"\n", tools)
	}
}
