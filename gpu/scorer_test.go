package gpu

import (
	"fmt"
	"math/bits"
	"math/rand/v2"
	"slices"
	"sync"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/lockstep-sched/lockstep/wellknown"
)

// evaluate recomputes a set's Quality from the public API only, as the reference the scorer's
// incremental bookkeeping is checked against.
func evaluate(topo *Topology, set, free []int) Quality {
	numa := map[int]int{}
	for _, g := range topo.GPUs() {
		numa[g.Index] = g.NUMA
	}
	link := func(a, b int) Link {
		l, ok := topo.Link(a, b)
		if !ok {
			panic(fmt.Sprintf("no link %d-%d", a, b))
		}
		return l
	}
	q := Quality{WeakestLink: LinkSelf}
	for i, a := range set {
		for j, b := range set[i+1:] {
			if l := link(a, b); i == 0 && j == 0 || l < q.WeakestLink {
				q.WeakestLink = l
			}
			q.Bandwidth += link(a, b).Bandwidth()
		}
		for _, r := range free {
			if slices.Contains(set, r) {
				continue
			}
			q.Cut += link(a, r).Bandwidth()
			if numa[a] != NUMAUnknown && numa[a] == numa[r] {
				q.NUMACut++
			}
		}
	}
	return q
}

// bruteForce is the best Quality over every k-subset of free, by enumeration, and the
// lexicographically smallest set that has it.
func bruteForce(topo *Topology, free []int, k int) (Quality, []int, bool) {
	if k > len(free) {
		return Quality{}, nil, false
	}
	free = slices.Sorted(slices.Values(free))
	var best Quality
	var bestSet []int
	for mask := uint64(0); mask < 1<<len(free); mask++ {
		if bits.OnesCount64(mask) != k {
			continue
		}
		set := []int{}
		for i, g := range free {
			if mask&(1<<i) != 0 {
				set = append(set, g)
			}
		}
		q := evaluate(topo, set, free)
		if bestSet == nil || q.Better(best) || q == best && slices.Compare(set, bestSet) < 0 {
			best, bestSet = q, set
		}
	}
	return best, bestSet, true
}

// subsets lists every subset of the node's GPUs, as free lists.
func subsets(topo *Topology) [][]int {
	all := topo.Indices()
	var out [][]int
	for mask := 0; mask < 1<<len(all); mask++ {
		var free []int
		for i, g := range all {
			if mask&(1<<i) != 0 {
				free = append(free, g)
			}
		}
		out = append(out, free)
	}
	return out
}

func nodes(t *testing.T) map[string]*Topology {
	out := map[string]*Topology{
		"two NV4 quads over SYS":  islandsOf(t, 8, 4, 4, LinkSYS),
		"four NV2 pairs over PHB": islandsOf(t, 8, 2, 2, LinkPHB),
	}
	for _, f := range fixtures {
		out[f] = loadFixture(t, f)
	}
	return out
}

func TestBestSetDGX1(t *testing.T) {
	dgx1 := loadFixture(t, "dgx1-v100.txt")
	quads := [][]int{{0, 1, 2, 3}, {4, 5, 6, 7}}
	nv2Pairs := [][]int{{0, 3}, {0, 4}, {1, 2}, {1, 5}, {2, 3}, {4, 7}, {5, 6}, {6, 7}}
	tests := []struct {
		name    string
		used    []int
		k       int
		oneOf   [][]int
		weakest Link
	}{
		{"4-GPU pod gets a fully NVLinked quad", nil, 4, quads, NVLink(1)},
		{"2-GPU pod gets an NV2 pair", nil, 2, nv2Pairs, NVLink(2)},
		{"2-GPU pod fills the used quad and keeps the other whole", []int{0, 1}, 2, [][]int{{2, 3}}, NVLink(2)},
		{"4-GPU pod takes the idle quad", []int{0}, 4, [][]int{{4, 5, 6, 7}}, NVLink(1)},
		// Inside a quad, the triangles with two NV2 edges carry the most bandwidth.
		{"3-GPU pod gets the best triangle", nil, 3, [][]int{{0, 2, 3}, {1, 2, 3}, {4, 6, 7}, {5, 6, 7}}, NVLink(1)},
		{"8-GPU pod gets the node", nil, 8, [][]int{{0, 1, 2, 3, 4, 5, 6, 7}}, LinkSYS},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			set, q, ok := dgx1.BestSet(without(dgx1, tt.used...), tt.k)
			require.True(t, ok)
			assert.Contains(t, tt.oneOf, set)
			assert.Equal(t, tt.weakest, q.WeakestLink)
		})
	}
}

