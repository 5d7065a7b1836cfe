package gang

import (
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/lockstep-sched/lockstep/test/lib/builders"

	"github.com/lockstep-sched/lockstep/views"
)

func TestStatus(t *testing.T) {
	e := newEnv(t, testConfig(), gpuNodes("n", 4, 2)...)
	gangAt := func(ns, gang, name string, created time.Time) *builders.PodBuilder {
		return builders.Pod(ns, name).GPU(1).Gang(gang, 2).WaitingTime("1m").TotalNumber(3).Created(created)
	}
	// Created out of name order, and delivered in yet another order.
	e.add(
		gangAt("team-b", "zeta", "z-0", t0).Obj(),
		gangAt("team-a", "mpi", "c", t0.Add(3*time.Second)).Obj(),
		gangAt("team-a", "mpi", "a", t0.Add(1*time.Second)).Obj(),
		gangAt("team-a", "mpi", "b", t0.Add(1*time.Second)).Obj(), // same time as a: name decides
		gangAt("team-a", "alpha", "x", t0).Obj(),
		builders.Pod("team-a", "ordinary").GPU(1).Obj(),
	)

	t.Run("namespace filter and order", func(t *testing.T) {
		all := e.m.Status("")
		var keys []string
		for _, g := range all {
			keys = append(keys, g.Namespace+"/"+g.Name)
		}
		require.Equal(t, []string{"team-a/alpha", "team-a/mpi", "team-b/zeta"}, keys)

		onlyB := e.m.Status("team-b")
		require.Len(t, onlyB, 1)
		require.Equal(t, "zeta", onlyB[0].Name)
		require.Empty(t, e.m.Status("nobody"))
		require.NotNil(t, e.m.Status("nobody"), "an empty list, not null, for JSON")
	})

	t.Run("members oldest first and spec shown", func(t *testing.T) {
		st := e.status("team-a", "mpi")
		var pods []string
		for _, mb := range st.Members {
			pods = append(pods, mb.Pod)
			require.Equal(t, "nvidia.com/gpu=1", mb.Requests)
		}
		require.Equal(t, []string{"team-a/a", "team-a/b", "team-a/c"}, pods)
		require.Equal(t, 2, st.MinAvailable)
		require.Equal(t, 3, st.TotalNumber)
		require.Equal(t, "1m0s", st.WaitingTime)
		require.Equal(t, views.PhaseWaiting, st.Phase)
		require.Equal(t, "no member has reached lockstep's filter yet", st.Reason)
	})

	t.Run("reservation expiry only while reserving", func(t *testing.T) {
		st := e.status("team-a", "mpi")
		require.Nil(t, st.ReservationExpires)

		a := builders.Pod("team-a", "a").GPU(1).Gang("mpi", 2).WaitingTime("1m").TotalNumber(3).Created(t0.Add(time.Second)).Obj()
		b := builders.Pod("team-a", "b").GPU(1).Gang("mpi", 2).WaitingTime("1m").TotalNumber(3).Created(t0.Add(time.Second)).Obj()
		before := time.Now()
		na := e.filterOne(a)
		st = e.status("team-a", "mpi")
		require.Equal(t, views.PhaseReserving, st.Phase)
		require.NotNil(t, st.ReservationExpires)
		require.WithinDuration(t, before.Add(time.Minute), *st.ReservationExpires, 5*time.Second)
		require.NotNil(t, st.Members[0].ReservationExpires, "a holds a slot")
		require.NotNil(t, st.Members[1].ReservationExpires, "b has a planned slot")
		require.Nil(t, st.Members[2].ReservationExpires, "c is beyond min-available")
		require.Equal(t, "Pending", st.Members[2].State)

		held := e.bindAsync(a, na)
		nb := e.filterOne(b)
		require.NoError(t, e.bind(b, nb))
		require.NoError(t, recv(t, held, "bind a"))

		st = e.status("team-a", "mpi")
		require.Equal(t, views.PhaseBound, st.Phase)
		require.Nil(t, st.ReservationExpires)
		for _, mb := range st.Members {
			require.Nil(t, mb.ReservationExpires, mb.Pod)
		}
		require.Equal(t, "Bound", st.Members[0].State)
		require.Equal(t, na, st.Members[0].Node)
	})

	t.Run("scheduler condition explains a member lockstep never saw at filter", func(t *testing.T) {
		e.add(builders.Pod("team-b", "z-0").GPU(1).Gang("zeta", 2).WaitingTime("1m").TotalNumber(3).Created(t0).
			Unschedulable("0/4 nodes are available: 4 node(s) had untolerated taint").Obj())
		st := e.status("team-b", "zeta")
		require.Equal(t, "scheduler: 0/4 nodes are available: 4 node(s) had untolerated taint", st.Members[0].Reason)
		require.Equal(t, st.Members[0].Reason, st.Reason)
	})
}
