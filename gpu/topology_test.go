package gpu

import (
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func TestNewRejects(t *testing.T) {
	nv, sys := NVLink(2), LinkSYS
	two := []GPU{{Index: 0, NUMA: 0}, {Index: 1, NUMA: 0}}
	ok2 := [][]Link{{LinkSelf, nv}, {nv, LinkSelf}}
	tests := []struct {
		name  string
		gpus  []GPU
		links [][]Link
		want  string
	}{
		{"no GPUs", nil, nil, "no GPUs"},
		{"too few rows", two, ok2[:1], "links has 1 rows for 2 GPUs"},
		{"short row", two, [][]Link{{LinkSelf, nv}, {nv}}, "links[1] (GPU 1) has 1 entries for 2 GPUs"},
		{"asymmetric", two, [][]Link{{LinkSelf, nv}, {sys, LinkSelf}}, "links[0][1] (GPU 0 to GPU 1) is NV2 but links[1][0] is SYS"},
		{"diagonal", two, [][]Link{{sys, nv}, {nv, LinkSelf}}, "links[0][0] (GPU 0 to itself) is SYS; the diagonal must be X"},
		{"X off the diagonal", two, [][]Link{{LinkSelf, LinkSelf}, {LinkSelf, LinkSelf}}, "links[0][1] (GPU 0 to GPU 1) is X"},
		{"invalid value", two, [][]Link{{LinkSelf, linkNV0}, {linkNV0, LinkSelf}}, "not a link class"},
		{"duplicate index", []GPU{{Index: 3}, {Index: 3}}, ok2, "gpus[1]: duplicate index 3 (also gpus[0])"},
		{"negative index", []GPU{{Index: -1}, {Index: 1}}, ok2, "gpus[0]: index -1 is outside"},
		{"huge index", []GPU{{Index: 0}, {Index: MaxGPUIndex + 1}}, ok2, "gpus[1]: index 4096 is outside"},
		{"bad NUMA", []GPU{{Index: 0, NUMA: -2}, {Index: 1}}, ok2, "gpus[0] (GPU 0): NUMA node -2 is invalid"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := New(tt.gpus, tt.links)
			require.Error(t, err)
			assert.Contains(t, err.Error(), tt.want)
		})
	}
}

func TestNewOrdersByIndex(t *testing.T) {
	// GPU 7 listed first, GPU 2 second: the matrix rows follow that order.
	topo, err := New([]GPU{{Index: 7, NUMA: 1}, {Index: 2, NUMA: 0}}, [][]Link{{LinkSelf, LinkPIX}, {LinkPIX, LinkSelf}})
	require.NoError(t, err)
	assert.Equal(t, []GPU{{Index: 2, NUMA: 0}, {Index: 7, NUMA: 1}}, topo.GPUs())
	assert.Equal(t, []int{2, 7}, topo.Indices())
	l, ok := topo.Link(7, 2)
	assert.True(t, ok)
	assert.Equal(t, LinkPIX, l)
	_, ok = topo.Link(7, 3)
	assert.False(t, ok, "GPU 3 is not on the node")
	_, ok = topo.Link(-1, 2)
	assert.False(t, ok)
}

func TestUniformRejects(t *testing.T) {
	_, err := Uniform(0, LinkSYS)
	assert.Error(t, err)
	_, err = Uniform(MaxGPUs+1, LinkSYS)
	assert.Error(t, err)
	_, err = Uniform(2, LinkSelf)
	assert.Error(t, err)
}

func TestIslands(t *testing.T) {
	tests := []struct {
		name string
		topo *Topology
		want [][]int
	}{
		{"A100 NVSwitch", loadFixture(t, "a100-nvswitch.txt"), [][]int{{0, 1, 2, 3, 4, 5, 6, 7}}},
		// The cross links 0-4, 1-5, 2-6, 3-7 join the two quads into one NVLink-connected mesh.
		{"DGX-1 cube mesh", loadFixture(t, "dgx1-v100.txt"), [][]int{{0, 1, 2, 3, 4, 5, 6, 7}}},
		{"two quads over SYS", islandsOf(t, 8, 4, 4, LinkSYS), [][]int{{0, 1, 2, 3}, {4, 5, 6, 7}}},
		{"PCIe only", loadFixture(t, "pcie-8gpu.txt"), [][]int{{0}, {1}, {2}, {3}, {4}, {5}, {6}, {7}}},
		{"interleaved pairs", matrix(t, 4, nil, func(a, b int) Link {
			if a%2 == b%2 {
				return NVLink(4)
			}
			return LinkPHB
		}), [][]int{{0, 2}, {1, 3}}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got := tt.topo.Islands()
			assert.Equal(t, tt.want, got)
			got[0][0] = 99
			assert.Equal(t, tt.want, tt.topo.Islands(), "Islands must return a copy")
		})
	}
}

func TestSameIsland(t *testing.T) {
	quads := islandsOf(t, 8, 4, 4, LinkSYS)
	tests := []struct {
		set  []int
		want bool
	}{
		{nil, true},
		{[]int{5}, true},
		{[]int{0, 1, 2, 3}, true},
		{[]int{3, 0}, true},
		{[]int{3, 4}, false},
		{[]int{0, 1, 2, 3, 4}, false},
		{[]int{0, 8}, false},
		{[]int{9}, false},
	}
	for _, tt := range tests {
		assert.Equal(t, tt.want, quads.SameIsland(tt.set), "%v", tt.set)
	}
}

func TestEqual(t *testing.T) {
	pairs := func(a, b int) Link {
		if a/2 == b/2 {
			return NVLink(2)
		}
		return LinkSYS
	}
	a := matrix(t, 4, nil, pairs)
	assert.True(t, a.Equal(matrix(t, 4, nil, pairs)))
	assert.False(t, a.Equal(matrix(t, 4, []int{0, 0, 1, 1}, pairs)), "NUMA nodes differ")
	assert.False(t, a.Equal(islandsOf(t, 4, 2, 2, LinkNODE)), "links differ")
	assert.False(t, a.Equal(islandsOf(t, 6, 2, 2, LinkSYS)), "sizes differ")
	assert.False(t, a.Equal(nil))
	assert.True(t, (*Topology)(nil).Equal(nil))
}
