package gpu

import (
	"fmt"
	"slices"
	"sync"
)

// NUMAUnknown is GPU.NUMA when the NUMA node a GPU hangs off is not known.
const NUMAUnknown = -1

// Limits on what a Topology may hold. They keep a malformed annotation from making the scheduler
// allocate or loop without bound; real nodes are far below them.
const (
	MaxGPUs     = 256
	MaxGPUIndex = 4095
)

// GPU is one device in a Topology.
type GPU struct {
	// Index is the device's NVML index: GPU<Index> in nvidia-smi, the number CUDA and the NVIDIA
	// device plugin use.
	Index int
	// NUMA is the NUMA node whose CPUs and memory are closest to the GPU, or NUMAUnknown.
	NUMA int
}

// Topology is the GPU-to-GPU part of one node's `nvidia-smi topo -m` matrix. It is immutable
// once built, so one Topology can be shared by concurrent scheduling goroutines.
type Topology struct {
	gpus  []GPU  // sorted by Index
	links []Link // len(gpus)² entries, row-major, by position in gpus
	bw    []int32
	pos   []int16 // GPU index -> position in gpus, -1 when the index is not on this node

	islands  [][]int // GPU indices, each ascending; islands ordered by their first GPU
	islandOf []int   // position -> island number

	// refs[k] caches the best k-set on the idle node, the yardstick Score measures against.
	refs []reference
	// scores remembers ScoreMask's answers (scorecache.go).
	scores scoreCache
}

type reference struct {
	once sync.Once
	q    Quality
}

// New builds a Topology from a list of GPUs and the matrix of links between them, where
// links[i][j] is the path from gpus[i] to gpus[j]. It checks everything the scorer relies on: at
// least one GPU, distinct in-range indices, a square and symmetric matrix with LinkSelf exactly
// on the diagonal. Errors name the offending entry by its position in the inputs.
func New(gpus []GPU, links [][]Link) (*Topology, error) {
	n := len(gpus)
	switch {
	case n == 0:
		return nil, fmt.Errorf("no GPUs")
	case n > MaxGPUs:
		return nil, fmt.Errorf("%d GPUs, more than the supported %d", n, MaxGPUs)
	case len(links) != n:
		return nil, fmt.Errorf("links has %d rows for %d GPUs; the matrix must be square with one row per GPU", len(links), n)
	}
	at := make(map[int]int, n)
	for i, g := range gpus {
		if g.Index < 0 || g.Index > MaxGPUIndex {
			return nil, fmt.Errorf("gpus[%d]: index %d is outside 0..%d", i, g.Index, MaxGPUIndex)
		}
		if g.NUMA < NUMAUnknown {
			return nil, fmt.Errorf("gpus[%d] (GPU %d): NUMA node %d is invalid (use %d for unknown)", i, g.Index, g.NUMA, NUMAUnknown)
		}
		if j, dup := at[g.Index]; dup {
			return nil, fmt.Errorf("gpus[%d]: duplicate index %d (also gpus[%d])", i, g.Index, j)
		}
		at[g.Index] = i
	}
	for i, row := range links {
		if len(row) != n {
			return nil, fmt.Errorf("links[%d] (GPU %d) has %d entries for %d GPUs; the matrix must be square", i, gpus[i].Index, len(row), n)
		}
	}
	for i := range n {
		for j := range n {
			l := links[i][j]
			switch {
			case i == j && l != LinkSelf:
				return nil, fmt.Errorf("links[%d][%d] (GPU %d to itself) is %v; the diagonal must be X", i, j, gpus[i].Index, l)
			case i != j && l == LinkSelf:
				return nil, fmt.Errorf("links[%d][%d] (GPU %d to GPU %d) is X, which only belongs on the diagonal", i, j, gpus[i].Index, gpus[j].Index)
			case !l.valid():
				return nil, fmt.Errorf("links[%d][%d] (GPU %d to GPU %d) is not a link class (value %d)", i, j, gpus[i].Index, gpus[j].Index, uint16(l))
			case j > i && links[j][i] != l:
				return nil, fmt.Errorf("links[%d][%d] (GPU %d to GPU %d) is %v but links[%d][%d] is %v; the matrix must be symmetric",
					i, j, gpus[i].Index, gpus[j].Index, l, j, i, links[j][i])
			}
		}
	}

	// Store GPUs sorted by index so that positions order like indices: BestSet then returns sets
	// in ascending index order for free, and two Topologies of the same node compare equal.
	order := make([]int, n)
	for i := range order {
		order[i] = i
	}
	slices.SortFunc(order, func(a, b int) int { return gpus[a].Index - gpus[b].Index })

	t := &Topology{
		gpus:  make([]GPU, n),
		links: make([]Link, n*n),
		bw:    make([]int32, n*n),
		refs:  make([]reference, n+1),
	}
	maxIndex := 0
	for p, i := range order {
		t.gpus[p] = gpus[i]
		maxIndex = max(maxIndex, gpus[i].Index)
		for q, j := range order {
			t.links[p*n+q] = links[i][j]
			t.bw[p*n+q] = int32(links[i][j].Bandwidth())
		}
	}
	t.pos = make([]int16, maxIndex+1)
	for i := range t.pos {
		t.pos[i] = -1
	}
	for p, g := range t.gpus {
		t.pos[g.Index] = int16(p)
	}
	t.findIslands()
	return t, nil
}