func TestBestSetPrefersPartlyUsedIsland(t *testing.T) {
	tests := []struct {
		name string
		topo *Topology
		used []int
		k    int
		want []int
	}{
		{"half-used island over SYS", islandsOf(t, 8, 4, 4, LinkSYS), []int{0, 1}, 2, []int{2, 3}},
		{"half-used island over NODE", islandsOf(t, 8, 4, 4, LinkNODE), []int{0, 1}, 2, []int{2, 3}},
		{"used GPUs in the second island", islandsOf(t, 8, 4, 4, LinkSYS), []int{5, 6}, 2, []int{4, 7}},
		{"three left in an island", islandsOf(t, 8, 4, 4, LinkSYS), []int{0}, 3, []int{1, 2, 3}},
		{"single GPU from the fullest island", islandsOf(t, 8, 4, 4, LinkSYS), []int{4, 5, 6}, 1, []int{7}},
		{"whole island for a 4-GPU pod", islandsOf(t, 8, 4, 4, LinkSYS), []int{0}, 4, []int{4, 5, 6, 7}},
		{"pairs: the lone GPU of a broken pair", islandsOf(t, 8, 2, 2, LinkPHB), []int{2}, 1, []int{3}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			set, _, ok := tt.topo.BestSet(without(tt.topo, tt.used...), tt.k)
			require.True(t, ok)
			assert.Equal(t, tt.want, set)
		})
	}
}

func TestBestSetNVSwitch(t *testing.T) {
	// Every pair is NV12, so link and bandwidth tie for every set and fragmentation decides: keep
	// NUMA-local pairs whole (the A100 fixture pairs GPUs 0-1, 2-3, 4-5, 6-7 on NUMA nodes).
	a100 := loadFixture(t, "a100-nvswitch.txt")
	tests := []struct {
		name string
		used []int
		k    int
		want []int
	}{
		{"2-GPU pod takes a NUMA pair", nil, 2, []int{0, 1}},
		{"1-GPU pod completes a broken pair", []int{0}, 1, []int{1}},
		{"2-GPU pod takes the two stranded GPUs", []int{0, 2}, 2, []int{1, 3}},
		{"4-GPU pod takes two whole pairs", []int{0}, 4, []int{2, 3, 4, 5}},
		{"4-GPU pod avoids breaking pairs", []int{1, 4}, 4, []int{0, 2, 3, 5}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			set, q, ok := a100.BestSet(without(a100, tt.used...), tt.k)
			require.True(t, ok)
			assert.Equal(t, tt.want, set)
			if tt.k > 1 {
				assert.Equal(t, NVLink(12), q.WeakestLink)
			}
		})
	}

	// Without NUMA information every set is as good as any other.
	h100 := uniform(t, 8, NVLink(18))
	set, q, ok := h100.BestSet(without(h100, 3), 4)
	require.True(t, ok)
	assert.Equal(t, []int{0, 1, 2, 4}, set, "ties go to the lowest indices")
	assert.Equal(t, NVLink(18), q.WeakestLink)
	assert.True(t, h100.SameIsland(set))
}

func TestBestSetPCIe(t *testing.T) {
	box := loadFixture(t, "pcie-8gpu.txt")
	tests := []struct {
		name    string
		used    []int
		k       int
		want    []int
		weakest Link
	}{
		{"2-GPU pod gets a PIX pair", nil, 2, []int{0, 1}, LinkPIX},
		{"2-GPU pod skips the broken pair", []int{0}, 2, []int{2, 3}, LinkPIX},
		{"1-GPU pod takes the broken pair's survivor", []int{0}, 1, []int{1}, LinkSelf},
		{"4-GPU pod stays on one socket", nil, 4, []int{0, 1, 2, 3}, LinkNODE},
		{"4-GPU pod moves to the idle socket", []int{1}, 4, []int{4, 5, 6, 7}, LinkNODE},
		{"no PIX pair left: same socket over cross socket", []int{1, 3, 5, 7}, 2, []int{0, 2}, LinkNODE},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			set, q, ok := box.BestSet(without(box, tt.used...), tt.k)
			require.True(t, ok)
			assert.Equal(t, tt.want, set)
			assert.Equal(t, tt.weakest, q.WeakestLink)
		})
	}
}

