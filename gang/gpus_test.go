package gang

import (
	"fmt"
	"math/rand/v2"
	"sort"
	"testing"

	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/lockstep-sched/lockstep/gpu"
	"github.com/lockstep-sched/lockstep/test/lib/builders"
	"github.com/lockstep-sched/lockstep/wellknown"
)

// dgx1 is an 8-GPU V100 node whose GPU Feature Discovery labels map to the DGX-1 hybrid cube mesh:
// NVLink quads {0,1,2,3} and {4,5,6,7}.
func dgx1(name string) *corev1.Node {
	return builders.Node(name).GPU(8).CPU("64").Memory("512Gi").Pods(110).
		Label(gpu.LabelGPUProduct, "Tesla-V100-SXM2-16GB").Label(gpu.LabelGPUCount, "8").Obj()
}

func TestParseGPUIDs(t *testing.T) {
	cases := []struct {
		value   string
		want    int64
		ids     []int
		wantErr string
	}{
		{value: "3,1,2,0", want: 4, ids: []int{0, 1, 2, 3}},
		{value: "5", want: 1, ids: []int{5}},
		{value: "", want: 1, wantErr: "empty"},
		{value: "0,x", want: 2, wantErr: `"x" is not a GPU index`},
		{value: "0,-1", want: 2, wantErr: `"-1" is not a GPU index`},
		{value: "1,1", want: 2, wantErr: "GPU 1 listed twice"},
		{value: "0,1,2", want: 2, wantErr: "3 indices for a pod that requests 2 GPUs"},
	}
	for _, tc := range cases {
		t.Run(tc.value, func(t *testing.T) {
			ids, err := ParseGPUIDs(tc.value, tc.want)
			if tc.wantErr != "" {
				require.ErrorContains(t, err, tc.wantErr)
				return
			}
			require.NoError(t, err)
			require.Equal(t, tc.ids, ids)
			require.Equal(t, FormatGPUIDs(tc.ids), FormatGPUIDs(ids))
		})
	}
}

// On a DGX-1, lockstep hands a 4-GPU pod a fully NVLink-connected quad and a 2-GPU pod an NV2
// pair, and pods sharing the node never share a GPU.
func TestOrdinaryBindChoosesNVLinkConnectedGPUs(t *testing.T) {
	e := newEnv(t, testConfig(), dgx1("dgx"))
	topo, _, err := gpu.FromNode(dgx1("dgx"))
	require.NoError(t, err)

	quad := builders.Pod("default", "quad").GPU(4).Obj()
	pair := builders.Pod("default", "pair").GPU(2).Obj()
	e.add(quad, pair)
	require.NoError(t, e.bind(quad, "dgx"))
	require.NoError(t, e.bind(pair, "dgx"))

	got := map[string][]int{}
	for _, c := range e.binder.Bound() {
		got[c.Name] = c.GPUIDs
	}
	require.Len(t, got["quad"], 4)
	for _, a := range got["quad"] {
		for _, b := range got["quad"] {
			if a != b {
				link, _ := topo.Link(a, b)
				require.True(t, link.IsNVLink(), "quad %v: GPUs %d and %d are linked by %s", got["quad"], a, b, link)
			}
		}
	}
	require.Len(t, got["pair"], 2)
	link, _ := topo.Link(got["pair"][0], got["pair"][1])
	require.Equal(t, gpu.NVLink(2), link, "pair %v", got["pair"])
	require.Empty(t, intersect(got["quad"], got["pair"]), "pods on one node never share a GPU")
}

// Eight 1-GPU gang members on two empty 8-GPU nodes are planned onto one node, and at commit each
// gets its own GPU.
func TestGangPacksOntoOneNodeWithDisjointGPUs(t *testing.T) {
	e := newEnv(t, testConfig(), dgx1("a"), dgx1("b"))
	pods := members("default", "eight", "w", 8, 8, 1)
	e.add(pods...)
	node := e.filterOne(pods[0])
	for _, m := range e.m.Status("default")[0].Members {
		require.Equal(t, node, m.Node, "member %s planned on another node", m.Pod)
	}
	var results []<-chan error
	for _, p := range pods {
		require.Equal(t, node, e.filterOne(p))
		results = append(results, e.bindAsync(p, node))
	}
	for _, ch := range results {
		require.NoError(t, recv(t, ch, "bind result"))
	}
	var all []int
	for _, c := range e.binder.Bound() {
		require.Equal(t, node, c.Node)
		require.Len(t, c.GPUIDs, 1)
		all = append(all, c.GPUIDs...)
	}
	sort.Ints(all)
	require.Equal(t, []int{0, 1, 2, 3, 4, 5, 6, 7}, all, "every member has its own GPU")
}