// Uniform is a Topology of n GPUs, indices 0..n-1 with unknown NUMA nodes, where every pair is
// joined by the same link class. It stands in for nodes whose wiring is unknown (l = LinkSYS,
// claiming nothing) and describes NVSwitch systems exactly (every pair NV<links per GPU>).
func Uniform(n int, l Link) (*Topology, error) {
	if l == LinkSelf && n > 1 {
		return nil, fmt.Errorf("uniform topology needs a link class other than X")
	}
	return newFromFunc(n, func(int, int) Link { return l })
}

func newFromFunc(n int, link func(a, b int) Link) (*Topology, error) {
	if n < 1 || n > MaxGPUs {
		return nil, fmt.Errorf("%d GPUs: want 1..%d", n, MaxGPUs)
	}
	gpus := make([]GPU, n)
	links := make([][]Link, n)
	for i := range n {
		gpus[i] = GPU{Index: i, NUMA: NUMAUnknown}
		links[i] = make([]Link, n)
		for j := range n {
			if i != j {
				links[i][j] = link(min(i, j), max(i, j))
			}
		}
	}
	return New(gpus, links)
}

func (l Link) valid() bool { return l.IsNVLink() || int(l) < len(pcieTokens) }

// Len is the number of GPUs.
func (t *Topology) Len() int { return len(t.gpus) }

// GPUs lists the GPUs in ascending index order.
func (t *Topology) GPUs() []GPU { return slices.Clone(t.gpus) }

// Indices lists the GPU indices in ascending order: the free list of an idle node.
func (t *Topology) Indices() []int {
	out := make([]int, len(t.gpus))
	for p, g := range t.gpus {
		out[p] = g.Index
	}
	return out
}

// Link is the path between GPUs a and b (by index); ok is false if either is not on the node.
func (t *Topology) Link(a, b int) (l Link, ok bool) {
	pa, pb := t.position(a), t.position(b)
	if pa < 0 || pb < 0 {
		return 0, false
	}
	return t.links[pa*len(t.gpus)+pb], true
}

func (t *Topology) position(index int) int {
	if index < 0 || index >= len(t.pos) {
		return -1
	}
	return int(t.pos[index])
}

func (t *Topology) link(p, q int) Link { return t.links[p*len(t.gpus)+q] }

// Equal reports whether two topologies describe the same GPUs, NUMA nodes and links.
func (t *Topology) Equal(o *Topology) bool {
	if t == nil || o == nil {
		return t == o
	}
	return slices.Equal(t.gpus, o.gpus) && slices.Equal(t.links, o.links)
}

// Islands returns the NVLink islands: the connected components of the graph whose edges are
// the NV# links, as ascending GPU indices, ordered by their lowest GPU. A GPU without NVLink is
// an island of its own, so every GPU is in exactly one island. Connectivity, not full
// connectivity, is what counts: the DGX-1 hybrid cube mesh is a single island because NCCL can
// ring all eight GPUs over NVLink, although GPU 0 and GPU 5 share no direct link (BestSet and
// Quality.WeakestLink are what tell such pairs apart).
func (t *Topology) Islands() [][]int {
	out := make([][]int, len(t.islands))
	for i, is := range t.islands {
		out[i] = slices.Clone(is)
	}
	return out
}

// SameIsland reports whether all of set (GPU indices) lie in one NVLink island. Sets with an
// index the node does not have are never inside an island; the empty set trivially is.
func (t *Topology) SameIsland(set []int) bool {
	island := -1
	for _, index := range set {
		p := t.position(index)
		if p < 0 {
			return false
		}
		if island >= 0 && t.islandOf[p] != island {
			return false
		}
		island = t.islandOf[p]
	}
	return true
}

func (t *Topology) findIslands() {
	n := len(t.gpus)
	t.islandOf = make([]int, n)
	for p := range t.islandOf {
		t.islandOf[p] = -1
	}
	stack := make([]int, 0, n)
	for start := range n {
		if t.islandOf[start] >= 0 {
			continue
		}
		id := len(t.islands)
		var members []int
		t.islandOf[start] = id
		stack = append(stack[:0], start)
		for len(stack) > 0 {
			p := stack[len(stack)-1]
			stack = stack[:len(stack)-1]
			members = append(members, t.gpus[p].Index)
			for q := range n {
				if t.islandOf[q] < 0 && t.link(p, q).IsNVLink() {
					t.islandOf[q] = id
					stack = append(stack, q)
				}
			}
		}
		slices.Sort(members)
		t.islands = append(t.islands, members)
	}
}
