package gang

import (
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/client-go/tools/record"

	"github.com/lockstep-sched/lockstep/test/lib/builders"

	"github.com/lockstep-sched/lockstep/views"
)

// newMetricsEnv is newEnv with the manager's metrics registered on reg.
func newMetricsEnv(t *testing.T, cfg Config, reg *prometheus.Registry, nodes ...*corev1.Node) (*env, *Metrics) {
	t.Helper()
	e := &env{t: t, binder: newFakeBinder(), rec: record.NewFakeRecorder(10000), pods: map[string]*corev1.Pod{}}
	mt := NewMetrics(reg)
	e.m = NewManager(cfg, e.binder, e.getPod, e.rec, mt)
	t.Cleanup(e.m.Stop)
	for _, n := range nodes {
		e.m.UpsertNode(n)
		e.nodes = append(e.nodes, n.Name)
	}
	return e, mt
}

// bindGang filters and binds every member given, the first ones held until the last completes
// the quorum, as the scheduler's calls arrive.
func (e *env) bindGang(pods ...*corev1.Pod) {
	e.t.Helper()
	nodes := make([]string, len(pods))
	for i, p := range pods {
		nodes[i] = e.filterOne(p)
	}
	held := make([]<-chan error, len(pods)-1)
	for i := range held {
		held[i] = e.bindAsync(pods[i], nodes[i])
	}
	require.NoError(e.t, e.bind(pods[len(pods)-1], nodes[len(pods)-1]))
	for i, ch := range held {
		require.NoError(e.t, recv(e.t, ch, "held bind of "+pods[i].Name))
	}
}

// An expiry counts once, whether the sweep or the gang's next filter finds it first, and a gang
// whose quorum binds counts none: the PrometheusRule's expiry-loop alert reads this counter.
func TestExpiredReservationsAreCounted(t *testing.T) {
	e, mt := newMetricsEnv(t, testConfig(), prometheus.NewRegistry(), gpuNodes("n", 2, 2)...)
	stuck := members("default", "stuck", "s", 2, 2, 2, func(b *builders.PodBuilder) { b.WaitingTime("200ms") })
	e.add(stuck...)

	e.filterOne(stuck[0])
	require.Equal(t, views.PhaseReserving, e.status("default", "stuck").Phase)
	require.Zero(t, testutil.ToFloat64(mt.expiries), "a live reservation has not expired")
	require.Eventually(t, func() bool { return e.status("default", "stuck").Phase == views.PhaseTimedOut }, 5*time.Second, 5*time.Millisecond)
	// The filter of the other member after the sweep must not count the same expiry again.
	e.filter(stuck[1])
	require.Equal(t, 1.0, testutil.ToFloat64(mt.expiries))

	bound := members("default", "bound", "b", 2, 2, 1)
	e.add(bound...)
	e.bindGang(bound...)
	require.Equal(t, views.PhaseBound, e.status("default", "bound").Phase)
	require.Equal(t, 1.0, testutil.ToFloat64(mt.expiries), "a gang that bound expired nothing")
}

// The wait runs from the oldest member's creation to the quorum's commit, and is counted once per
// gang: not again when members beyond the quorum bind.
func TestGangWaitIsObservedAtFirstCommit(t *testing.T) {
	reg := prometheus.NewRegistry()
	e, _ := newMetricsEnv(t, testConfig(), reg, gpuNodes("n", 3, 1)...)
	created := time.Now().Add(-90 * time.Second)
	pods := members("default", "job", "w", 3, 2, 1, func(b *builders.PodBuilder) { b.Created(created) })
	e.add(pods...)
	e.bindGang(pods[0], pods[1])
	require.Equal(t, views.PhaseBound, e.status("default", "job").Phase)
	require.NoError(t, e.bind(pods[2], e.filterOne(pods[2])), "the member beyond the quorum binds as an ordinary pod")
	require.Equal(t, 3, e.status("default", "job").Bound)

	count, sum := histogramIn(t, reg, "lockstep_gang_wait_seconds")
	require.Equal(t, uint64(1), count, "one gang, one wait")
	require.InDelta(t, 90, sum, 10, "seconds from the oldest member's creation to the commit")
}

// histogramIn reads the sample count and sum of the unlabelled histogram name from reg.
func histogramIn(t *testing.T, reg *prometheus.Registry, name string) (count uint64, sum float64) {
	t.Helper()
	families, err := reg.Gather()
	require.NoError(t, err)
	for _, f := range families {
		if f.GetName() == name {
			require.Len(t, f.GetMetric(), 1)
			h := f.GetMetric()[0].GetHistogram()
			return h.GetSampleCount(), h.GetSampleSum()
		}
	}
	t.Fatalf("%s is not in the registry", name)
	return 0, 0
}