func TestBestSetInputs(t *testing.T) {
	topo := islandsOf(t, 8, 4, 4, LinkSYS)
	tests := []struct {
		name string
		free []int
		k    int
		want []int
		ok   bool
	}{
		{"k=0", []int{1, 2}, 0, []int{}, true},
		{"k=0 with nothing free", nil, 0, []int{}, true},
		{"negative k", []int{1, 2}, -1, nil, false},
		{"not enough free", []int{1, 2}, 3, nil, false},
		{"unsorted free", []int{7, 6, 5, 4, 0}, 4, []int{4, 5, 6, 7}, true},
		{"duplicates count once", []int{1, 1, 1}, 2, nil, false},
		{"unknown indices are ignored", []int{-1, 2, 3, 8, 4095, 100000}, 2, []int{2, 3}, true},
		{"all free", []int{0, 1, 2, 3, 4, 5, 6, 7}, 8, []int{0, 1, 2, 3, 4, 5, 6, 7}, true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			set, q, ok := topo.BestSet(tt.free, tt.k)
			assert.Equal(t, tt.ok, ok)
			assert.Equal(t, tt.want, set)
			if ok && tt.k == len(tt.want) && len(tt.want) == 8 {
				assert.Zero(t, q.Cut, "taking every free GPU cuts nothing")
			}
		})
	}
}

// The pruned search must find the optimum on every free subset of every fixture, and report
// the Quality of the set it returns.
func TestBestSetMatchesBruteForce(t *testing.T) {
	for name, topo := range nodes(t) {
		t.Run(name, func(t *testing.T) {
			for _, free := range subsets(topo) {
				for k := 0; k <= len(free)+1; k++ {
					set, q, ok := topo.BestSet(free, k)
					want, wantSet, wantOK := bruteForce(topo, free, k)
					require.Equal(t, wantOK, ok, "free=%v k=%d", free, k)
					if !ok {
						continue
					}
					require.Equal(t, want, q, "free=%v k=%d set=%v", free, k, set)
					require.Equal(t, wantSet, set, "free=%v k=%d: ties go to the lexicographically smallest set", free, k)
					require.Equal(t, q, evaluate(topo, set, free), "free=%v k=%d set=%v", free, k, set)
					require.True(t, slices.IsSorted(set))
					for _, g := range set {
						require.Contains(t, free, g)
					}
				}
			}
		})
	}
}

func TestBestSetMatchesBruteForceRandom(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 2))
	classes := []Link{LinkSYS, LinkNODE, LinkPHB, LinkPXB, LinkPIX, NVLink(1), NVLink(2), NVLink(4), NVLink(12)}
	for i := range 40 {
		n := 9 + rng.IntN(MaxExact-8)
		numa := make([]int, n)
		for g := range numa {
			numa[g] = rng.IntN(3) - 1
		}
		table := make([][]Link, n)
		for a := range table {
			table[a] = make([]Link, n)
			for b := range table[a] {
				table[a][b] = classes[rng.IntN(len(classes))]
			}
		}
		topo := matrix(t, n, numa, func(a, b int) Link { return table[a][b] })
		free := rng.Perm(n)[:n-rng.IntN(n/2)]
		k := rng.IntN(len(free) + 1)
		t.Run(fmt.Sprintf("%d/n=%d/free=%d/k=%d", i, n, len(free), k), func(t *testing.T) {
			set, q, ok := topo.BestSet(free, k)
			require.True(t, ok)
			want, wantSet, _ := bruteForce(topo, free, k)
			assert.Equal(t, want, q)
			assert.Equal(t, wantSet, set)
			assert.Equal(t, q, evaluate(topo, set, free))
		})
	}
}

func TestBestSetGreedy(t *testing.T) {
	// Beyond MaxExact free GPUs: a 32-GPU node of four NVSwitch trays and a 64-GPU uniform node.
	trays := islandsOf(t, 32, 8, 18, LinkSYS)
	flat := uniform(t, 64, NVLink(18))
	seq := func(lo, hi int) []int {
		var out []int
		for i := lo; i < hi; i++ {
			out = append(out, i)
		}
		return out
	}
	tests := []struct {
		name string
		topo *Topology
		used []int
		k    int
		want []int
	}{
		{"whole tray", trays, nil, 8, seq(0, 8)},
		{"fill the used tray", trays, seq(0, 6), 2, []int{6, 7}},
		{"skip the used tray", trays, seq(0, 2), 8, seq(8, 16)},
		{"single GPU from the fullest tray", trays, append(seq(0, 3), seq(8, 15)...), 1, []int{15}},
		{"two trays", trays, nil, 16, seq(0, 16)},
		{"uniform", flat, nil, 8, seq(0, 8)},
		{"uniform, all", flat, nil, 64, seq(0, 64)},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			free := without(tt.topo, tt.used...)
			require.Greater(t, len(free), MaxExact)
			set, q, ok := tt.topo.BestSet(free, tt.k)
			require.True(t, ok)
			assert.Equal(t, tt.want, set)
			assert.Equal(t, evaluate(tt.topo, set, free), q)
		})
	}
}

