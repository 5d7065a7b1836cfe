package main

import (
	"context"
	"fmt"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"k8s.io/client-go/rest"
	schedconfigv1 "k8s.io/kube-scheduler/config/v1"
	"sigs.k8s.io/yaml"

	"github.com/lockstep-sched/lockstep/test/lib/cluster"
)

// A stand-in for the sample configuration that scheduler-plugins ships: the parts that are read.
const sampleCoscheduling = `apiVersion: kubescheduler.config.k8s.io/v1
kind: KubeSchedulerConfiguration
profiles:
- schedulerName: default-scheduler
  plugins:
    queueSort:
      enabled: [{name: Coscheduling}]
      disabled: [{name: "*"}]
`

// The derived configurations differ from the shipped one only in what their mode is about.
func TestWriteSchedulerConfigs(t *testing.T) {
	root, err := cluster.RepoRoot()
	require.NoError(t, err)
	spDir := t.TempDir()
	require.NoError(t, os.MkdirAll(filepath.Join(spDir, filepath.Dir(spSampleConfig)), 0o755))
	require.NoError(t, os.WriteFile(filepath.Join(spDir, spSampleConfig), []byte(sampleCoscheduling), 0o644))

	configs, err := writeSchedulerConfigs(filepath.Join(root, sidecarConfig), spDir, t.TempDir(), 0)
	require.NoError(t, err)
	shipped, stock, cosched := parse(t, configs.shipped), parse(t, configs.stock), parse(t, configs.cosched)

	require.NotEmpty(t, shipped.Extenders)
	assert.Empty(t, stock.Extenders)
	assert.Empty(t, cosched.Extenders)
	for _, cfg := range []schedconfigv1.KubeSchedulerConfiguration{stock, cosched} {
		assert.Equal(t, shipped.PercentageOfNodesToScore, cfg.PercentageOfNodesToScore)
		assert.Equal(t, shipped.ClientConnection, cfg.ClientConnection)
	}
	stock.Extenders = shipped.Extenders
	assert.Equal(t, shipped, stock, "the stock configuration is the shipped one without extenders")

	assert.Equal(t, filepath.Join(root, sidecarConfig), configs.shipped, "lockstep's mode runs the shipped file itself")

	require.Len(t, cosched.Profiles, 1)
	p := cosched.Profiles[0]
	assert.Equal(t, "default-scheduler", *p.SchedulerName)
	assert.Equal(t, "Coscheduling", p.Plugins.QueueSort.Enabled[0].Name)

	// -scheduler-qps changes the client rate limits of every mode, and only those.
	configs, err = writeSchedulerConfigs(filepath.Join(root, sidecarConfig), spDir, t.TempDir(), 500)
	require.NoError(t, err)
	for _, path := range []string{configs.shipped, configs.stock, configs.cosched} {
		cfg := parse(t, path)
		assert.Equal(t, float32(500), cfg.ClientConnection.QPS, path)
		assert.Equal(t, int32(1000), cfg.ClientConnection.Burst, path)
	}
	qpsShipped := parse(t, configs.shipped)
	qpsShipped.ClientConnection = shipped.ClientConnection
	assert.Equal(t, shipped, qpsShipped)

	// A sample for other schedulers than the shipped configuration's would miss the bench pods.
	other := strings.ReplaceAll(sampleCoscheduling, "default-scheduler", "scheduler-plugins-scheduler")
	require.NoError(t, os.WriteFile(filepath.Join(spDir, spSampleConfig), []byte(other), 0o644))
	_, err = writeSchedulerConfigs(filepath.Join(root, sidecarConfig), spDir, t.TempDir(), 0)
	assert.ErrorContains(t, err, "scheduler-plugins-scheduler")
}

func parse(t *testing.T, path string) schedconfigv1.KubeSchedulerConfiguration {
	t.Helper()
	raw, err := os.ReadFile(path)
	require.NoError(t, err)
	var cfg schedconfigv1.KubeSchedulerConfiguration
	require.NoError(t, yaml.UnmarshalStrict(raw, &cfg), path)
	return cfg
}

func TestPartialTime(t *testing.T) {
	t0 := time.Unix(1000, 0)
	at := func(ms ...int) []time.Time {
		var out []time.Time
		for _, m := range ms {
			out = append(out, t0.Add(time.Duration(m)*time.Millisecond))
		}
		return out
	}
	end := t0.Add(time.Minute)
	assert.Zero(t, partialTime(nil, 3, end), "a gang with no bind was never partly bound")
	assert.Equal(t, 40*time.Millisecond, partialTime(at(0, 10, 40), 3, end))
	assert.Equal(t, 10*time.Millisecond, partialTime(at(0, 10, 40), 2, end), "binds past min-available do not count")
	assert.Equal(t, time.Minute, partialTime(at(0, 10), 3, end), "a gang short of quorum is partial until the end")
}

