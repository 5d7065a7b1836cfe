package gang

import (
	"sort"
	"sync"
	"testing"

	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/lockstep-sched/lockstep/dialect"
	"github.com/lockstep-sched/lockstep/test/lib/builders"
	"github.com/lockstep-sched/lockstep/wellknown"

	"github.com/lockstep-sched/lockstep/views"
)

// A gang is admitted whole or not at all.
func TestFilterAllOrNothing(t *testing.T) {
	t.Run("gang larger than the cluster reserves nothing", func(t *testing.T) {
		e := newEnv(t, testConfig(), gpuNodes("n", 4, 2)...)
		pods := members("default", "mpi-dist", "w", 5, 5, 2)
		e.add(pods...)

		r := e.filter(pods[0])
		const want = "gang default/mpi-dist: 5 members need 10 nvidia.com/gpu, 8 free"
		require.Empty(t, r.Feasible)
		require.Len(t, r.Failed, 4)
		for node, reason := range r.Failed {
			require.Equal(t, want, reason, "node %s", node)
		}

		st := e.status("default", "mpi-dist")
		require.Equal(t, views.PhaseWaiting, st.Phase)
		require.Equal(t, want, st.Reason)
		require.Nil(t, st.ReservationExpires)
		require.Equal(t, 1, st.Attempts)
		for _, mb := range st.Members {
			require.Equal(t, "Pending", mb.State, mb.Pod)
			require.Empty(t, mb.Node, mb.Pod)
		}
		e.waitEvent(corev1.EventTypeWarning, wellknown.ReasonGangWaiting, want)

		// Nothing is held: an ordinary pod may use every node.
		r = e.filter(builders.Pod("default", "plain").GPU(2).Obj())
		require.ElementsMatch(t, e.nodes, r.Feasible)
	})

	t.Run("gang that fits reserves every member at once", func(t *testing.T) {
		e := newEnv(t, testConfig(), gpuNodes("n", 4, 2)...)
		pods := members("default", "mpi-fit", "w", 4, 4, 2)
		e.add(pods...)

		r := e.filter(pods[0])
		require.Len(t, r.Feasible, 1)
		require.Nil(t, r.Failed, "a reserved member's answer names its node alone")

		st := e.status("default", "mpi-fit")
		require.Equal(t, views.PhaseReserving, st.Phase)
		require.NotNil(t, st.ReservationExpires)
		states := map[string]int{}
		nodes := map[string]bool{}
		for _, mb := range st.Members {
			states[mb.State]++
			require.NotEmpty(t, mb.Node, mb.Pod)
			nodes[mb.Node] = true
			require.NotNil(t, mb.ReservationExpires, mb.Pod)
		}
		require.Equal(t, map[string]int{"Reserved": 1, "Planned": 3}, states)
		require.Len(t, nodes, 4, "2 GPUs per member on 2-GPU nodes: one member per node")
		require.Equal(t, "Reserved", e.memberStates("default", "mpi-fit")["default/w-0"])
		e.waitEvent(corev1.EventTypeNormal, wellknown.ReasonGangReserved, "gang default/mpi-fit: 4 members reserved")

		// Every other member gets the node planned for it, and only that one, whatever order
		// they arrive in (and although each filter call records a new version of the pod).
		for i := len(pods) - 1; i >= 1; i-- {
			node := e.filterOne(pods[i])
			require.Equal(t, st.Members[i].Node, node, pods[i].Name)
		}
		for _, mb := range e.status("default", "mpi-fit").Members {
			require.Equal(t, "Reserved", mb.State, mb.Pod)
		}
	})

	t.Run("members that do not exist yet are waited for", func(t *testing.T) {
		e := newEnv(t, testConfig(), gpuNodes("n", 4, 2)...)
		pods := members("default", "mpi", "w", 4, 4, 2)
		e.add(pods[:3]...)
		r := e.filter(pods[0])
		require.Empty(t, r.Feasible)
		require.Equal(t, "gang default/mpi: waiting for members: 3 of min-available 4 exist; min-available is annotation gang.scheduling.koordinator.sh/min-available of the members", r.Failed["n-0"])
		require.Equal(t, views.PhaseWaiting, e.status("default", "mpi").Phase)
	})
}