// Greedy is also run on small inputs here, against the exact search, on the shapes its doc
// comment promises to solve exactly.
func TestGreedyExactOnIslandShapes(t *testing.T) {
	for name, topo := range map[string]*Topology{
		"NVSwitch":     uniform(t, 8, NVLink(12)),
		"A100 fixture": loadFixture(t, "a100-nvswitch.txt"),
		"quads":        islandsOf(t, 8, 4, 4, LinkSYS),
		"pairs":        islandsOf(t, 8, 2, 2, LinkPHB),
	} {
		t.Run(name, func(t *testing.T) {
			for _, free := range subsets(topo) {
				for k := 1; k <= len(free); k++ {
					var buf [MaxExact]int
					_, got := topo.greedy(topo.candidates(free, buf[:0]), k)
					_, want, _ := topo.BestSet(free, k)
					require.Equal(t, want, got, "free=%v k=%d", free, k)
				}
			}
		})
	}
}

// improveBySwaps tracks the Quality incrementally; from any starting set, what it reports must
// be the Quality of the set it returns, and never worse than where it started.
func TestImproveBySwapsBookkeeping(t *testing.T) {
	rng := rand.New(rand.NewPCG(3, 4))
	classes := []Link{LinkSYS, LinkNODE, LinkPIX, NVLink(1), NVLink(2), NVLink(18)}
	for i := range 200 {
		n := 2 + rng.IntN(20)
		numa := make([]int, n)
		table := make([][]Link, n)
		for a := range n {
			numa[a] = rng.IntN(3) - 1
			table[a] = make([]Link, n)
			for b := range n {
				table[a][b] = classes[rng.IntN(len(classes))]
			}
		}
		topo := matrix(t, n, numa, func(a, b int) Link { return table[a][b] })
		free := rng.Perm(n)[:1+rng.IntN(n)]
		k := 1 + rng.IntN(len(free))
		start := slices.Clone(free[:k])
		var buf [MaxExact]int
		cand := topo.candidates(free, buf[:0])
		q0 := topo.quality(start, cand)
		set, q := topo.improveBySwaps(slices.Clone(start), q0, cand)
		slices.Sort(set)
		require.Equal(t, evaluate(topo, set, free), q, "case %d: n=%d free=%v start=%v", i, n, free, start)
		require.False(t, q0.Better(q), "case %d: got worse", i)
	}
}

func TestScoreRange(t *testing.T) {
	for name, topo := range nodes(t) {
		t.Run(name, func(t *testing.T) {
			for _, free := range subsets(topo) {
				for k := 0; k <= len(free)+1; k++ {
					s := topo.Score(free, k)
					_, _, ok := topo.BestSet(free, k)
					require.GreaterOrEqual(t, s, 0)
					require.LessOrEqual(t, s, wellknown.MaxScore)
					require.Equal(t, !ok, s == 0, "free=%v k=%d: 0 exactly when the pod does not fit", free, k)
				}
			}
			assert.Equal(t, wellknown.MaxScore, topo.Score(nil, 0), "a pod without GPUs fits anywhere")
		})
	}
}

