package gang

import (
	"fmt"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/lockstep-sched/lockstep/dialect"
	"github.com/lockstep-sched/lockstep/gangspec"
	"github.com/lockstep-sched/lockstep/test/lib/builders"

	"github.com/lockstep-sched/lockstep/views"
)

// uids are the UIDs builders give the named pods of namespace default.
func uids(names ...string) []types.UID {
	out := make([]types.UID, len(names))
	for i, name := range names {
		out[i] = builders.UIDFor("default", name)
	}
	return out
}

// boundOn binds the pods perNode to a node, n-0 first, as lockstep's informer shows pods bound.
func boundOn(perNode int, pods []*corev1.Pod) []*corev1.Pod {
	for i, p := range pods {
		p.Spec.NodeName = fmt.Sprintf("n-%d", i/perNode)
	}
	return pods
}

// fillWithOrdinary binds four 1-GPU ordinary pods, low-<node>-<i>, to each named node.
func fillWithOrdinary(e *env, nodes ...string) {
	for _, node := range nodes {
		for i := range 4 {
			e.add(builders.Pod("default", fmt.Sprintf("low-%s-%d", node, i)).GPU(1).Node(node).Obj())
		}
	}
}

// preemptor is an ordinary pod of priority 100 asking for gpus GPUs.
func preemptor(gpus int64) *corev1.Pod {
	return builders.Pod("default", "urgent").GPU(gpus).Priority(100).Obj()
}

// holdN0 leaves gang held (2 x 1 GPU, at priority) reserving on n-0 beside two bound ordinary
// pods, n-1 full, and returns a 3-GPU preemptor.
func holdN0(priority int32) func(e *env) *corev1.Pod {
	return func(e *env) *corev1.Pod {
		fillWithOrdinary(e, "n-1")
		held := members("default", "held", "held", 2, 2, 1, atPriority(priority))
		e.add(held...)
		require.Equal(e.t, "n-0", e.filterOne(held[0]))
		for i := range 2 {
			e.add(builders.Pod("default", fmt.Sprintf("low-n-0-%d", i)).GPU(1).Node("n-0").Obj())
		}
		return preemptor(3)
	}
}

