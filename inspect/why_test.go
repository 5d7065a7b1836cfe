package inspect

import (
	"strings"
	"testing"
	"time"

	"github.com/lockstep-sched/lockstep/views"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
)

func TestWhy(t *testing.T) {
	pending := aPod("ml", "big-0").Gang("big", 3).Obj()
	for _, tc := range []struct {
		name string
		pod  *corev1.Pod
		gang *views.GangStatus
		// want are the parts the paragraph must hold, in this order.
		want []string
		// not are words it must not hold.
		not []string
		// facts are what lockstep's other pages say; zero: unread.
		facts Facts
	}{{
		name: "waiting in line behind another gang",
		pod:  pending,
		gang: aGang("ml", "big", 3).total(4).
			reason("3 members need 6 nvidia.com/gpu, 2 free; gang ml/small holds 4 in reservations").
			line(2, 2, "priority 0; behind 0 gangs of higher priority and 1 of equal priority waiting longer").
			pendingBecause("big-0", "scheduler: 0/3 nodes are available: 1 Insufficient nvidia.com/gpu").member("big-1", "Pending", "").member("big-2", "Pending", "").ptr(),
		not: []string{"0/3 nodes are available"},
		want: []string{
			"Pod ml/big-0 is a member of gang ml/big (read from Koordinator annotations), which is Waiting: 0 of its min-available 3 bound, of 4 in all.",
			"This pod is pending.",
			"It is number 2 in line, of 2 gangs waiting (priority 0; behind 0 gangs of higher priority and 1 of equal priority waiting longer).",
			"It waits because 3 members need 6 nvidia.com/gpu, 2 free; gang ml/small holds 4 in reservations.",
			"What would let it run: free 4 more nvidia.com/gpu in the cluster (its quorum needs 6, 2 are free)",
			"; or lower min-available (now 3) so that a smaller quorum fits",
			"; or gang ml/small releasing the 4 it holds in reservations",
			"; or its turn: 1 gang ahead of it in line go first",
		},
	}, {
		name: "quorum bigger than every GPU in the cluster",
		pod:  pending,
		gang: aGang("ml", "big", 5).
			reason("5 members need 10 nvidia.com/gpu, 8 free").
			line(1, 1, "priority 0; behind 0 gangs of higher priority and 0 of equal priority waiting longer").ptr(),
		facts: Facts{ClusterGPUs: 8},
		want: []string{
			"It waits because 5 members need 10 nvidia.com/gpu, 8 free.",
			"What would let it run: more GPU nodes: its quorum needs 10 nvidia.com/gpu and the schedulable nodes have 8 in all",
			"; or lower min-available (now 5)",
		},
		not: []string{"free 2 more"},
	}, {
		name: "short of DRA devices of a class",
		pod:  pending,
		gang: aGang("ml", "big", 5).
			reason("5 members need 10 devices of class gpu.nvidia.com, 8 free").
			line(1, 1, "priority 0; behind 0 gangs of higher priority and 0 of equal priority waiting longer").ptr(),
		want: []string{
			"It waits because 5 members need 10 devices of class gpu.nvidia.com, 8 free.",
			"What would let it run: free 2 more devices of class gpu.nvidia.com in the cluster (its quorum needs 10, 8 are free)",
		},
	}, {
		name: "the allocator finds no devices its claims select",
		pod:  pending,
		gang: aGang("ml", "picky", 2).
			reason("node gpu-0 has not the devices ResourceClaim ml/picky-0-gpus ask (1 of class gpu.nvidia.com free)").
			line(1, 1, "priority 0; behind 0 gangs of higher priority and 0 of equal priority waiting longer").ptr(),
		want: []string{
			"What would let it run: free the devices ResourceClaim ml/picky-0-gpus select on a node (node gpu-0, for one, has not them, 1 of class gpu.nvidia.com free)",
		},
	}, {
		name: "short of GPUs on one node",
		pod:  pending,
		gang: aGang("ml", "big", 3).
			reason("3 members fit in total, but member ml/big-2 needs 4 nvidia.com/gpu on one node after placing the others: at most 2 free on one node (gpu-1)").
			line(1, 1, "priority 0; behind 0 gangs of higher priority and 0 of equal priority waiting longer").
			member("big-0", "Pending", "").ptr(),
		want: []string{
			"which is Waiting",
			"It is number 1 in line, of 1 gang waiting",
			"It waits because 3 members fit in total, but member ml/big-2 needs 4 nvidia.com/gpu on one node",
			"What would let it run: free 4 nvidia.com/gpu on one node for member ml/big-2 (at most 2 free on one node (gpu-1))",
			"; or lower min-available (now 3)",
		},
		not: []string{"its turn"},
	}, {
		name: "short in one rack",
		pod:  pending,
		gang: aGang("ml", "big", 4).
			reason("4 members x 8 nvidia.com/gpu need one rack (example.com/rack); the largest rack has 24 free (block-1/r3)").
			member("big-0", "Pending", "").ptr(),
		want: []string{
			"It waits because 4 members x 8 nvidia.com/gpu need one rack",
			"free 8 more GPUs on one rack (block-1/r3, the fullest-free, has 24 of the 32 it needs)",
			"; or relax its required topology (example.com/rack) to preferred",
		},
	}, {
		name: "queue over quota",
		pod:  pending,
		gang: aGang("ml", "big", 2).queue("Volcano Queue team-a").
			rawReason("gang ml/big waits for its queue: Volcano Queue team-a: nvidia.com/gpu would go over its limit of 4: it holds 4 and gang ml/big asks 4 more").
			member("big-0", "Pending", "").ptr(),
		want: []string{
			"It waits because waits for its queue: Volcano Queue team-a: nvidia.com/gpu would go over its limit of 4",
			"What would let it run: room in the queue's quota (Volcano Queue team-a): raise its capability or weight, or let its other work finish",
		},
		not: []string{"free 4 more"},
	}, {
		name: "reserved and waiting for members",
		pod:  aPod("ml", "pair-1").Gang("pair", 3).Obj(),
		gang: aGang("ml", "pair", 3).phase(views.PhaseReserving).expires(90*time.Second).
			reason("2 members reserved until 12:01:30; waiting for them to reach bind").
			member("pair-0", "WaitingForQuorum", "gpu-0").member("pair-1", "Reserved", "gpu-1").member("pair-2", "Pending", "").ptr(),
		want: []string{
			"which is Reserving: 0 of its min-available 3 bound.",
			"This pod has a place reserved on node gpu-1.",
			"lockstep holds capacity for its quorum for 90s more and waits for the members to reach bind",
			"What would let it run: ml/pair-2 reaching kube-scheduler before the reservation ends",
		},
		not: []string{"in line"},
	}, {
		name: "missing members",
		pod:  pending,
		gang: aGang("ml", "big", 4).reason("waiting for members: 2 of min-available 4 exist").
			pendingBecause("big-0", "waiting for Volcano or kube-batch PodGroup ml/big to exist").ptr(),
		want: []string{"This pod is pending (waiting for Volcano or kube-batch PodGroup ml/big to exist).", "What would let it run: the 2 members it lacks: whatever creates the job's pods has made 2 of 4", "; or lower min-available to 2"},
	}, {
		name: "a rejected member",
		pod:  pending,
		gang: aGang("ml", "big", 2).reason("waiting for members: 1 of min-available 2 exist").
			member("big-0", "Pending", "").rejected("big-1", "min-available 3 differs from ml/big-0's 2").ptr(),
		want: []string{"fix member ml/big-1, which lockstep refuses: min-available 3 differs from ml/big-0's 2"},
	}, {
		name: "bound",
		pod:  aPod("ml", "pair-0").Gang("pair", 2).Node("gpu-0").Phase(corev1.PodRunning).Obj(),
		gang: aGang("ml", "pair", 2).phase(views.PhaseBound).reason("quorum reached, 2 members bound in 12ms").
			member("pair-0", "Bound", "gpu-0", 0, 1).member("pair-1", "Bound", "gpu-1", 0, 1).ptr(),
		want: []string{
			"which is Bound: 2 of its min-available 2 bound.",
			"This pod is bound to node gpu-0 with GPUs 0,1.",
			"The gang runs; nothing holds it.",
		},
		not: []string{"What would let it run"},
	}, {
		name: "an extra of a bound gang",
		pod:  unschedulable(aPod("ml", "pair-2").Gang("pair", 2).Obj(), 30*time.Second, "0/2 nodes are available: 2 Insufficient nvidia.com/gpu."),
		gang: aGang("ml", "pair", 2).phase(views.PhaseBound).
			member("pair-0", "Bound", "gpu-0").member("pair-1", "Bound", "gpu-1").member("pair-2", "Pending", "").ptr(),
		want: []string{
			"The gang's quorum is bound, so this pod, beyond it, schedules as an ordinary pod.",
			"It is not scheduled yet; kube-scheduler said Unschedulable 30s ago: 0/2 nodes are available: 2 Insufficient nvidia.com/gpu.",
		},
	}, {
		name: "not a gang member, bound",
		pod:  aPod("ml", "web").Node("cpu-0").Phase(corev1.PodRunning).Obj(),
		want: []string{
			"Pod ml/web is not a member of any gang: lockstep places it as an ordinary pod, on its own, with nothing to wait for.",
			"It is bound to node cpu-0 (phase Running).",
		},
	}, {
		name: "not a gang member, unschedulable",
		pod:  unschedulable(aPod("ml", "solo").GPU(16).Obj(), 2*time.Minute, "0/2 nodes are available: 2 Insufficient nvidia.com/gpu."),
		want: []string{
			"is not a member of any gang",
			"It is not scheduled yet; kube-scheduler said Unschedulable 2m ago: 0/2 nodes are available: 2 Insufficient nvidia.com/gpu.",
		},
	}, {
		name: "gang markers lockstep has not seen",
		pod:  aPod("ml", "lost-0").Gang("lost", 2).SchedulerName("other").Obj(),
		want: []string{
			"Pod ml/lost-0 carries the markers of gang ml/lost, but lockstep lists no such gang",
			`this pod's schedulerName is "other"`,
			"no scheduler has reported on it",
		},
	}} {
		t.Run(tc.name, func(t *testing.T) {
			got := Why(Case{Pod: tc.pod, Gang: tc.gang, Now: now, Facts: tc.facts})
			assertInOrder(t, got, tc.want)
			for _, n := range tc.not {
				assert.NotContains(t, got, n)
			}
			assert.NotContains(t, got, "\n", "one paragraph")
		})
	}
}

// assertInOrder checks that each part appears in s after the one before it.
func assertInOrder(t *testing.T, s string, parts []string) {
	t.Helper()
	rest := s
	for _, p := range parts {
		i := strings.Index(rest, p)
		require.GreaterOrEqual(t, i, 0, "want %q after the previous part in:\n%s", p, s)
		rest = rest[i+len(p):]
	}
}

func TestGangOf(t *testing.T) {
	gangs := []views.GangStatus{
		aGang("a", "one", 1).member("p", "Bound", "n").build(),
		aGang("b", "two", 1).member("p", "Pending", "").build(),
	}
	require.NotNil(t, GangOf(gangs, "b/p"))
	assert.Equal(t, "two", GangOf(gangs, "b/p").Name)
	assert.Nil(t, GangOf(gangs, "c/p"))
}