// Link quality outranks fit: a placement as good as the idle node's scores in the top band, a
// weaker one below it, ordered by its weakest link; within the top band a smaller Cut never
// scores lower.
func TestScoreMonotone(t *testing.T) {
	for name, topo := range nodes(t) {
		t.Run(name, func(t *testing.T) {
			type point struct {
				free []int
				q    Quality
				s    int
			}
			for k := 1; k <= topo.Len(); k++ {
				_, idle, _ := topo.BestSet(topo.Indices(), k)
				var top, below []point
				for _, free := range subsets(topo) {
					_, q, ok := topo.BestSet(free, k)
					if !ok {
						continue
					}
					p := point{free, q, topo.Score(free, k)}
					if q.WeakestLink == idle.WeakestLink {
						require.GreaterOrEqual(t, p.s, topBand, "k=%d free=%v", k, free)
						top = append(top, p)
					} else {
						require.Less(t, p.s, topBand, "k=%d free=%v", k, free)
						below = append(below, p)
					}
				}
				for _, a := range top {
					for _, b := range top {
						if a.q.Cut < b.q.Cut {
							require.GreaterOrEqual(t, a.s, b.s, "k=%d: cut %d on %v vs cut %d on %v", k, a.q.Cut, a.free, b.q.Cut, b.free)
						}
					}
				}
				for _, a := range below {
					for _, b := range below {
						if a.q.WeakestLink > b.q.WeakestLink {
							require.GreaterOrEqual(t, a.s, b.s, "k=%d: %v on %v vs %v on %v", k, a.q.WeakestLink, a.free, b.q.WeakestLink, b.free)
						}
					}
				}
			}
		})
	}
}

func TestScoreExamples(t *testing.T) {
	dgx1 := loadFixture(t, "dgx1-v100.txt")
	box := loadFixture(t, "pcie-8gpu.txt")
	quads := islandsOf(t, 8, 4, 4, LinkSYS)
	tests := []struct {
		name string
		topo *Topology
		free []int
		k    int
		want int
	}{
		{"idle node", quads, quads.Indices(), 2, topBand},
		{"whole idle node for an 8-GPU pod", quads, quads.Indices(), 8, wellknown.MaxScore},
		{"exact fit of an island", quads, []int{4, 5, 6, 7}, 4, wellknown.MaxScore},
		{"last free GPU", quads, []int{6}, 1, wellknown.MaxScore},
		// Cuts 4x3 SYS links where the idle node's best quad cuts 4x4: fit 1/4, 5 + round(5/4).
		{"idle quad for a 4-GPU pod", quads, without(quads, 0), 4, 6},
		{"DGX-1: NV2 pair left", dgx1, []int{2, 3}, 2, wellknown.MaxScore},
		{"DGX-1: only NV1 pairs left", dgx1, []int{0, 1, 6}, 2, 4},
		{"only PIX pair", box, []int{4, 5}, 2, wellknown.MaxScore},
		{"PCIe: same socket only", box, []int{0, 2, 5}, 2, 2},
		{"PCIe: across sockets only", box, []int{0, 4}, 2, 1},
		{"does not fit", box, []int{0}, 2, 0},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			assert.Equal(t, tt.want, tt.topo.Score(tt.free, tt.k))
		})
	}
}

// Across otherwise equal nodes, the fuller one scores higher (best fit), so idle nodes stay
// idle for the next 8-GPU gang. On NVSwitch this is the only thing that separates nodes.
func TestScoreBestFitOnUniformNodes(t *testing.T) {
	for _, topo := range []*Topology{uniform(t, 8, NVLink(18)), loadFixture(t, "a100-nvswitch.txt"), uniform(t, 16, NVLink(6))} {
		for k := 1; k <= 4; k++ {
			free := topo.Indices()
			prev := -1
			for len(free) >= k {
				s := topo.Score(free, k)
				assert.GreaterOrEqual(t, s, prev, "k=%d free=%v", k, free)
				prev = s
				taken, _, _ := topo.BestSet(free, 1)
				free = slices.DeleteFunc(free, func(g int) bool { return g == taken[0] })
			}
			assert.Equal(t, wellknown.MaxScore, prev, "k=%d: the last fitting state is an exact fit", k)
		}
	}
}

func TestScoreConcurrent(t *testing.T) {
	// Score fills its idle-node cache lazily; run under -race to check that is safe.
	topo := loadFixture(t, "dgx1-v100.txt")
	var wg sync.WaitGroup
	scores := make([]int, 32)
	for i := range scores {
		wg.Go(func() { scores[i] = topo.Score([]int{0, 1, 2, 3}, 1+i%4) })
	}
	wg.Wait()
	for i, s := range scores {
		assert.Equal(t, topo.Score([]int{0, 1, 2, 3}, 1+i%4), s)
	}
}