// Whether members fit is decided node by node; free capacity summed over the cluster is not enough.
func TestFilterPlacesPerNode(t *testing.T) {
	t.Run("fragmented GPUs", func(t *testing.T) {
		e := newEnv(t, testConfig(), gpuNodes("n", 4, 2)...)
		for i, n := range e.nodes {
			e.add(builders.Pod("default", "ordinary-"+n).GPU(1).Node(n).Created(t0.Add(-1 * timeSecond(i))).Obj())
		}
		pods := members("default", "pair", "w", 2, 2, 2)
		e.add(pods...)

		r := e.filter(pods[0])
		require.Empty(t, r.Feasible)
		reason := r.Failed["n-0"]
		require.Equal(t, "gang default/pair: 2 members fit in total, but member default/w-0 needs 2 nvidia.com/gpu on one node after placing the others: at most 1 free on one node (n-0)", reason)
		require.Equal(t, views.PhaseWaiting, e.status("default", "pair").Phase)

		// A 1-GPU gang of four fits, one member per node.
		small := members("default", "quad", "s", 4, 4, 1)
		e.add(small...)
		require.Len(t, e.filter(small[0]).Feasible, 1)
	})

	heteroNodes := func() []*corev1.Node {
		return []*corev1.Node{
			builders.Node("gpu-0").GPU(2).CPU("8").Memory("64Gi").Pods(110).Obj(),
			builders.Node("gpu-1").GPU(2).CPU("8").Memory("64Gi").Pods(110).Obj(),
			builders.Node("cpu-0").CPU("32").Memory("128Gi").Pods(110).Obj(),
		}
	}
	hetero := func(psCPU string) []*corev1.Pod {
		return []*corev1.Pod{
			builders.Pod("default", "ps").CPU(psCPU).Memory("4Gi").Gang("tf", 3).Created(t0).Obj(),
			builders.Pod("default", "worker-0").GPU(2).CPU("1").Memory("1Gi").Gang("tf", 3).Created(t0.Add(timeSecond(1))).Obj(),
			builders.Pod("default", "worker-1").GPU(2).CPU("1").Memory("1Gi").Gang("tf", 3).Created(t0.Add(timeSecond(2))).Obj(),
		}
	}

	t.Run("parameter server on the CPU node, workers on GPU nodes", func(t *testing.T) {
		e := newEnv(t, testConfig(), heteroNodes()...)
		pods := hetero("16")
		e.add(pods...)
		require.Equal(t, "cpu-0", e.filterOne(pods[0]), "16 CPUs fit only on cpu-0")
		got := map[string]string{}
		for _, mb := range e.status("default", "tf").Members {
			got[mb.Pod] = mb.Node
		}
		require.Equal(t, "cpu-0", got["default/ps"])
		require.ElementsMatch(t, []string{"gpu-0", "gpu-1"}, []string{got["default/worker-0"], got["default/worker-1"]})
	})

	t.Run("parameter server too large for any one node", func(t *testing.T) {
		e := newEnv(t, testConfig(), heteroNodes()...)
		pods := hetero("40")
		e.add(pods...)
		r := e.filter(pods[1])
		require.Empty(t, r.Feasible)
		require.Equal(t, "gang default/tf: 3 members fit in total, but member default/ps needs 40 cpu on one node after placing the others: at most 32 free on one node (cpu-0)", r.Failed["gpu-0"])
	})

	t.Run("parameter server larger than the cluster", func(t *testing.T) {
		e := newEnv(t, testConfig(), heteroNodes()...)
		pods := hetero("64")
		e.add(pods...)
		r := e.filter(pods[0])
		require.Empty(t, r.Feasible)
		require.Equal(t, "gang default/tf: 3 members need 66 cpu, 48 free", r.Failed["cpu-0"])
	})
}

