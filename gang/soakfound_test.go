package gang

import (
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/lockstep-sched/lockstep/test/lib/builders"

	"github.com/lockstep-sched/lockstep/views"
)

// Failures the e2e soak found (test/e2e/soak_test.go), each pinned here at its cause.

// A gang's plan keeps every member to the nodes its nodeSelector and taints allow, not only the
// member at filter: the soak saw two gangs reserve half on other namespaces' nodes and block each
// other until their reservations timed out.
func TestPlanKeepsMembersToTheirNodes(t *testing.T) {
	label := func(n *corev1.Node, zone string) *corev1.Node { n.Labels = map[string]string{"zone": zone}; return n }
	tainted := gpuNodes("t", 1, 8)[0]
	tainted.Spec.Taints = []corev1.Taint{{Key: "dedicated", Value: "other", Effect: corev1.TaintEffectNoSchedule}}
	nodes := []*corev1.Node{label(gpuNodes("a", 1, 8)[0], "a"), label(gpuNodes("b", 1, 8)[0], "b"), label(tainted, "a")}
	e := newEnv(t, testConfig(), nodes...)
	inZoneA := func(b *builders.PodBuilder) { b.NodeSelector("zone", "a") }

	big := members("default", "big", "big", 2, 2, 8, inZoneA)
	e.add(big...)
	r := e.filter(big[0])
	require.Empty(t, r.Feasible, "zone a has one untainted 8-GPU node for two 8-GPU members")
	require.Equal(t, views.PhaseWaiting, e.status("default", "big").Phase)

	small := members("default", "small", "small", 2, 2, 4, inZoneA)
	e.add(small...)
	e.filterOne(small[0])
	for _, m := range e.status("default", "small").Members {
		require.Equal(t, "a-0", m.Node, "member %s is planned where its rules let it run", m.Pod)
	}
}

// A starving gang's hold on a node that is then deleted neither crashes filter (which left the
// manager's lock taken and hung every verb) nor keeps the gang waiting on the node gone.
func TestHoldOnADeletedNode(t *testing.T) {
	cfg := testConfig()
	cfg.StarvationThreshold = time.Minute
	e := newEnv(t, cfg, gpuNodes("n", 2, 4)...)
	e.m.now = newTestClock(time.Now()).now // the test gangs, created at t0, have starved since
	for _, node := range []string{"n-0", "n-1"} {
		e.add(builders.Pod("default", "busy-"+node).GPU(4).Node(node).Obj())
	}
	g := members("default", "g", "g", 2, 2, 4)
	e.add(g...)
	require.Empty(t, e.filter(g[0]).Feasible)
	require.Equal(t, views.PhaseHolding, e.status("default", "g").Phase)

	e.m.DeleteNode("n-1")
	require.NotPanics(t, func() { e.filter(g[0]) })
	for _, m := range e.status("default", "g").Members {
		require.NotEqual(t, "n-1", m.Node, "nothing stays held on the node gone")
	}
}

// A gang evicted whole whose replacements arrive while its old members still terminate gathers
// its quorum again; the replacements do not bind one by one as if the quorum still ran.
func TestReplacementsOfAGangGoingGatherAQuorum(t *testing.T) {
	e := newEnv(t, testConfig(), gpuNodes("n", 2, 4)...)
	old := members("default", "k", "k", 2, 2, 1) // Koordinator annotations: once-satisfied
	e.add(old...)
	e.bindQuorum(old)
	require.Equal(t, views.PhaseBound, e.status("default", "k").Phase)
	for _, p := range old {
		going := p.DeepCopy()
		going.Spec.NodeName = e.status("default", "k").Members[0].Node
		going.DeletionTimestamp = &metav1.Time{Time: time.Now()}
		e.add(going)
	}
	replacement := builders.Pod("default", "k-2").GPU(1).CPU("1").Memory("1Gi").Gang("k", 2).Created(t0.Add(time.Minute)).Obj()
	e.add(replacement)
	r := e.filter(replacement)
	require.Empty(t, r.Feasible, "one replacement alone is not the quorum")
	require.Contains(t, r.Failed["n-0"], "waiting for members")
}

// kube-scheduler's own preemption may not evict a gang member lockstep holds at bind: the
// scheduler counts it on its node already, and evicting it leaves the gang short mid-commit.
func TestSchedulerMayNotEvictAMemberOnItsWayToBind(t *testing.T) {
	e := newEnv(t, testConfig(), gpuNodes("n", 1, 4)...)
	g := members("default", "g", "g", 2, 2, 2)
	e.add(g...)
	node := e.filterOne(g[0])
	got := e.m.Preempt(preemptor(2), map[string][]types.UID{node: {g[0].UID}})
	require.Empty(t, got.Kept)
	require.Contains(t, got.Dropped[node], "member default/g-0 is on its way to bind")
}