// The scheduler's candidates are kept only where evicting the victims breaks no bound gang and
// makes room for the pod beside what stays.
func TestPreempt(t *testing.T) {
	cases := []struct {
		name string
		// setup builds the cluster on two 4-GPU nodes, n-0 and n-1, and returns the preemptor.
		setup      func(e *env) *corev1.Pod
		candidates map[string][]types.UID
		kept       []string
		dropped    map[string]string
	}{
		{
			name:       "ordinary victims make room",
			setup:      func(e *env) *corev1.Pod { fillWithOrdinary(e, "n-0", "n-1"); return preemptor(1) },
			candidates: map[string][]types.UID{"n-0": uids("low-n-0-0"), "n-1": uids("low-n-1-3")},
			kept:       []string{"n-0", "n-1"},
		},
		{
			name: "a bound gang with members to spare above its quorum",
			setup: func(e *env) *corev1.Pod {
				e.add(boundOn(2, members("default", "elastic", "w", 4, 2, 2))...)
				return preemptor(2)
			},
			candidates: map[string][]types.UID{"n-0": uids("w-0"), "n-1": uids("w-3")},
			kept:       []string{"n-0", "n-1"},
		},
		{
			name: "a victim that leaves its gang below quorum",
			setup: func(e *env) *corev1.Pod {
				e.add(boundOn(2, members("default", "mpi", "w", 4, 4, 2))...)
				return preemptor(2)
			},
			candidates: map[string][]types.UID{"n-0": uids("w-0"), "n-1": uids("w-3")},
			dropped: map[string]string{
				"n-0": "gang default/mpi: evicting default/w-0 would leave 3 bound of its min-available 4; lockstep never lets a bound gang fall below its quorum",
				"n-1": "gang default/mpi: evicting default/w-3 would leave 3 bound of its min-available 4; lockstep never lets a bound gang fall below its quorum",
			},
		},
		{
			name: "two victims of one gang on one node count together",
			setup: func(e *env) *corev1.Pod {
				e.add(boundOn(2, members("default", "mpi", "w", 4, 3, 2))...)
				return preemptor(4)
			},
			candidates: map[string][]types.UID{"n-0": uids("w-0", "w-1")},
			dropped: map[string]string{
				"n-0": "gang default/mpi: evicting default/w-0, default/w-1 would leave 2 bound of its min-available 3; lockstep never lets a bound gang fall below its quorum",
			},
		},
		{
			name: "two victims of one gang on one node, quorum kept",
			setup: func(e *env) *corev1.Pod {
				e.add(boundOn(2, members("default", "mpi", "w", 4, 2, 2))...)
				return preemptor(4)
			},
			candidates: map[string][]types.UID{"n-0": uids("w-0", "w-1")},
			kept:       []string{"n-0"},
		},
		{
			name: "a task's own quorum",
			setup: func(e *env) *corev1.Pod {
				e.m.SetGroup(volcanoRules("tf", &gangspec.Spec{MinAvailable: 3, MinPerTask: map[string]int{"ps": 1, "worker": 2}}, nil))
				e.add(boundOn(2, volcanoMembers("tf", 2, "ps", "worker", "worker", "worker"))...)
				return preemptor(2)
			},
			candidates: map[string][]types.UID{"n-0": uids("ps-0"), "n-1": uids("worker-2")},
			kept:       []string{"n-1"},
			dropped: map[string]string{
				"n-0": "gang default/tf: evicting default/ps-0 would leave 3 bound of its min-available 3 (task ps: 0 of 1); lockstep never lets a bound gang fall below its quorum",
			},
		},
		{
			name: "a gang whose members go only together (disruptionMode all) loses none alone",
			setup: func(e *env) *corev1.Pod {
				e.m.SetGroup(GroupRules{Key: dialect.NativeKey("default", "tf"), Namespace: "default", Name: "tf",
					Spec: &gangspec.Spec{Namespace: "default", Name: "tf", MinAvailable: 2, DisruptAll: true, Source: "Kubernetes PodGroup default/tf"}})
				for i := range 4 {
					e.add(builders.Pod("default", fmt.Sprintf("w-%d", i)).GPU(2).CPU("1").Memory("1Gi").PodGroup("tf").Node(fmt.Sprintf("n-%d", i/2)).Obj())
				}
				return preemptor(2)
			},
			candidates: map[string][]types.UID{"n-0": uids("w-0"), "n-1": uids("w-2", "w-3")},
			dropped: map[string]string{
				"n-0": "gang default/tf: Kubernetes PodGroup default/tf says its members go only together (disruptionMode all); evicting default/w-0 would leave the other 3",
				"n-1": "gang default/tf: Kubernetes PodGroup default/tf says its members go only together (disruptionMode all); evicting default/w-2, default/w-3 would leave the other 2",
			},
		},
		{
			name: "the preemptor is a member of a gang without quorum",
			setup: func(e *env) *corev1.Pod {
				fillWithOrdinary(e, "n-0", "n-1")
				pending := members("default", "pending", "p", 2, 2, 1, atPriority(100))
				e.add(pending...)
				return pending[0]
			},
			candidates: map[string][]types.UID{"n-0": uids("low-n-0-0"), "n-1": uids("low-n-1-0")},
			dropped: map[string]string{
				"n-0": "gang default/pending has no quorum bound: lockstep places its members together, and lets the scheduler evict nothing for one of them",
				"n-1": "gang default/pending has no quorum bound: lockstep places its members together, and lets the scheduler evict nothing for one of them",
			},
		},
		{
			name: "the preemptor is a member of a gang lockstep has not seen",
			setup: func(e *env) *corev1.Pod {
				fillWithOrdinary(e, "n-0")
				return members("default", "unseen", "u", 2, 2, 1, atPriority(100))[0]
			},
			candidates: map[string][]types.UID{"n-0": uids("low-n-0-0")},
			dropped: map[string]string{
				"n-0": "gang default/unseen has no quorum bound: lockstep places its members together, and lets the scheduler evict nothing for one of them",
			},
		},
		{
			name: "the preemptor is a member of a gang past quorum",
			setup: func(e *env) *corev1.Pod {
				fillWithOrdinary(e, "n-1")
				elastic := members("default", "elastic", "w", 3, 2, 2, atPriority(100))
				e.add(boundOn(2, elastic[:2])...)
				e.add(elastic[2])
				return elastic[2]
			},
			candidates: map[string][]types.UID{"n-1": uids("low-n-1-0", "low-n-1-1")},
			kept:       []string{"n-1"},
		},
		{
			name:       "a node another gang's reservation holds",
			setup:      holdN0(100),
			candidates: map[string][]types.UID{"n-0": uids("low-n-0-0", "low-n-0-1")},
			dropped: map[string]string{
				"n-0": "the pod does not fit even with its victims evicted: 2 nvidia.com/gpu reserved for gang default/held: needs 3, 2 free outside reservations",
			},
		},
		{
			name:       "a lower-priority gang's reservation yields, as it does at filter",
			setup:      holdN0(0),
			candidates: map[string][]types.UID{"n-0": uids("low-n-0-0", "low-n-0-1")},
			kept:       []string{"n-0"},
		},
		{
			name:  "victims lockstep does not know, or knows elsewhere, free nothing",
			setup: func(e *env) *corev1.Pod { fillWithOrdinary(e, "n-0", "n-1"); return preemptor(1) },
			candidates: map[string][]types.UID{
				"n-0": {"uid-nobody-knows"},
				"n-1": uids("low-n-0-0"),
			},
			dropped: map[string]string{
				"n-0": "the pod does not fit even with its victims evicted: insufficient nvidia.com/gpu: needs 1, 0 free",
				"n-1": "the pod does not fit even with its victims evicted: insufficient nvidia.com/gpu: needs 1, 0 free",
			},
		},
		{
			name:       "a node lockstep has not seen, and a candidate without victims",
			setup:      func(e *env) *corev1.Pod { return preemptor(1) },
			candidates: map[string][]types.UID{"ghost": uids("low-ghost-0"), "n-0": nil},
			dropped:    map[string]string{"ghost": "lockstep has not seen this node yet", "n-0": "no victims named"},
		},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			e := newEnv(t, testConfig(), gpuNodes("n", 2, 4)...)
			pod := tc.setup(e)
			before := e.m.Status("")
			got := e.m.Preempt(pod, tc.candidates)
			require.Equal(t, tc.kept, got.Kept)
			if tc.dropped == nil {
				tc.dropped = map[string]string{}
			}
			require.Equal(t, tc.dropped, got.Dropped)
			if readMembership(e.m.cfg.Reader, pod).Gang == "" {
				// (For a gang member lockstep plans its gang, see admitForPreemption.)
				require.Equal(t, before, e.m.Status(""), "reviewing an ordinary pod's candidates changes nothing")
			}
		})
	}
}

