package gang

import (
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"

	"github.com/lockstep-sched/lockstep/test/lib/builders"
)

// recordingNominator keeps every nomination the manager hands it, in order.
type recordingNominator struct {
	mu  sync.Mutex
	got []Nomination
}

func (r *recordingNominator) Nominate(ns []Nomination) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.got = append(r.got, ns...)
}

func (r *recordingNominator) all() []Nomination {
	r.mu.Lock()
	defer r.mu.Unlock()
	return slices.Clone(r.got)
}

func nominationEnv(t *testing.T, nodes ...*corev1.Node) (*env, *recordingNominator) {
	rec := &recordingNominator{}
	cfg := testConfig()
	cfg.Nominator = rec
	return newEnv(t, cfg, nodes...), rec
}

func TestNominations(t *testing.T) {
	t.Run("a reservation nominates every member but the one at filter, each to its own slot's node", func(t *testing.T) {
		e, rec := nominationEnv(t, gpuNodes("n", 4, 2)...)
		pods := members("default", "mpi", "w", 4, 4, 2)
		e.add(pods...)
		first := e.filterOne(pods[0])

		got := rec.all()
		require.Len(t, got, 3)
		for _, n := range got {
			require.NotEqual(t, pods[0].Name, n.Name, "the member at filter is in its cycle already")
			require.NotEqual(t, first, n.Node, "each 2-GPU member fills a 2-GPU node")
		}
		// Each member then passes the node it was nominated to, which is all a nominated cycle offers.
		for _, p := range pods[1:] {
			i := slices.IndexFunc(got, func(n Nomination) bool { return n.Name == p.Name })
			require.NotEqual(t, -1, i, "member %s nominated", p.Name)
			require.Equal(t, []string{got[i].Node}, e.filterNodes(p, []string{got[i].Node}).Feasible)
		}
	})

	t.Run("a reservation that expires withdraws the nominations it made", func(t *testing.T) {
		e, rec := nominationEnv(t, gpuNodes("n", 2, 2)...)
		pods := members("default", "a", "a", 2, 2, 2, func(b *builders.PodBuilder) { b.WaitingTime("100ms") })
		e.add(pods...)
		e.filterOne(pods[0])
		require.Eventually(t, func() bool { return len(rec.all()) == 2 }, 5*time.Second, 10*time.Millisecond, "nomination, then withdrawal")
		got := rec.all()
		require.Equal(t, Nomination{Namespace: "default", Name: pods[1].Name, Was: got[0].Node}, got[1])
	})

	t.Run("a quorum that binds takes no nomination back", func(t *testing.T) {
		e, rec := nominationEnv(t, gpuNodes("n", 2, 2)...)
		pods := members("default", "b", "b", 2, 2, 2)
		e.add(pods...)
		nodes := []string{e.filterOne(pods[0]), e.filterOne(pods[1])}
		errs := []<-chan error{e.bindAsync(pods[0], nodes[0]), e.bindAsync(pods[1], nodes[1])}
		for _, ch := range errs {
			require.NoError(t, recv(t, ch, "bind"))
		}
		require.Len(t, rec.all(), 1, "one nomination, no withdrawal")
	})

	t.Run("a member taking a place planned for another withdraws the other's nomination", func(t *testing.T) {
		e, rec := nominationEnv(t, gpuNodes("n", 3, 2)...)
		pods := members("default", "c", "c", 3, 2, 2)
		e.add(pods...)
		e.filterOne(pods[0])
		planned := rec.all()
		require.Len(t, planned, 1, "min-available 2: one other member planned")
		other := pods[1]
		if planned[0].Name == other.Name {
			other = pods[2]
		}
		e.filterOne(other)
		got := rec.all()
		require.Len(t, got, 2)
		require.Equal(t, Nomination{Namespace: "default", Name: planned[0].Name, Was: planned[0].Node}, got[1])
	})

	t.Run("a reservation that evicts nominates nothing", func(t *testing.T) {
		cfg := testConfig()
		rec := &recordingNominator{}
		cfg.Nominator = rec
		cfg.Evicter = newFakeEvicter()
		e := newEnv(t, cfg, gpuNodes("n", 1, 2)...)
		e.add(builders.Pod("default", "low").GPU(2).Node("n-0").Obj())
		high := members("default", "h", "h", 2, 2, 1, func(b *builders.PodBuilder) { b.Priority(1000) })
		e.add(high...)
		r := e.filter(high[0])
		require.Len(t, r.Feasible, 1, "reserved where the lower-priority pod is evicted: %v", r.Failed)
		require.Empty(t, rec.all())
	})
}
