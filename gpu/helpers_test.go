package gpu

import (
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/require"
)

// fixtures are real `nvidia-smi topo -m` layouts, one per system class the scorer must handle.
var fixtures = []string{
	"a100-nvswitch.txt",
	"h100-nv18.txt",
	"dgx1-v100.txt",
	"pcie-8gpu.txt",
	"t4-2gpu.txt",
	"k80-soc-legacy.txt",
}

func loadFixture(tb testing.TB, name string) *Topology {
	tb.Helper()
	f, err := os.Open(filepath.Join("testdata", name))
	require.NoError(tb, err)
	defer f.Close()
	t, err := ParseNvidiaSMI(f)
	require.NoError(tb, err, name)
	return t
}

// matrix builds a Topology of GPUs 0..n-1 from a symmetric link function over a < b.
func matrix(tb testing.TB, n int, numa []int, link func(a, b int) Link) *Topology {
	tb.Helper()
	gpus := make([]GPU, n)
	links := make([][]Link, n)
	for i := range n {
		gpus[i] = GPU{Index: i, NUMA: NUMAUnknown}
		if numa != nil {
			gpus[i].NUMA = numa[i]
		}
		links[i] = make([]Link, n)
		for j := range n {
			if i != j {
				links[i][j] = link(min(i, j), max(i, j))
			}
		}
	}
	t, err := New(gpus, links)
	require.NoError(tb, err)
	return t
}

// islandsOf is n GPUs in islands of size, fully NVLinked inside an island (NV<nv>) and joined
// by between outside: the shape of boxes built from 4-way NVLink bridges, or of several
// NVSwitch trays.
func islandsOf(tb testing.TB, n, size, nv int, between Link) *Topology {
	return matrix(tb, n, nil, func(a, b int) Link {
		if a/size == b/size {
			return NVLink(nv)
		}
		return between
	})
}

func uniform(tb testing.TB, n int, l Link) *Topology {
	tb.Helper()
	t, err := Uniform(n, l)
	require.NoError(tb, err)
	return t
}

// without is all GPUs of t except used: the free list of a node with used allocated.
func without(t *Topology, used ...int) []int {
	taken := map[int]bool{}
	for _, u := range used {
		taken[u] = true
	}
	var free []int
	for _, i := range t.Indices() {
		if !taken[i] {
			free = append(free, i)
		}
	}
	return free
}