// What a gang reserves is invisible to everyone else: ordinary pods and other gangs.
func TestReservationHiddenFromOthers(t *testing.T) {
	e := newEnv(t, testConfig(), gpuNodes("n", 4, 2)...)
	a := members("default", "a", "a", 2, 2, 2)
	e.add(a...)
	e.filterOne(a[0])
	reservedNodes := map[string]bool{}
	for _, mb := range e.status("default", "a").Members {
		reservedNodes[mb.Node] = true
	}
	require.Len(t, reservedNodes, 2)

	plain := builders.Pod("default", "plain").GPU(1).Obj()
	e.add(plain)
	r := e.filter(plain)
	require.Len(t, r.Feasible, 2)
	for _, n := range r.Feasible {
		require.False(t, reservedNodes[n], "ordinary pod offered reserved node %s", n)
	}
	for n := range reservedNodes {
		require.Equal(t, "2 nvidia.com/gpu reserved for gang default/a: needs 1, 0 free outside reservations", r.Failed[n])
	}

	// Gang b fits in the empty cluster (6 of 8 GPUs) but not beside a's reservation.
	b := members("default", "b", "b", 3, 3, 2)
	e.add(b...)
	r = e.filter(b[0])
	require.Empty(t, r.Feasible)
	want := "gang default/b: 3 members need 6 nvidia.com/gpu, 4 free; gang default/a holds 4 in reservations"
	require.Equal(t, want, r.Failed["n-0"])
	require.Equal(t, views.PhaseWaiting, e.status("default", "b").Phase)
	require.Equal(t, want, e.status("default", "b").Reason)

	// A gang that fits beside the reservation is admitted on the free nodes only.
	c := members("default", "c", "c", 2, 2, 2)
	e.add(c...)
	node := e.filterOne(c[0])
	require.False(t, reservedNodes[node])
}

// Two gangs that each fit alone but not together: one wins, the other waits and is told why.
func TestCompetingGangs(t *testing.T) {
	t.Run("interleaved", func(t *testing.T) {
		e := newEnv(t, testConfig(), gpuNodes("n", 2, 2)...)
		a := members("default", "a", "a", 2, 2, 2)
		b := members("default", "b", "b", 2, 2, 2)
		e.add(a...)
		e.add(b...)

		a0 := e.filterOne(a[0])
		r := e.filter(b[0])
		require.Empty(t, r.Feasible)
		require.Equal(t, "gang default/b: 2 members need 4 nvidia.com/gpu, 0 free; gang default/a holds 4 in reservations", r.Failed["n-0"])
		a1 := e.filterOne(a[1])
		require.Empty(t, e.filter(b[1]).Feasible)

		ch := e.bindAsync(a[0], a0)
		require.NoError(t, e.bind(a[1], a1))
		require.NoError(t, recv(t, ch, "bind a-0"))
		require.Equal(t, map[string]string{"default/a-0": a0, "default/a-1": a1}, e.binder.Bindings())
		require.Equal(t, views.PhaseBound, e.status("default", "a").Phase)

		r = e.filter(b[0])
		require.Empty(t, r.Feasible)
		require.Equal(t, "gang default/b: 2 members need 4 nvidia.com/gpu, 0 free", r.Failed["n-1"])
		st := e.status("default", "b")
		require.Equal(t, views.PhaseWaiting, st.Phase)
		require.Equal(t, r.Failed["n-1"], st.Reason)

		// a finishes and leaves: b gets the capacity.
		for _, p := range a {
			e.m.DeletePod(p.UID)
		}
		b0 := e.filterOne(b[0])
		b1 := e.filterOne(b[1])
		ch = e.bindAsync(b[0], b0)
		require.NoError(t, e.bind(b[1], b1))
		require.NoError(t, recv(t, ch, "bind b-0"))
		require.Equal(t, views.PhaseBound, e.status("default", "b").Phase)
		require.Len(t, e.binder.Bindings(), 4)
	})

	t.Run("concurrent", func(t *testing.T) {
		for round := 0; round < 20; round++ {
			e := newEnv(t, testConfig(), gpuNodes("n", 2, 2)...)
			a := members("default", "a", "a", 2, 2, 2)
			b := members("default", "b", "b", 2, 2, 2)
			e.add(a...)
			e.add(b...)
			all := []*corev1.Pod{a[0], b[0], a[1], b[1]}
			results := make([]FilterResult, len(all))
			start := make(chan struct{})
			var wg sync.WaitGroup
			for i, p := range all {
				wg.Add(1)
				go func() {
					defer wg.Done()
					<-start
					results[i] = e.filter(p)
				}()
			}
			close(start)
			wg.Wait()

			phases := []views.Phase{e.status("default", "a").Phase, e.status("default", "b").Phase}
			sort.Slice(phases, func(i, j int) bool { return phases[i] < phases[j] })
			require.Equal(t, []views.Phase{views.PhaseReserving, views.PhaseWaiting}, phases, "round %d", round)
			winner := 0 // index into all of the winning gang's first member
			if e.status("default", "b").Phase == views.PhaseReserving {
				winner = 1
			}
			for i, r := range results {
				if i%2 == winner {
					// A winning member either reserved or claimed its slot.
					require.Len(t, r.Feasible, 1, "round %d pod %s: %v", round, all[i].Name, r.Failed)
				} else {
					require.Empty(t, r.Feasible, "round %d pod %s", round, all[i].Name)
				}
			}
		}
	})
}

