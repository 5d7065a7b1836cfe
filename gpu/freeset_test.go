package gpu

import (
	"math/bits"
	"math/rand/v2"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// randomGPUs is a node of 1 to 64 GPUs, numbered 0..n-1 or with gaps, with a random free set and
// a random count of GPUs of unknown indices (now and then more than are free, or negative).
func randomGPUs(r *rand.Rand) FreeSet {
	n := 1 + r.IntN(64)
	g := FreeSet{Indices: make([]int, n), Unknown: r.Int64N(int64(n)+3) - 1}
	next := 0
	for p := range g.Indices {
		if r.IntN(4) == 0 {
			next += 1 + r.IntN(3) // a gap, as on a node with a GPU gone
		}
		g.Indices[p] = next
		next++
	}
	g.Free = r.Uint64() & (^uint64(0) >> (64 - n))
	return g
}

func TestFreeMaskAgreesWithFreeIndices(t *testing.T) {
	r := rand.New(rand.NewPCG(1, 2))
	for i := range 2000 {
		g := randomGPUs(r)
		reserved := r.Int64N(int64(len(g.Indices))+3) - 1
		mask, ok := g.freeMask(reserved)
		require.True(t, ok)
		position := map[int]int{}
		for p, index := range g.Indices {
			position[index] = p
		}
		var fromIndices uint64
		for _, index := range g.FreeIndices(reserved) {
			fromIndices |= 1 << position[index]
		}
		require.Equal(t, fromIndices, mask, "case %d: %d GPUs, free %b, unknown %d, reserved %d", i, len(g.Indices), g.Free, g.Unknown, reserved)
		require.Zero(t, mask&^g.Free, "only free GPUs are left")
		drop := max(g.Unknown+reserved, 0)
		require.Equal(t, max(bits.OnesCount64(g.Free)-int(drop), 0), bits.OnesCount64(mask), "case %d: the count is right", i)
	}
}

func TestFreeIndicesTakesUnknownFromTheHighest(t *testing.T) {
	g := FreeSet{Indices: []int{0, 1, 2, 3, 5, 7}, Free: 0b110101} // positions 0, 2, 4, 5 free
	cases := []struct {
		name             string
		unknown, reserve int64
		want             []int
	}{
		{"nothing taken", 0, 0, []int{0, 2, 5, 7}},
		{"unknown GPUs are the highest free", 1, 0, []int{0, 2, 5}},
		{"reserved ones too", 1, 2, []int{0}},
		{"more than are free", 3, 3, []int{}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			g.Unknown = tc.unknown
			assert.Equal(t, tc.want, g.FreeIndices(tc.reserve))
		})
	}
}

func TestFreeMaskRefusesNodesOfMoreThan64GPUs(t *testing.T) {
	g := FreeSet{Indices: make([]int, 72), FreeBig: []int{0, 70, 71}, Unknown: 1}
	for p := range g.Indices {
		g.Indices[p] = p
	}
	_, ok := g.freeMask(0)
	assert.False(t, ok)
	assert.Equal(t, []int{0, 70}, g.FreeIndices(0))
}

func TestScoreMemo(t *testing.T) {
	topo := idleDGX1(t)
	cases := []struct {
		name           string
		gpus           FreeSet
		k, reserved    int64
		zero, positive bool
	}{
		{name: "no topology scores 0", gpus: FreeSet{Free: 0xff, Indices: []int{0, 1, 2, 3, 4, 5, 6, 7}}, k: 2, zero: true},
		{name: "a pod asking no GPU scores 0", gpus: topo, k: 0, zero: true},
		{name: "an idle node scores", gpus: topo, k: 2, positive: true},
		{name: "too few GPUs beside those reserved scores 0", gpus: topo, k: 2, reserved: 7, zero: true},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			var memo Memo
			got := memo.Score(&tc.gpus, tc.k, tc.reserved)
			if tc.zero {
				assert.Zero(t, got)
			}
			if tc.positive {
				assert.Positive(t, got)
			}
		})
	}
}

// The memo must answer what the topology does for every state, whether it keeps the answer in its
// array or, past 16 states, in its map.
func TestScoreMemoAgreesWithTheTopology(t *testing.T) {
	g := idleDGX1(t)
	var memo Memo
	for round := range 2 {
		for free := range uint64(256) {
			for k := int64(1); k <= 4; k++ {
				g.Free = free
				want := g.Topo.ScoreMask(free, int(k))
				require.Equal(t, want, memo.Score(&g, k, 0), "round %d, free %08b, k %d", round, free, k)
			}
		}
	}
}

// idleDGX1 is an idle DGX-1's GPUs: its eight GPUs free.
func idleDGX1(t *testing.T) FreeSet {
	t.Helper()
	topo, err := dgx1V100()
	require.NoError(t, err)
	return FreeSet{Topo: topo, Indices: topo.Indices(), Free: 0xff}
}