// After a restart lockstep reads which GPUs are taken from the gpu-ids annotations, and counts
// pods bound by others (no annotation) against the free GPUs.
func TestGPUsRebuiltFromAnnotations(t *testing.T) {
	e := newEnv(t, testConfig(), dgx1("dgx"))
	e.add(
		builders.Pod("default", "ours").GPU(4).Node("dgx").Annotation(wellknown.AnnotationGPUIDs, "0,1,2,3").Obj(),
		builders.Pod("default", "theirs").GPU(2).Node("dgx").Obj(),
	)
	next := builders.Pod("default", "next").GPU(2).Obj()
	e.add(next)
	require.NoError(t, e.bind(next, "dgx"))
	ids := e.binder.Bound()[0].GPUIDs
	require.Len(t, ids, 2)
	require.Empty(t, intersect(ids, []int{0, 1, 2, 3}), "GPUs 0-3 are annotated as taken, got %v", ids)

	// 4 + 2 + 2 of 8 GPUs are taken: nothing is left to choose from, by count or by index.
	last := builders.Pod("default", "last").GPU(1).Obj()
	e.add(last)
	require.NotContains(t, e.filter(last).Feasible, "dgx")
}

// A failed binding gives its GPUs back.
func TestFailedBindReleasesGPUs(t *testing.T) {
	e := newEnv(t, testConfig(), dgx1("dgx"))
	p := builders.Pod("default", "unlucky").GPU(8).Obj()
	e.add(p)
	e.binder.Fail(keyOf(p), fmt.Errorf("apiserver says no"))
	require.Error(t, e.bind(p, "dgx"))
	e.binder.Fail(keyOf(p), nil)
	require.NoError(t, e.bind(p, "dgx"))
	require.Len(t, e.binder.Bound()[0].GPUIDs, 8)
}

func intersect(a, b []int) []int {
	in := map[int]bool{}
	for _, x := range a {
		in[x] = true
	}
	var out []int
	for _, x := range b {
		if in[x] {
			out = append(out, x)
		}
	}
	return out
}

// The mask shortcut for GPUs numbered 0..n-1 must give what asking the ledger GPU by GPU gives,
// through takes and releases by index and by count.
func TestGPUStateShortcutAgreesWithTheLedger(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 2))
	for _, n := range []int{1, 2, 8, 16, 63, 64} {
		node := &nodeInfo{gpuIndices: make([]int, n)}
		for i := range node.gpuIndices {
			node.gpuIndices[i] = i
		}
		type holding struct {
			uid   types.UID
			ids   []int
			count int64
		}
		var held []holding
		for step := range 400 {
			if len(held) > 0 && rng.IntN(3) == 0 {
				i := rng.IntN(len(held))
				node.gpus.release(held[i].uid, held[i].ids, held[i].count)
				held = append(held[:i], held[i+1:]...)
			} else {
				h := holding{uid: types.UID(fmt.Sprint("pod-", step)), count: int64(1 + rng.IntN(2))}
				if rng.IntN(2) == 0 {
					state := node.gpuState()
					free := state.FreeIndices(0)
					if len(free) < int(h.count) {
						continue
					}
					h.ids = free[:h.count]
				}
				node.gpus.take(h.uid, h.ids, h.count)
				held = append(held, h)
			}
			var want uint64
			node.gpus.eachFreeByIndex(node.gpuIndices, func(p int) { want |= 1 << p })
			got := node.gpuState()
			require.Equal(t, want, got.Free, "%d GPUs, step %d", n, step)
			require.Equal(t, node.gpus.unknown, got.Unknown)
		}
	}
}
