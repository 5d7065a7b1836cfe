package gang

import (
	"errors"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"

	"github.com/lockstep-sched/lockstep/test/lib/builders"
	"github.com/lockstep-sched/lockstep/wellknown"

	"github.com/lockstep-sched/lockstep/views"
)

// Binds are held until min-available members have reached bind; then all are bound together.
func TestBindWaitsForQuorum(t *testing.T) {
	cfg := testConfig()
	cfg.BindWait = 30 * time.Second // the quorum, not the hold timer, must end these binds
	e := newEnv(t, cfg, gpuNodes("n", 4, 2)...)
	pods := members("default", "mpi", "w", 4, 4, 2)
	e.add(pods...)
	nodes := make([]string, len(pods))
	for i, p := range pods {
		nodes[i] = e.filterOne(p)
	}
	require.ElementsMatch(t, e.nodes, nodes)

	held := make([]<-chan error, 3)
	for i := range held {
		held[i] = e.bindAsync(pods[i], nodes[i])
	}
	e.waitStates("default", "mpi", map[string]string{"default/w-0": "WaitingForQuorum", "default/w-1": "WaitingForQuorum", "default/w-2": "WaitingForQuorum"})
	require.Equal(t, 0, e.binder.Count(), "nothing may be bound before quorum")
	for i, ch := range held {
		requireNoValue(t, ch, pods[i].Name)
	}
	st := e.status("default", "mpi")
	require.Equal(t, views.PhaseReserving, st.Phase)
	require.Contains(t, st.Reason, "3 of 4 members ready to bind")

	require.NoError(t, e.bind(pods[3], nodes[3]))
	for i, ch := range held {
		require.NoError(t, recv(t, ch, pods[i].Name))
	}
	want := map[string]string{}
	for i, p := range pods {
		want[keyOf(p)] = nodes[i]
	}
	require.Equal(t, want, e.binder.Bindings())
	require.Equal(t, 4, e.binder.Count(), "each member bound exactly once")

	st = e.status("default", "mpi")
	require.Equal(t, views.PhaseBound, st.Phase)
	require.Equal(t, 4, st.Bound)
	require.Nil(t, st.ReservationExpires)
	e.waitEvent(corev1.EventTypeNormal, wellknown.ReasonGangBound, "quorum reached")

	// The bound GPUs are taken: an ordinary pod finds no room.
	require.Empty(t, e.filter(builders.Pod("default", "plain").GPU(1).Obj()).Feasible)
}

// A bind held past BindWait answers ErrAwaitingQuorum, yet the member keeps its place: when the
// quorum arrives, lockstep binds it itself.
func TestBindWaitTimeoutKeepsSlot(t *testing.T) {
	e := newEnv(t, testConfig(), gpuNodes("n", 2, 2)...)
	pods := members("default", "pair", "w", 2, 2, 2)
	e.add(pods...)
	n0 := e.filterOne(pods[0])

	start := time.Now()
	err := e.bind(pods[0], n0)
	require.ErrorIs(t, err, ErrAwaitingQuorum)
	require.GreaterOrEqual(t, time.Since(start), testConfig().BindWait)
	require.Contains(t, err.Error(), "1 of 2 members ready")
	require.Equal(t, 0, e.binder.Count())

	st := e.status("default", "pair")
	require.Equal(t, views.PhaseReserving, st.Phase)
	require.Equal(t, "WaitingForQuorum", st.Members[0].State)
	require.Equal(t, n0, st.Members[0].Node)

	// The slot stays held: an ordinary pod may not take it.
	plain := builders.Pod("default", "plain").GPU(1).Obj()
	require.NotContains(t, e.filter(plain).Feasible, n0)

	n1 := e.filterOne(pods[1])
	require.NoError(t, e.bind(pods[1], n1))
	require.Equal(t, map[string]string{"default/w-0": n0, "default/w-1": n1}, e.binder.Bindings())
	require.Equal(t, views.PhaseBound, e.status("default", "pair").Phase)

	// The scheduler's retry of w-0 finds it bound where it asks; elsewhere is an error.
	require.NoError(t, e.bind(pods[0], n0))
	require.ErrorContains(t, e.bind(pods[0], n1), "already bound to node "+n0)
	require.Equal(t, 2, e.binder.Count())
}