// The members of a gang whose commit is binding its quorum are not evicted mid-commit, nor once
// the gang is bound at exactly its quorum.
func TestPreemptSparesAGangBindingItsQuorum(t *testing.T) {
	cfg := testConfig()
	cfg.BindWait = 30 * time.Second
	e := newEnv(t, cfg, gpuNodes("n", 2, 2)...)
	pods := members("default", "mpi", "w", 2, 2, 2)
	pods[0].Spec.NodeName = "n-0"
	e.add(pods...)
	release := make(chan struct{})
	e.binder.Block(release)
	held := e.bindAsync(pods[1], e.filterOne(pods[1]))
	require.Eventually(t, func() bool { return e.status("default", "mpi").Phase == views.PhaseBinding }, 5*time.Second, 2*time.Millisecond)

	candidates := map[string][]types.UID{"n-0": uids("w-0")}
	require.Equal(t, map[string]string{"n-0": "gang default/mpi is binding its quorum; evicting default/w-0 would leave it partial"},
		e.m.Preempt(preemptor(2), candidates).Dropped)

	close(release)
	require.NoError(t, recv(t, held, "bind w-1"))
	require.Equal(t, map[string]string{"n-0": "gang default/mpi: evicting default/w-0 would leave 1 bound of its min-available 2; lockstep never lets a bound gang fall below its quorum"},
		e.m.Preempt(preemptor(2), candidates).Dropped)
}