func TestQualityBetter(t *testing.T) {
	base := Quality{WeakestLink: NVLink(2), Bandwidth: 100, Cut: 50, NUMACut: 2}
	tests := []struct {
		name string
		q    Quality
		want bool
	}{
		{"stronger weakest link wins over everything", Quality{WeakestLink: NVLink(4), Bandwidth: 0, Cut: 999, NUMACut: 99}, true},
		{"weaker weakest link loses", Quality{WeakestLink: NVLink(1), Bandwidth: 999}, false},
		{"more bandwidth", Quality{WeakestLink: NVLink(2), Bandwidth: 101, Cut: 999}, true},
		{"smaller cut", Quality{WeakestLink: NVLink(2), Bandwidth: 100, Cut: 49, NUMACut: 99}, true},
		{"smaller NUMA cut", Quality{WeakestLink: NVLink(2), Bandwidth: 100, Cut: 50, NUMACut: 1}, true},
		{"equal is not better", base, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			assert.Equal(t, tt.want, tt.q.Better(base))
			if tt.want {
				assert.False(t, base.Better(tt.q), "Better must be asymmetric")
			}
		})
	}
}

func BenchmarkBestSet(b *testing.B) {
	dgx1 := loadFixture(b, "dgx1-v100.txt")
	a100 := loadFixture(b, "a100-nvswitch.txt")
	box := loadFixture(b, "pcie-8gpu.txt")
	sixteen := uniform(b, 16, NVLink(6))
	mixed16 := matrix(b, 16, nil, func(x, y int) Link {
		switch {
		case x/4 == y/4:
			return NVLink(4)
		case x/8 == y/8:
			return LinkNODE
		}
		return LinkSYS
	})
	// No two GPUs interchangeable and only PCIe classes, so the weakest link prunes little:
	// close to the exhaustive search's worst case.
	rng := rand.New(rand.NewPCG(5, 6))
	pcie := []Link{LinkSYS, LinkNODE, LinkPHB, LinkPXB, LinkPIX}
	var table [16][16]Link
	for x := range table {
		for y := range table[x] {
			table[x][y] = pcie[rng.IntN(len(pcie))]
		}
	}
	random16 := matrix(b, 16, nil, func(x, y int) Link { return table[x][y] })
	trays := islandsOf(b, 64, 8, 18, LinkSYS)
	cases := []struct {
		name string
		topo *Topology
		free []int
		k    int
	}{
		{"8gpu/dgx1/k=1", dgx1, dgx1.Indices(), 1},
		{"8gpu/dgx1/k=2", dgx1, dgx1.Indices(), 2},
		{"8gpu/dgx1/k=4", dgx1, dgx1.Indices(), 4},
		{"8gpu/dgx1/k=4/used=0,5", dgx1, without(dgx1, 0, 5), 4},
		{"8gpu/dgx1/k=8", dgx1, dgx1.Indices(), 8},
		{"8gpu/a100/k=4", a100, a100.Indices(), 4},
		{"8gpu/a100/k=3/used=1", a100, without(a100, 1), 3},
		{"8gpu/pcie/k=4", box, box.Indices(), 4},
		{"16gpu/uniform/k=8", sixteen, sixteen.Indices(), 8},
		{"16gpu/quads/k=8", mixed16, mixed16.Indices(), 8},
		{"16gpu/quads/k=6", mixed16, mixed16.Indices(), 6},
		{"16gpu/random-pcie/k=8", random16, random16.Indices(), 8},
		{"16gpu/random-pcie/k=4", random16, random16.Indices(), 4},
		{"64gpu-greedy/trays/k=8", trays, trays.Indices(), 8},
	}
	for _, c := range cases {
		b.Run(c.name, func(b *testing.B) {
			b.ReportAllocs()
			for b.Loop() {
				c.topo.BestSet(c.free, c.k)
			}
		})
	}
}

func BenchmarkScore(b *testing.B) {
	dgx1 := loadFixture(b, "dgx1-v100.txt")
	free := without(dgx1, 0, 1)
	b.ReportAllocs()
	for b.Loop() {
		dgx1.Score(free, 4)
	}
}

// ScoreMask answers as Score does, for every state of use and request size, asked twice so the
// second answer comes from what it remembered.
func TestScoreMaskIsScore(t *testing.T) {
	for name, topo := range nodes(t) {
		indices := topo.Indices()
		for mask := uint64(0); mask < 1<<len(indices); mask++ {
			var free []int
			for p, idx := range indices {
				if mask&(1<<p) != 0 {
					free = append(free, idx)
				}
			}
			for k := 1; k <= len(indices); k++ {
				want := topo.Score(free, k)
				for range 2 {
					if got := topo.ScoreMask(mask, k); got != want {
						t.Fatalf("%s: free %v, k %d: ScoreMask %d, Score %d", name, free, k, got, want)
					}
				}
			}
		}
	}
}