func TestPercentileAndRate(t *testing.T) {
	var d []time.Duration
	for i := 100; i >= 1; i-- {
		d = append(d, time.Duration(i)*time.Millisecond)
	}
	assert.Equal(t, 51*time.Millisecond, percentile(d, 50))
	assert.Equal(t, 100*time.Millisecond, percentile(d, 99))
	assert.Equal(t, time.Duration(0), percentile(nil, 99))
	assert.Equal(t, "-", pct(nil, 50))

	assert.Equal(t, "50.0", perSecond(rate{bound: 100, total: 100, took: 2 * time.Second}))
	assert.Equal(t, "40.0*", perSecond(rate{bound: 80, total: 100, took: 2 * time.Second}), "a stalled phase is marked")
}

// The apiserver's counters are summed by what tells requests apart, and a phase's work is the
// difference of two reads.
func TestAPIWork(t *testing.T) {
	metrics := `# TYPE apiserver_request_total counter
apiserver_request_total{code="201",component="apiserver",resource="pods",subresource="binding",verb="POST",version="v1"} 7
apiserver_request_total{code="201",component="",resource="pods",subresource="binding",verb="POST",version="v1"} 3
apiserver_request_total{code="200",component="apiserver",resource="leases",subresource="",verb="PUT",version="v1"} 2
# TYPE apiserver_watch_events_total counter
apiserver_watch_events_total{group="",resource="pods",version="v1"} 40
# TYPE apiserver_request_duration_seconds histogram
apiserver_request_duration_seconds_bucket{resource="pods",subresource="binding",verb="POST",le="0.2"} 5
apiserver_request_duration_seconds_bucket{resource="pods",subresource="binding",verb="POST",le="0.4"} 7
apiserver_request_duration_seconds_bucket{resource="pods",subresource="binding",verb="POST",le="1"} 9
apiserver_request_duration_seconds_bucket{resource="pods",subresource="binding",verb="POST",le="+Inf"} 10
apiserver_request_duration_seconds_sum{resource="pods",subresource="binding",verb="POST"} 4
apiserver_request_duration_seconds_count{resource="pods",subresource="binding",verb="POST"} 10
apiserver_request_duration_seconds_bucket{resource="pods",subresource="",verb="GET",le="1"} 0
apiserver_request_duration_seconds_bucket{resource="pods",subresource="",verb="GET",le="+Inf"} 1
apiserver_request_duration_seconds_sum{resource="pods",subresource="",verb="GET"} 2
apiserver_request_duration_seconds_count{resource="pods",subresource="",verb="GET"} 1
# TYPE go_gc_duration_seconds summary
go_gc_duration_seconds{quantile="0.5"} 0.001
go_gc_duration_seconds_sum 0.5
go_gc_duration_seconds_count 12
`
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		require.Equal(t, "/metrics", r.URL.Path)
		_, _ = w.Write([]byte(metrics))
	}))
	defer srv.Close()
	a, err := newAPIMetrics(&rest.Config{Host: srv.URL})
	require.NoError(t, err)
	got, err := a.read(context.Background())
	require.NoError(t, err)
	require.Equal(t, apiWork{
		"request POST pods/binding 201": 10,
		"request PUT leases 200":        2,
		"watch events sent: pods":       40,
		"garbage collections":           12,
		"bindings answered after 0.4s":  3,
		"bindings answered after 1s":    1,
	}, got)
	require.Equal(t, apiWork{"request POST pods/binding 201": 4}, apiWork{
		"request POST pods/binding 201": 14, "request PUT leases 200": 2, "watch events sent: pods": 40, "garbage collections": 12,
	}.since(got))
}

func TestCostColumnsAreTheProcessesARunMeasured(t *testing.T) {
	floor := result{costs: []cost{{phase: "ordinary", cpu: map[string]float64{"scheduler": 1, floorExtender: 0.2, "etcd": 0.3}}}}
	lockstep := result{costs: []cost{{phase: "ordinary", cpu: map[string]float64{"scheduler": 1, "lockstep": 0.4}}}}
	columns := costColumns([]result{floor, lockstep})
	assert.Equal(t, []string{"scheduler", "lockstep", floorExtender, "etcd"}, columns)

	cells, total := lockstep.costs[0].cells(columns, func(s float64) string { return strings.TrimRight(strings.TrimRight(fmt.Sprint(s), "0"), ".") })
	assert.Equal(t, []string{"1", "0.4", "-", "-"}, cells)
	assert.InDelta(t, 1.4, total, 1e-9)
}
