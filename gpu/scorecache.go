package gpu

import "sync"

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