// A reservation that does not reach quorum in its waiting time expires and frees its capacity.
func TestReservationExpiry(t *testing.T) {
	cfg := testConfig()
	cfg.BindWait = 30 * time.Second // expiry, not the hold timer, must end the held bind
	e := newEnv(t, cfg, gpuNodes("n", 2, 2)...)
	a := members("default", "a", "a", 2, 2, 2, func(b *builders.PodBuilder) { b.WaitingTime("300ms") })
	b := members("default", "b", "b", 1, 1, 2)
	e.add(a...)
	e.add(b...)

	a0 := e.filterOne(a[0])
	require.Equal(t, views.PhaseReserving, e.status("default", "a").Phase)
	r := e.filter(b[0])
	require.Empty(t, r.Feasible, "a holds every GPU")
	require.Contains(t, r.Failed["n-0"], "gang default/a holds 4 in reservations")

	held := e.bindAsync(a[0], a0)
	err := recv(t, held, "held bind of a-0")
	require.Error(t, err)
	require.Contains(t, err.Error(), "expired")
	require.Equal(t, 0, e.binder.Count())

	require.Eventually(t, func() bool { return e.status("default", "a").Phase == views.PhaseTimedOut }, 5*time.Second, 5*time.Millisecond)
	st := e.status("default", "a")
	require.Contains(t, st.Reason, "expired")
	require.Contains(t, st.Reason, "1 of 2 members ready")
	require.Nil(t, st.ReservationExpires)
	e.waitEvent(corev1.EventTypeWarning, wellknown.ReasonGangTimedOut, "gang default/a", "expired")

	require.Eventually(t, func() bool { return len(e.filter(b[0]).Feasible) == 1 }, 5*time.Second, 5*time.Millisecond)

	// a's member is refused until its cool-down ends, so the gang it starved goes first.
	r = e.filter(a[1])
	require.Empty(t, r.Feasible)
	require.Contains(t, r.Failed["n-0"], "reservation timed out")
}

// A reservation found expired at filter, before go-cache's janitor reported it, still counts
// as a time-out: the gang cools down instead of taking the capacity straight back.
func TestExpiredReservationSeenBeforeJanitor(t *testing.T) {
	cfg := testConfig()
	cfg.ExpiryCheckInterval = time.Hour // the janitor never runs in this test
	e := newEnv(t, cfg, gpuNodes("n", 2, 2)...)
	a := members("default", "a", "a", 2, 2, 2, func(b *builders.PodBuilder) { b.WaitingTime("100ms") })
	e.add(a...)
	a0 := e.filterOne(a[0])

	// The held bind ends at the expiry time.
	err := recv(t, e.bindAsync(a[0], a0), "held bind")
	require.ErrorContains(t, err, "expired")
	require.Eventually(t, func() bool { return e.status("default", "a").Phase != views.PhaseReserving }, 5*time.Second, 5*time.Millisecond)

	r := e.filter(a[1])
	require.Empty(t, r.Feasible)
	require.Contains(t, r.Failed["n-0"], "reservation timed out")
	require.Equal(t, views.PhaseTimedOut, e.status("default", "a").Phase)
	e.waitEvent(corev1.EventTypeWarning, wellknown.ReasonGangTimedOut, "gang default/a")
}

// A binding that fails for good at commit leaves the others bound; the failed member is retried
// by the scheduler and completes the gang on its own.
func TestCommitWithBindFailure(t *testing.T) {
	cfg := testConfig()
	cfg.BindWait = 30 * time.Second
	e := newEnv(t, cfg, gpuNodes("n", 4, 1)...)
	pods := members("default", "mpi", "w", 4, 4, 1)
	e.add(pods...)
	nodes := make([]string, len(pods))
	for i, p := range pods {
		nodes[i] = e.filterOne(p)
	}
	denied := errors.New("admission webhook denied the binding")
	e.binder.Fail("default/w-2", denied)

	held := make([]<-chan error, 3)
	for i := range held {
		held[i] = e.bindAsync(pods[i], nodes[i])
	}
	e.waitStates("default", "mpi", map[string]string{"default/w-0": "WaitingForQuorum", "default/w-1": "WaitingForQuorum", "default/w-2": "WaitingForQuorum"})
	require.NoError(t, e.bind(pods[3], nodes[3]))

	for i, ch := range held {
		err := recv(t, ch, pods[i].Name)
		if i == 2 {
			require.ErrorIs(t, err, denied)
			require.Contains(t, err.Error(), "binding default/w-2 to "+nodes[2]+" failed")
		} else {
			require.NoError(t, err, pods[i].Name)
		}
	}
	require.Equal(t, map[string]string{"default/w-0": nodes[0], "default/w-1": nodes[1], "default/w-3": nodes[3]}, e.binder.Bindings())
	st := e.status("default", "mpi")
	require.Equal(t, 3, st.Bound)
	require.Equal(t, views.PhaseWaiting, st.Phase)
	require.Contains(t, st.Reason, "1 of 4 bindings failed")
	require.Contains(t, st.Reason, denied.Error())
	e.waitEvent(corev1.EventTypeWarning, wellknown.ReasonGangBindFailed, "default/mpi", denied.Error())

	// The scheduler retries w-2; the webhook lets it through this time.
	e.binder.Fail("default/w-2", nil)
	node := e.filterOne(pods[2])
	require.Equal(t, nodes[2], node, "the only free GPU")
	require.NoError(t, e.bind(pods[2], node))
	require.Len(t, e.binder.Bindings(), 4)
	st = e.status("default", "mpi")
	require.Equal(t, views.PhaseBound, st.Phase)
	require.Equal(t, 4, st.Bound)
}

