package decide

import (
	"math/bits"

	"github.com/lockstep-sched/lockstep/gpu"
)

// freeMask is Free less the reserved GPUs and those of unknown indices, taken as the
// highest-numbered free ones: a guess, but one that keeps the count right, and the device plugin
// on such a node is not following lockstep's choices anyway. ok is false for nodes of more than 64
// GPUs.
func (g *GPUs) freeMask(reserved int64) (mask uint64, ok bool) {
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
func (g *GPUs) FreeIndices(reserved int64) []int {
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

// ScoreMemo rates nodes' best free GPU sets 0..MaxScore within one call. Nodes of one hardware
// model in the same state of use get the same score, and a large cluster is mostly such nodes, so
// the score is looked up once per distinct state rather than once per node (and computed once per
// topology, state and size for the life of the process: gpu.Topology.ScoreMask). The first states
// are kept in an array searched in order, which is quicker than hashing for the handful a call
// usually meets; the rest go to a map. The zero value is ready to use.
type ScoreMemo struct {
	first [16]scoreEntry
	used  int
	more  map[scoreKey]int
}

type scoreKey struct {
	topo *gpu.Topology
	free uint64
	k    int64
}

type scoreEntry struct {
	key   scoreKey
	score int
}

// Score rates the best set of k GPUs the node can give beside reserved GPUs held for others;
// nodes without GPUs score 0.
func (memo *ScoreMemo) Score(g *GPUs, k, reserved int64) int {
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
// taken off, are the bits of mask. The owner's hot loops call it without building a GPUs value per
// node.
func (memo *ScoreMemo) ScoreFree(topo *gpu.Topology, mask uint64, k int64) int {
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
