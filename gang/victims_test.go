package gang

import (
	"context"
	"fmt"
	"sort"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/types"

	"github.com/lockstep-sched/lockstep/test/lib/builders"
	"github.com/lockstep-sched/lockstep/wellknown"

	"github.com/lockstep-sched/lockstep/views"
)

// fakeEvicter records evictions and refuses those of the pods a PodDisruptionBudget would keep.
type fakeEvicter struct {
	mu      sync.Mutex
	guarded map[string]bool // ns/name
	evicted []string
	done    chan struct{} // gets a value per real eviction
}

func newFakeEvicter(guarded ...string) *fakeEvicter {
	f := &fakeEvicter{guarded: map[string]bool{}, done: make(chan struct{}, 100)}
	for _, g := range guarded {
		f.guarded[g] = true
	}
	return f
}

func (f *fakeEvicter) Evict(_ context.Context, namespace, name string, _ types.UID, dryRun bool) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.guarded[namespace+"/"+name] {
		return apierrors.NewTooManyRequests("Cannot evict pod as it would violate the pod's disruption budget.", 0)
	}
	if !dryRun {
		f.evicted = append(f.evicted, namespace+"/"+name)
		f.done <- struct{}{}
	}
	return nil
}

func (f *fakeEvicter) waitEvicted(t *testing.T, n int) []string {
	t.Helper()
	for range n {
		recv(t, f.done, "an eviction")
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	out := append([]string(nil), f.evicted...)
	sort.Strings(out)
	return out
}

// bound is an ordinary pod bound to node.
func bound(name, node string, gpus int64, prio int32, created time.Time) *corev1.Pod {
	return builders.Pod("default", name).GPU(gpus).CPU("1").Memory("1Gi").Priority(prio).Node(node).Created(created).Obj()
}

func TestVictimChoice(t *testing.T) {
	older, newer := t0.Add(-time.Hour), t0.Add(-time.Minute)
	cases := []struct {
		name    string
		nodes   int
		running []*corev1.Pod
		gangs   map[string][]*corev1.Pod // bound gangs, by name
		guarded []string
		// verb is what the preemptor's reason says it does; "preempting" when empty.
		verb string
		// the preemptor: a gang of members x gpus at priority 1000
		members int
		gpus    int64
		want    []string // evicted, sorted; nil: nothing, the gang waits
	}{
		{
			name:  "lowest priority first",
			nodes: 2,
			running: []*corev1.Pod{
				bound("p10", "n-0", 8, 10, older),
				bound("p50", "n-1", 8, 50, newer),
			},
			members: 2, gpus: 4,
			want: []string{"default/p10"},
		},
		{
			name:  "fewest victims among equals",
			nodes: 2,
			running: []*corev1.Pod{
				bound("big", "n-0", 8, 10, older),
				bound("s0", "n-1", 2, 10, newer), bound("s1", "n-1", 2, 10, newer),
				bound("s2", "n-1", 2, 10, newer), bound("s3", "n-1", 2, 10, newer),
			},
			members: 2, gpus: 4,
			want: []string{"default/big"},
		},
		{
			name:  "least work lost among equals",
			nodes: 2,
			running: []*corev1.Pod{
				bound("old", "n-0", 8, 10, older),
				bound("young", "n-1", 8, 10, newer),
			},
			members: 1, gpus: 8,
			want: []string{"default/young"},
		},
		{
			name:  "a bound gang goes whole, never in part",
			nodes: 2,
			gangs: map[string][]*corev1.Pod{"lowgang": onNodes(members("default", "lowgang", "lowgang", 4, 4, 4, atPriority(10)), "n-0", "n-0", "n-1", "n-1")},
			// Needs only one node's 8 GPUs, yet the gang's 4 members all go.
			members: 2, gpus: 4,
			want: []string{"default/lowgang-0", "default/lowgang-1", "default/lowgang-2", "default/lowgang-3"},
		},
		{
			name:    "a lower-priority gang's members beyond its quorum go before the gang",
			nodes:   2,
			gangs:   map[string][]*corev1.Pod{"lowgang": onNodes(members("default", "lowgang", "lowgang", 4, 2, 4, atPriority(10)), "n-0", "n-0", "n-1", "n-1")},
			members: 2, gpus: 4,
			want: []string{"default/lowgang-2", "default/lowgang-3"},
			verb: "taking back pod default/lowgang-2 beyond gang default/lowgang's quorum",
		},
		{
			name:    "an ordinary pod rather than a gang of equal priority",
			nodes:   2,
			running: []*corev1.Pod{bound("solo", "n-1", 8, 10, older)},
			gangs:   map[string][]*corev1.Pod{"lowgang": onNodes(members("default", "lowgang", "lowgang", 2, 2, 4, atPriority(10)), "n-0", "n-0")},
			members: 1, gpus: 8,
			want: []string{"default/solo"},
		},
		{
			name:    "equal or higher priority is never a victim",
			nodes:   1,
			running: []*corev1.Pod{bound("peer", "n-0", 8, 1000, older)},
			members: 1, gpus: 8,
			want: nil,
		},
		{
			name:  "a budget that refuses keeps its pod; another is chosen next time",
			nodes: 2,
			running: []*corev1.Pod{
				bound("guarded", "n-0", 8, 10, newer),
				bound("free", "n-1", 8, 20, older),
			},
			guarded: []string{"default/guarded"},
			members: 1, gpus: 8,
			want: []string{"default/free"},
		},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			ev := newFakeEvicter(tc.guarded...)
			cfg := testConfig()
			cfg.Evicter = ev
			e := newEnv(t, cfg, gpuNodes("n", tc.nodes, 8)...)
			e.add(tc.running...)
			for _, g := range tc.gangs {
				e.add(g...)
			}
			pre := members("default", "urgent", "urgent", tc.members, tc.members, tc.gpus, atPriority(1000))
			e.add(pre...)

			r := e.filter(pre[0])
			if tc.want == nil {
				require.Empty(t, r.Feasible)
				require.Equal(t, views.PhaseWaiting, e.status("default", "urgent").Phase)
				return
			}
			if len(tc.guarded) > 0 {
				// The first plan picks the cheaper, guarded pod; its dry run is refused and the
				// gang plans again without it.
				e.waitEvent(corev1.EventTypeWarning, wellknown.ReasonGangWaiting, "preemption given up", tc.guarded[0])
				require.Equal(t, views.PhaseWaiting, e.status("default", "urgent").Phase)
				r = e.filter(pre[0])
			}
			require.Len(t, r.Feasible, 1, "%v", r.Failed)
			require.Equal(t, tc.want, ev.waitEvicted(t, len(tc.want)))
			st := e.status("default", "urgent")
			require.Equal(t, views.PhaseReserving, st.Phase)
			verb := tc.verb
			if verb == "" {
				verb = "preempting"
			}
			require.Contains(t, st.Reason, verb)
		})
	}
}

