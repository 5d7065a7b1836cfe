package extender_test

import (
	"net/http"
	"testing"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/stretchr/testify/require"
	extenderv1 "k8s.io/kube-scheduler/extender/v1"

	"github.com/lockstep-sched/lockstep/extender"
	"github.com/lockstep-sched/lockstep/views"
)

// The metrics address is opened to the monitoring namespace: it serves the registry the verbs
// record into and nothing else, least of all the pods /debug/gangs lists, whatever the debug
// address is configured to serve.
func TestMetricsAddressServesOnlyMetrics(t *testing.T) {
	reg := prometheus.NewRegistry()
	stub := &stubScheduler{status: []views.GangStatus{{Namespace: "secret-team", Name: "mpi", Phase: views.PhaseReserving}}}
	opts := extender.Options{Registry: reg, Profiling: true}
	verbs, metrics := serve(t, stub, opts), serveHandler(t, extender.NewMetricsHandler(reg))

	names := []string{"n-0"}
	code, _ := post(t, verbs, "/filter", extenderv1.ExtenderArgs{Pod: testPod(), NodeNames: &names})
	require.Equal(t, http.StatusOK, code)
	code, raw := get(t, metrics, "/metrics")
	require.Equal(t, http.StatusOK, code)
	require.Contains(t, string(raw), `lockstep_extender_request_duration_seconds_count{code="200",verb="filter"} 1`)

	for _, path := range []string{"/debug/gangs", "/debug/gangs?namespace=secret-team", "/debug/nodes", "/debug/queues", "/debug/pprof/", "/debug/pprof/goroutine", "/healthz", "/readyz", "/"} {
		code, raw := get(t, metrics, path)
		require.Equal(t, http.StatusNotFound, code, path)
		require.Contains(t, decode[map[string]string](t, raw)["error"], "this address serves GET /metrics", path)
		require.NotContains(t, string(raw), "secret-team", path)
	}
	code, _ = post(t, metrics, "/metrics", "{}")
	require.Equal(t, http.StatusMethodNotAllowed, code)
	code, _ = post(t, metrics, "/bind", extenderv1.ExtenderBindingArgs{PodName: "p", PodNamespace: "ns", Node: "n-0"})
	require.Equal(t, http.StatusNotFound, code)
	require.Empty(t, stub.statusNS, "nothing on the metrics address may ask for gang status")
	require.Len(t, stub.filterPods, 1, "only the verbs' own filter call reached the scheduler")
}