// Once a gang has quorum its remaining members are ordinary pods.
func TestAfterQuorumMembersScheduleLikeOrdinaryPods(t *testing.T) {
	e := newEnv(t, testConfig(), builders.Node("n-0").GPU(2).CPU("64").Memory("256Gi").Pods(110).Obj())
	pods := members("default", "elastic", "w", 4, 2, 1, func(b *builders.PodBuilder) { b.TotalNumber(4) })
	e.add(pods...)

	n0 := e.filterOne(pods[0])
	n1 := e.filterOne(pods[1])
	ch := e.bindAsync(pods[0], n0)
	require.NoError(t, e.bind(pods[1], n1))
	require.NoError(t, recv(t, ch, "bind w-0"))
	require.Len(t, e.binder.Bindings(), 2)
	st := e.status("default", "elastic")
	require.Equal(t, views.PhaseBound, st.Phase)
	require.Equal(t, 2, st.Bound)

	for _, p := range pods[2:] {
		r := e.filter(p)
		require.Empty(t, r.Feasible)
		require.Equal(t, "insufficient nvidia.com/gpu: needs 1, 0 free", r.Failed["n-0"], p.Name)
	}
	require.Len(t, e.binder.Bindings(), 2)
}

// Members must agree on the gang's rules; the odd one is rejected by name.
func TestMembersDisagreeOnMinAvailable(t *testing.T) {
	e := newEnv(t, testConfig(), gpuNodes("n", 4, 2)...)
	pods := members("default", "mpi", "w", 2, 2, 1)
	odd := builders.Pod("default", "w-odd").GPU(1).Gang("mpi", 3).Created(t0.Add(timeSecond(10))).Obj()
	e.add(pods...)
	e.add(odd)

	r := e.filter(odd)
	require.Empty(t, r.Feasible)
	reason := r.Failed["n-0"]
	for _, part := range []string{"pod default/w-odd", `min-available="3"`, `"2"`, "default/w-0"} {
		require.Contains(t, reason, part)
	}
	e.waitEvent(corev1.EventTypeWarning, wellknown.ReasonGangRejected, "pod default/w-odd")

	var oddStatus views.MemberStatus
	for _, mb := range e.status("default", "mpi").Members {
		if mb.Pod == "default/w-odd" {
			oddStatus = mb
		}
	}
	require.Equal(t, "Rejected", oddStatus.State)
	require.Equal(t, reason, oddStatus.Reason)

	// The members that agree are unaffected.
	e.filterOne(pods[0])
	e.filterOne(pods[1])
	require.Equal(t, views.PhaseReserving, e.status("default", "mpi").Phase)
}

// An invalid annotation is refused at filter with the dialect reader's message, and an event.
func TestFilterInvalidAnnotation(t *testing.T) {
	e := newEnv(t, testConfig(), gpuNodes("n", 1, 2)...)
	p := builders.Pod("default", "bad").GPU(1).GangName("mpi").MinAvailable("abc").Obj()
	r := e.filter(p)
	require.Empty(t, r.Feasible)
	ms := dialect.Pods{}.Read(p)
	require.Equal(t, ms.Err.Error(), r.Failed["n-0"])
	e.waitEvent(corev1.EventTypeWarning, wellknown.ReasonGangRejected, "pod default/bad")
	st := e.status("default", "mpi")
	require.Equal(t, "Rejected", st.Members[0].State)
}