// A restarted lockstep learns what is bound from the pods alone and binds only the rest.
func TestRestartRebuildsFromBoundPods(t *testing.T) {
	cfg := testConfig()
	cfg.BindWait = 30 * time.Second
	e := newEnv(t, cfg, gpuNodes("n", 4, 2)...)
	pods := members("default", "mpi", "w", 4, 4, 2)
	pods[0].Spec.NodeName = "n-0"
	pods[1].Spec.NodeName = "n-1"
	e.add(pods...)
	st := e.status("default", "mpi")
	require.Equal(t, 2, st.Bound)
	require.Equal(t, views.PhaseWaiting, st.Phase)

	n2 := e.filterOne(pods[2])
	require.Contains(t, []string{"n-2", "n-3"}, n2)
	st = e.status("default", "mpi")
	require.Equal(t, views.PhaseReserving, st.Phase)
	states := map[string]int{}
	for _, mb := range st.Members {
		states[mb.State]++
	}
	require.Equal(t, map[string]int{"Bound": 2, "Reserved": 1, "Planned": 1}, states, "a reservation for the missing two only")

	held := e.bindAsync(pods[2], n2)
	n3 := e.filterOne(pods[3])
	require.ElementsMatch(t, []string{"n-2", "n-3"}, []string{n2, n3})
	require.NoError(t, e.bind(pods[3], n3))
	require.NoError(t, recv(t, held, "bind w-2"))

	require.Equal(t, map[string]string{"default/w-2": n2, "default/w-3": n3}, e.binder.Bindings())
	require.Equal(t, 2, e.binder.Count())
	st = e.status("default", "mpi")
	require.Equal(t, views.PhaseBound, st.Phase)
	require.Equal(t, 4, st.Bound)
}

// An ordinary pod binds at once.
func TestBindOrdinaryPod(t *testing.T) {
	e := newEnv(t, testConfig(), gpuNodes("n", 1, 2)...)
	p := builders.Pod("default", "plain").GPU(2).Obj()
	e.add(p)
	require.NoError(t, e.bind(p, "n-0"))
	require.Equal(t, map[string]string{"default/plain": "n-0"}, e.binder.Bindings())
	// lockstep counts the binding before its informer reports it.
	require.Empty(t, e.filter(builders.Pod("default", "next").GPU(1).Obj()).Feasible)

	// A pod the informer has not delivered yet is fetched; an unknown one is an error.
	late := builders.Pod("default", "late").CPU("1").Obj()
	e.mu.Lock()
	e.pods["default/late"] = late
	e.mu.Unlock()
	require.NoError(t, e.bind(late, "n-0"))
	require.ErrorContains(t, e.bind(builders.Pod("default", "ghost").Obj(), "n-0"), "not found")
}

// A gang member whose reservation is gone is told so rather than bound.
func TestBindWithoutReservation(t *testing.T) {
	e := newEnv(t, testConfig(), gpuNodes("n", 2, 2)...)
	pods := members("default", "pair", "w", 2, 2, 2)
	e.add(pods...)
	err := e.bind(pods[0], "n-0")
	require.ErrorContains(t, err, "holds no reservation")
	n0 := e.filterOne(pods[0])
	other := "n-0"
	if n0 == other {
		other = "n-1"
	}
	require.ErrorContains(t, e.bind(pods[0], other), "is reserved on node "+n0)
	require.Equal(t, 0, e.binder.Count())
}