// onNodes binds pods to the nodes given, in turn.
func onNodes(pods []*corev1.Pod, nodes ...string) []*corev1.Pod {
	for i, p := range pods {
		p.Spec.NodeName = nodes[i]
	}
	return pods
}

func TestPreemptionNeverAndOff(t *testing.T) {
	for _, tc := range []struct {
		name  string
		never bool
		off   bool
	}{{"preemptionPolicy Never", true, false}, {"gang preemption off", false, true}} {
		t.Run(tc.name, func(t *testing.T) {
			ev := newFakeEvicter()
			cfg := testConfig()
			if !tc.off {
				cfg.Evicter = ev
			}
			e := newEnv(t, cfg, gpuNodes("n", 1, 8)...)
			e.add(bound("low", "n-0", 8, 10, t0))
			pre := members("default", "urgent", "urgent", 2, 2, 4, atPriority(1000))
			if tc.never {
				never := corev1.PreemptNever
				for _, p := range pre {
					p.Spec.PreemptionPolicy = &never
				}
			}
			e.add(pre...)
			require.Empty(t, e.filter(pre[0]).Feasible)
			require.Equal(t, views.PhaseWaiting, e.status("default", "urgent").Phase)
			ev.mu.Lock()
			defer ev.mu.Unlock()
			require.Empty(t, ev.evicted, fmt.Sprint(tc.name))
		})
	}
}

// failingEvicter passes every dry run and fails every eviction: the pod changed in between.
type failingEvicter struct{}

func (failingEvicter) Evict(_ context.Context, namespace, name string, _ types.UID, dryRun bool) error {
	if dryRun {
		return nil
	}
	return fmt.Errorf("evicting pod %s/%s: the apiserver failed", namespace, name)
}

// An eviction that fails after its dry run passed is reported where people look, not only logged.
func TestEvictionFailureIsReported(t *testing.T) {
	cfg := testConfig()
	cfg.Evicter = failingEvicter{}
	e := newEnv(t, cfg, gpuNodes("n", 1, 8)...)
	e.add(bound("low", "n-0", 8, 10, t0))
	pre := members("default", "urgent", "urgent", 1, 1, 8, atPriority(1000))
	e.add(pre...)
	require.Len(t, e.filter(pre[0]).Feasible, 1)
	e.waitEvent(corev1.EventTypeWarning, wellknown.ReasonGangPreempting, "evicting pod default/low failed after its dry run passed")
	require.Contains(t, e.status("default", "urgent").Reason, "the apiserver failed")
}