// An ordinary pod fits by its own requests; nodes lockstep has not seen or that lack room fail.
func TestFilterOrdinaryPod(t *testing.T) {
	e := newEnv(t, testConfig(),
		builders.Node("big").GPU(8).CPU("64").Memory("256Gi").Pods(110).Obj(),
		builders.Node("small").GPU(1).CPU("2").Memory("4Gi").Pods(110).Obj(),
	)
	tests := []struct {
		name     string
		pod      *corev1.Pod
		feasible []string
		failed   map[string]string
	}{
		{"gpu", builders.Pod("default", "p").GPU(2).Obj(), []string{"big"}, map[string]string{
			"small":   "insufficient nvidia.com/gpu: needs 2, 1 free",
			"unknown": "lockstep has not seen this node yet",
		}},
		{"cpu", builders.Pod("default", "p").CPU("3").Obj(), []string{"big"}, map[string]string{
			"small":   "insufficient cpu: needs 3, 2 free",
			"unknown": "lockstep has not seen this node yet",
		}},
		{"memory", builders.Pod("default", "p").Memory("8Gi").Obj(), []string{"big"}, map[string]string{
			"small":   "insufficient memory: needs 8Gi, 4Gi free",
			"unknown": "lockstep has not seen this node yet",
		}},
		{"nothing", builders.Pod("default", "p").Obj(), []string{"big", "small"}, map[string]string{
			"unknown": "lockstep has not seen this node yet",
		}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			r := e.filterNodes(tc.pod, []string{"big", "small", "unknown"})
			require.Equal(t, tc.feasible, r.Feasible)
			require.Equal(t, tc.failed, r.Failed)
		})
	}
}

// Only a shortfall beside bound pods is a failure the scheduler's preemption might cure: not a
// node another gang's reservation holds, nor one lockstep has not seen, nor any refusal of a gang
// member before quorum.
func TestFilterResolvableFailures(t *testing.T) {
	e := newEnv(t, testConfig(), gpuNodes("n", 3, 2)...)
	e.add(builders.Pod("default", "bound").GPU(2).Node("n-0").Obj())
	held := members("default", "held", "h", 1, 1, 2)
	e.add(held...)
	require.Equal(t, []string{"n-1"}, e.filterNodes(held[0], []string{"n-1"}).Feasible, "gang held reserves n-1")
	offered := []string{"n-0", "n-1", "n-2", "unknown"}

	r := e.filterNodes(builders.Pod("default", "ordinary").GPU(1).Obj(), offered)
	require.Equal(t, []string{"n-2"}, r.Feasible)
	require.Equal(t, map[string]string{
		"n-0":     "insufficient nvidia.com/gpu: needs 1, 0 free",
		"n-1":     "2 nvidia.com/gpu reserved for gang default/held: needs 1, 0 free outside reservations",
		"unknown": "lockstep has not seen this node yet",
	}, r.Failed)
	require.Equal(t, map[string]bool{"n-0": true}, r.Resolvable)

	// A member of a gang past quorum schedules like an ordinary pod, and fails like one.
	elastic := members("default", "elastic", "e", 2, 1, 2)
	elastic[0].Spec.NodeName = "n-2"
	e.add(elastic...)
	r = e.filterNodes(elastic[1], offered)
	require.Empty(t, r.Feasible)
	require.Equal(t, map[string]bool{"n-0": true, "n-2": true}, r.Resolvable)

	// A member before quorum: lockstep reserves for its gang itself.
	pair := members("default", "pair", "p", 2, 2, 1)
	e.add(pair...)
	r = e.filterNodes(pair[0], offered)
	require.Empty(t, r.Feasible)
	require.Len(t, r.Failed, len(offered))
	require.Nil(t, r.Resolvable)
}

