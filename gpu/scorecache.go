package gpu

import (
	"math/bits"
	"sync"
)

// scoreCacheMax bounds a topology's remembered scores. An 8-GPU node has 256 states of use times
// 8 request sizes; nodes of dozens of GPUs could have millions, and past the bound ScoreMask
// simply computes.
const scoreCacheMax = 4096

// scoreCache remembers Score by state of use and request size. A score depends on nothing else,
// and topologies are shared by every node of one hardware model, so a cluster's filter and
// prioritize calls keep asking the same few questions: with the answers kept, a call pays a map
// lookup per distinct state instead of a search for the best set.
type scoreCache struct {
	mu sync.RWMutex
	m  map[maskKey]int8
}

type maskKey struct {
	free uint64
	k    int
}

// ScoreMask is Score for the free GPUs given as a bit set over positions in Indices() (bit p set:
// the GPU Indices()[p] is free), remembered across calls. Topologies of more than 64 GPUs have no
// such bit set; use Score.
func (t *Topology) ScoreMask(free uint64, k int) int {
	key := maskKey{free, k}
	t.scores.mu.RLock()
	score, ok := t.scores.m[key]
	t.scores.mu.RUnlock()
	if ok {
		return int(score)
	}
	indices := make([]int, 0, len(t.gpus))
	for p, g := range t.gpus {
		if free&(1<<p) != 0 {
			indices = append(indices, g.Index)
		}
	}
	computed := t.Score(indices, k)
	t.scores.mu.Lock()
	if t.scores.m == nil {
		t.scores.m = map[maskKey]int8{}
	}
	if len(t.scores.m) < scoreCacheMax {
		t.scores.m[key] = int8(computed)
	}
	t.scores.mu.Unlock()
	return computed
}

// FreeSet is a node's GPUs as its caller counts them: its topology and which are free. Which GPUs
// pods hold is the caller's business; this is what it passes.
type FreeSet struct {
	// Topo is the node's GPU topology, nil without GPUs; Indices its GPU indices, ascending.
	Topo    *Topology
	Indices []int
	// Free has bit p set while the GPU Indices[p] is free by index (nodes of up to 64 GPUs);
	// FreeBig lists those positions for larger nodes.
	Free    uint64
	FreeBig []int
	// Unknown counts GPUs taken by pods whose indices lockstep does not know: they are assumed
	// to be the highest-numbered free ones.
	Unknown int64
}

// freeMask is Free less the reserved GPUs and those of unknown indices, taken as the
// highest-numbered free ones: a guess, but one that keeps the count right, and the device plugin
// on such a node is not following lockstep's choices anyway. ok is false for nodes of more than 64
// GPUs.
func (g *FreeSet) freeMask(reserved int64) (mask uint64, ok bool) {
	if g.FreeBig != nil || len(g.Indices) > 64 {
		return 0, false
	}
	return DropHighest(g.Free, g.Unknown+reserved), true
}

// DropHighest takes the n highest set bits off mask: of a node's free GPUs, those that pods of
// unknown indices and reservations take are assumed to be the highest-numbered.
func DropHighest(mask uint64, n int64) uint64 {
	for ; n > 0 && mask != 0; n-- {
		mask &^= 1 << (bits.Len64(mask) - 1)
	}
	return mask
}

// FreeIndices is freeMask for any node, as the GPU indices, ascending.
func (g *FreeSet) FreeIndices(reserved int64) []int {
	positions := g.FreeBig
	if positions == nil {
		for p := range g.Indices {
			if g.Free&(1<<p) != 0 {
				positions = append(positions, p)
			}
		}
	}
	keep := max(len(positions)-int(max(g.Unknown+reserved, 0)), 0)
	out := make([]int, keep)
	for i, p := range positions[:keep] {
		out[i] = g.Indices[p]
	}
	return out
}

// Memo rates nodes' best free GPU sets 0..MaxScore within one call. Nodes of one hardware
// model in the same state of use get the same score, and a large cluster is mostly such nodes, so
// the score is looked up once per distinct state rather than once per node (and computed once per
// topology, state and size for the life of the process: Topology.ScoreMask). The first states
// are kept in an array searched in order, which is quicker than hashing for the handful a call
// usually meets; the rest go to a map. The zero value is ready to use.
type Memo struct {
	first [16]scoreEntry
	used  int
	more  map[scoreKey]int
}

type scoreKey struct {
	topo *Topology
	free uint64
	k    int64
}

type scoreEntry struct {
	key   scoreKey
	score int
}

// Score rates the best set of k GPUs the node can give beside reserved GPUs held for others;
// nodes without GPUs score 0.
func (memo *Memo) Score(g *FreeSet, k, reserved int64) int {
	if g.Topo == nil || k <= 0 {
		return 0
	}
	mask, ok := g.freeMask(reserved)
	if !ok {
		return g.Topo.Score(g.FreeIndices(reserved), int(k))
	}
	return memo.ScoreFree(g.Topo, mask, k)
}

// ScoreFree is Score for a node of topo and up to 64 GPUs whose free positions, what others hold
// taken off, are the bits of mask. The owner's hot loops call it without building a FreeSet per node.
func (memo *Memo) ScoreFree(topo *Topology, mask uint64, k int64) int {
	key := scoreKey{topo, mask, k}
	for i := range memo.used {
		if memo.first[i].key == key {
			return memo.first[i].score
		}
	}
	if score, hit := memo.more[key]; hit {
		return score
	}
	score := topo.ScoreMask(mask, int(k))
	if memo.used < len(memo.first) {
		memo.first[memo.used] = scoreEntry{key, score}
		memo.used++
		return score
	}
	if memo.more == nil {
		memo.more = map[scoreKey]int{}
	}
	memo.more[key] = score
	return score
}
