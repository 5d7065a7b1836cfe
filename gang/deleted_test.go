package gang

import (
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/lockstep-sched/lockstep/test/lib/builders"
)

// The scheduler can be mid-cycle for a pod when its deletion reaches lockstep; the call that
// follows carries the pod. Taken in, it would be a member no informer event ever removes: its gang
// would wait forever, and past the starvation threshold hold capacity from everyone else.
func TestLateCallForDeletedMemberBringsNothingBack(t *testing.T) {
	for _, tc := range []struct {
		verb string
		// call makes the late call and returns lockstep's answer to it.
		call   func(e *env, p *corev1.Pod, node string) string
		answer string
	}{
		{verb: "filter", call: func(e *env, p *corev1.Pod, node string) string {
			r := e.filter(p)
			require.Empty(t, r.Feasible)
			return r.Failed[node]
		}, answer: "pod default/a-0 was deleted"},
		{verb: "bind", call: func(e *env, p *corev1.Pod, node string) string {
			err := e.bind(p, node) // the pod getter still finds it, as a Get racing the deletion would
			require.Error(t, err)
			return err.Error()
		}, answer: "pod default/a-0 was deleted"},
		{verb: "preempt", call: func(e *env, p *corev1.Pod, node string) string {
			e.m.Preempt(p, map[string][]types.UID{node: nil})
			return ""
		}},
	} {
		t.Run(tc.verb, func(t *testing.T) {
			e := newEnv(t, testConfig(), gpuNodes("n", 1, 4)...)
			gang := members("default", "a", "a", 2, 2, 4) // 8 GPUs wanted, 4 exist: it waits
			e.add(gang...)
			require.NotEmpty(t, e.filter(gang[0]).Failed)
			for _, p := range gang {
				e.m.DeletePod(p.UID)
			}

			require.Contains(t, tc.call(e, gang[0], e.nodes[0]), tc.answer)
			require.Empty(t, e.m.Status("default"), "the deleted gang came back")
			require.Empty(t, e.binder.Bindings())
			whole := builders.Pod("default", "whole").GPU(4).Obj()
			require.Equal(t, e.nodes, e.filter(whole).Feasible, "the node is free for others")
		})
	}
}

// Deletions are remembered for deletedFor, and forgotten within a quarter of that more: a cluster
// deletes pods all day.
func TestDeletionsAreForgottenAfterAWhile(t *testing.T) {
	l := newLedger(nil, nil)
	l.deletePod("old", t0)
	l.deletePod("new", t0.Add(deletedFor-time.Second))
	require.True(t, l.wasDeleted("old"))
	l.deletePod("newest", t0.Add(deletedFor+deletedFor/4))
	require.False(t, l.wasDeleted("old"))
	require.True(t, l.wasDeleted("new"))
	require.True(t, l.wasDeleted("newest"))
}