// A member that disagrees with its gang is not counted, nor planned for, when the gang is admitted:
// it will never pass filter, so a place held for it would only block capacity until expiry.
func TestDisagreeingMemberNotPlanned(t *testing.T) {
	e := newEnv(t, testConfig(), gpuNodes("n", 2, 2)...)
	w0 := builders.Pod("default", "w-0").GPU(2).Gang("mpi", 2).Created(t0).Obj()
	odd := builders.Pod("default", "w-odd").GPU(2).Gang("mpi", 3).Created(t0.Add(timeSecond(1))).Obj()
	e.add(w0, odd)

	r := e.filter(w0)
	require.Empty(t, r.Feasible)
	require.Equal(t, "gang default/mpi: waiting for members: 1 of min-available 2 exist; min-available is annotation gang.scheduling.koordinator.sh/min-available of the members", r.Failed["n-0"])
	require.Equal(t, views.PhaseWaiting, e.status("default", "mpi").Phase)

	// Once a member that agrees exists, the gang is admitted without the odd one.
	w1 := builders.Pod("default", "w-1").GPU(2).Gang("mpi", 2).Created(t0.Add(timeSecond(2))).Obj()
	e.add(w1)
	e.filterOne(w0)
	states := e.memberStates("default", "mpi")
	require.Equal(t, map[string]string{"default/w-0": "Reserved", "default/w-1": "Planned", "default/w-odd": "Rejected"}, states)
}

// Members that cannot reach the scheduler and nodes that take no new pods are left out of plans.
func TestAdmissionSkips(t *testing.T) {
	t.Run("gated members are waited for", func(t *testing.T) {
		e := newEnv(t, testConfig(), gpuNodes("n", 4, 2)...)
		pods := members("default", "mpi", "w", 3, 3, 1)
		pods[2] = builders.Pod("default", "w-2").GPU(1).Gang("mpi", 3).Created(t0.Add(timeSecond(2))).SchedulingGates("kueue.x-k8s.io/admission").Obj()
		e.add(pods...)
		r := e.filter(pods[0])
		require.Empty(t, r.Feasible)
		require.Equal(t, "gang default/mpi: waiting for members: 3 of min-available 3 exist, 1 of them held by scheduling gates; min-available is annotation gang.scheduling.koordinator.sh/min-available of the members", r.Failed["n-0"])

		// The gate is lifted: the gang is admitted.
		pods[2].Spec.SchedulingGates = nil
		e.add(pods[2])
		e.filterOne(pods[0])
	})

	t.Run("finished members do not count", func(t *testing.T) {
		e := newEnv(t, testConfig(), gpuNodes("n", 4, 2)...)
		pods := members("default", "mpi", "w", 2, 2, 1)
		pods[1].Status.Phase = corev1.PodSucceeded
		e.add(pods...)
		r := e.filter(pods[0])
		require.Equal(t, "gang default/mpi: waiting for members: 1 of min-available 2 exist; min-available is annotation gang.scheduling.koordinator.sh/min-available of the members", r.Failed["n-0"])
	})

	t.Run("cordoned nodes are not planned on", func(t *testing.T) {
		e := newEnv(t, testConfig(),
			builders.Node("cordoned").GPU(8).CPU("64").Memory("256Gi").Pods(110).Unschedulable().Obj(),
			builders.Node("open").GPU(2).CPU("64").Memory("256Gi").Pods(110).Obj(),
		)
		pods := members("default", "mpi", "w", 2, 2, 2)
		e.add(pods...)
		r := e.filter(pods[0])
		require.Empty(t, r.Feasible)
		require.Equal(t, "gang default/mpi: 2 members need 4 nvidia.com/gpu, 2 free", r.Failed["open"])
	})

	t.Run("the scheduler's own filters restrict the first member", func(t *testing.T) {
		e := newEnv(t, testConfig(), gpuNodes("n", 4, 2)...)
		pods := members("default", "mpi", "w", 2, 2, 2)
		e.add(pods...)
		r := e.filterNodes(pods[0], []string{"n-3"})
		require.Equal(t, []string{"n-3"}, r.Feasible)
		// w-1 is offered only a node that is not its planned one: its slot moves there.
		planned := e.status("default", "mpi").Members[1].Node
		require.NotEqual(t, "n-3", planned)
		other := "n-0"
		if planned == other {
			other = "n-1"
		}
		r = e.filterNodes(pods[1], []string{other})
		require.Equal(t, []string{other}, r.Feasible)
		require.Equal(t, other, e.status("default", "mpi").Members[1].Node)
		// Offered only the node w-0 holds, w-1 has nowhere to go.
		r = e.filterNodes(pods[1], []string{"n-3"})
		require.Empty(t, r.Feasible)
		require.Contains(t, r.Failed["n-3"], "no offered node has room")
	})
}

