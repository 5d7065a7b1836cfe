package gang

import (
	"strings"
	"testing"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"

	"github.com/lockstep-sched/lockstep/test/lib/builders"
	"github.com/lockstep-sched/lockstep/wellknown"
)

// A node whose topology annotation does not parse says so, naming the node and the problem, in
// /debug/nodes and in one Event on the Node, and falls back to the next source (here uniform).
func TestInvalidTopologyAnnotationIsReported(t *testing.T) {
	e := newEnv(t, testConfig())
	bad := builders.Node("gpu-0").GPU(8).Obj()
	bad.Annotations = map[string]string{wellknown.AnnotationGPUTopology: `{"version": 1, "gpus": "eight"}`}
	e.m.UpsertNode(bad)
	e.m.UpsertNode(builders.Node("gpu-1").GPU(8).Obj())

	problems := e.m.Nodes(true)
	require.Len(t, problems, 1)
	require.Equal(t, "gpu-0", problems[0].Name)
	require.Equal(t, "uniform", problems[0].TopologySource, "the documented fallback for a node without GFD labels")
	require.Contains(t, problems[0].TopologyError, "node gpu-0")
	require.Len(t, e.m.Nodes(false), 2)
	ev := e.waitEvent(corev1.EventTypeWarning, wellknown.ReasonGPUTopologyInvalid, "node gpu-0", wellknown.AnnotationGPUTopology, "uses the uniform topology")

	// The informer delivers the node again (a heartbeat, a label): no second event for the same
	// error. A fixed annotation clears the report.
	e.m.UpsertNode(bad.DeepCopy())
	for _, other := range e.events() {
		require.NotContains(t, other, wellknown.ReasonGPUTopologyInvalid, "after %q", ev)
	}
	fixed := bad.DeepCopy()
	delete(fixed.Annotations, wellknown.AnnotationGPUTopology)
	e.m.UpsertNode(fixed)
	require.Empty(t, e.m.Nodes(true))
	require.Equal(t, int64(8), e.m.Nodes(false)[0].GPUsFree)
}

// Every phase is in the gauge from the start, Binding included, so that a dashboard's series
// exist before the first gang reaches it.
func TestGangPhaseGaugeHasEveryPhase(t *testing.T) {
	e := newEnv(t, testConfig())
	reg := prometheus.NewRegistry()
	reg.MustRegister(e.m.Collector())
	want := `
# HELP lockstep_gangs Gangs lockstep knows, by phase.
# TYPE lockstep_gangs gauge
lockstep_gangs{phase="Binding"} 0
lockstep_gangs{phase="Bound"} 0
lockstep_gangs{phase="Holding"} 0
lockstep_gangs{phase="Reserving"} 0
lockstep_gangs{phase="TimedOut"} 0
lockstep_gangs{phase="Waiting"} 0
`
	require.NoError(t, testutil.GatherAndCompare(reg, strings.NewReader(want), "lockstep_gangs"))
}