// A member that leaves while its gang is reserving gives its place to its replacement; a gang that
// loses every member gives its reservation up at once.
func TestMemberReplacedWhileReserving(t *testing.T) {
	e := newEnv(t, testConfig(), gpuNodes("n", 2, 2)...)
	pods := members("default", "mpi", "w", 2, 2, 2)
	e.add(pods...)
	n0 := e.filterOne(pods[0])
	planned := e.status("default", "mpi").Members[1].Node

	e.m.DeletePod(pods[1].UID)
	replacement := builders.Pod("default", "w-1").GPU(2).CPU("1").Memory("1Gi").Gang("mpi", 2).
		Created(t0.Add(timeSecond(5))).UID("uid-recreated").Obj()
	e.add(replacement)
	require.Equal(t, planned, e.filterOne(replacement))
	held := e.bindAsync(pods[0], n0)
	require.NoError(t, e.bind(replacement, planned))
	require.NoError(t, recv(t, held, "bind w-0"))
	require.Equal(t, views.PhaseBound, e.status("default", "mpi").Phase)

	// Gang b reserves everything that is left after a is deleted, then loses its members.
	for _, p := range []*corev1.Pod{pods[0], replacement} {
		e.m.DeletePod(p.UID)
	}
	b := members("default", "b", "b", 2, 2, 2)
	e.add(b...)
	e.filterOne(b[0])
	plain := builders.Pod("default", "plain").GPU(2).Obj()
	require.Empty(t, e.filter(plain).Feasible)
	for _, p := range b {
		e.m.DeletePod(p.UID)
	}
	require.Empty(t, e.m.Status("default"))
	require.Len(t, e.filter(plain).Feasible, 2, "the reservation went with the gang")
}

// Two gangs holding one node are named in the same order every time: the scheduler folds
// identical node reasons and lockstep de-duplicates events by message.
func TestReservedNodeReasonIsStable(t *testing.T) {
	e := newEnv(t, testConfig(), builders.Node("n-0").GPU(8).CPU("64").Memory("256Gi").Pods(110).Obj())
	for _, g := range []string{"zeta", "alpha"} {
		pods := members("default", g, g, 2, 2, 2)
		e.add(pods...)
		require.Equal(t, "n-0", e.filterOne(pods[0]))
	}
	ordinary := builders.Pod("default", "big").GPU(5).Obj()
	e.add(ordinary)
	want := "8 nvidia.com/gpu reserved for gang default/alpha, default/zeta: needs 5, 0 free outside reservations"
	for range 20 {
		require.Equal(t, want, e.filter(ordinary).Failed["n-0"])
	}
}

// A pod being deleted holds its node until it is gone, but the scheduler offering the node for a
// pod that fits only without it means the deletion reached the scheduler first: lockstep passes
// the node rather than refuse on its own stale view. Its GPUs count again once it is gone.
func TestFilterPassesWhatPodsBeingDeletedHold(t *testing.T) {
	e := newEnv(t, testConfig(), gpuNodes("n", 1, 2)...)
	stay := bound("stay", "n-0", 1, 0, t0)
	victim := bound("victim", "n-0", 1, 0, t0)
	e.add(stay, victim)
	next := builders.Pod("default", "next").GPU(1).Obj()
	e.add(next)
	require.Equal(t, "insufficient nvidia.com/gpu: needs 1, 0 free", e.filter(next).Failed["n-0"])

	deleting := victim.DeepCopy()
	deleting.DeletionTimestamp = &metav1.Time{Time: t0}
	e.add(deleting)
	require.Equal(t, []string{"n-0"}, e.filter(next).Feasible)
	two := builders.Pod("default", "two").GPU(2).Obj()
	e.add(two)
	require.Equal(t, "insufficient nvidia.com/gpu: needs 2, 0 free", e.filter(two).Failed["n-0"], "what stays bound still counts")

	e.m.DeletePod(deleting.UID)
	require.Equal(t, []string{"n-0"}, e.filter(next).Feasible)
	require.Equal(t, "insufficient nvidia.com/gpu: needs 2, 1 free", e.filter(two).Failed["n-0"], "nothing is left counted as leaving")
}
