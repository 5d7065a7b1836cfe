package gang

import (
	"fmt"
	"math/bits"
	"slices"
	"sort"
	"strconv"
	"strings"

	"k8s.io/apimachinery/pkg/types"

	"github.com/lockstep-sched/lockstep/gpu"
)

// FormatGPUIDs renders indices for wellknown.AnnotationGPUIDs.
func FormatGPUIDs(ids []int) string {
	parts := make([]string, len(ids))
	for i, id := range ids {
		parts[i] = strconv.Itoa(id)
	}
	return strings.Join(parts, ",")
}

// ParseGPUIDs reads wellknown.AnnotationGPUIDs; want is the pod's GPU request, which the list must
// match.
func ParseGPUIDs(value string, want int64) ([]int, error) {
	if value == "" {
		return nil, fmt.Errorf("empty")
	}
	seen := map[int]bool{}
	var ids []int
	for _, part := range strings.Split(value, ",") {
		id, err := strconv.Atoi(strings.TrimSpace(part))
		if err != nil || id < 0 {
			return nil, fmt.Errorf("%q is not a GPU index", part)
		}
		if seen[id] {
			return nil, fmt.Errorf("GPU %d listed twice", id)
		}
		seen[id] = true
		ids = append(ids, id)
	}
	if int64(len(ids)) != want {
		return nil, fmt.Errorf("%d indices for a pod that requests %d GPUs", len(ids), want)
	}
	sort.Ints(ids)
	return ids, nil
}

// gpuLedger is which GPUs of one node are taken: by index for pods whose indices lockstep knows (it
// chose them, or read them back from wellknown.AnnotationGPUIDs), and as a bare count for pods
// bound by someone else.
type gpuLedger struct {
	owner map[int]types.UID
	// takenLow has bit i set while owner holds GPU i, for i below 64: on a node whose GPUs are
	// numbered 0..n-1, as nearly all are, the free set is then one mask operation, and prioritize
	// asks for it on every node on every call.
	takenLow uint64
	unknown  int64
}

func (l *gpuLedger) take(uid types.UID, ids []int, count int64) {
	if len(ids) == 0 {
		l.unknown += count
		return
	}
	if l.owner == nil {
		l.owner = map[int]types.UID{}
	}
	for _, id := range ids {
		l.owner[id] = uid
		if id < 64 {
			l.takenLow |= 1 << id
		}
	}
}

func (l *gpuLedger) release(uid types.UID, ids []int, count int64) {
	if len(ids) == 0 {
		l.unknown -= count
		return
	}
	for _, id := range ids {
		if l.owner[id] == uid {
			delete(l.owner, id)
			if id < 64 {
				l.takenLow &^= 1 << id
			}
		}
	}
}

// eachFree calls f with the position in indices (the topology's, ascending) of every GPU nobody
// holds, highest first. GPUs taken by pods of unknown indices, and extra more (GPUs reservations
// hold), are assumed to be the highest-numbered free ones: a guess, but one that keeps the count
// right, and the device plugin on such a node is not following lockstep's choices anyway.
func (l *gpuLedger) eachFree(indices []int, extra int64, f func(pos int)) {
	drop := int(max(l.unknown+extra, 0))
	for p := len(indices) - 1; p >= 0; p-- {
		if _, taken := l.owner[indices[p]]; taken {
			continue
		}
		if drop > 0 {
			drop--
			continue
		}
		f(p)
	}
}

// free lists the free GPU indices, ascending.
func (l *gpuLedger) free(indices []int, extra int64) []int {
	free := make([]int, 0, len(indices))
	l.eachFree(indices, extra, func(p int) { free = append(free, indices[p]) })
	slices.Reverse(free)
	return free
}

// freeMask is free as a bit set over positions in indices, without allocating; ok is false for
// nodes of more than 64 GPUs.
func (l *gpuLedger) freeMask(indices []int, extra int64) (mask uint64, ok bool) {
	n := len(indices)
	if n > 64 {
		return 0, false
	}
	if n == 0 || indices[n-1] != n-1 {
		// Positions are not indices (indices ascend without repeats, so they are 0..n-1 exactly
		// when the last is n-1): ask the ledger GPU by GPU.
		l.eachFree(indices, extra, func(p int) { mask |= 1 << p })
		return mask, true
	}
	mask = (^uint64(0) >> (64 - n)) &^ l.takenLow
	// As eachFree: GPUs taken without known indices are the highest-numbered free ones.
	for drop := max(l.unknown+extra, 0); drop > 0 && mask != 0; drop-- {
		mask &^= 1 << (bits.Len64(mask) - 1)
	}
	return mask, true
}

// chooseGPUs picks the best k-set on a node for a pod and marks it taken by uid at once, so two
// binds in flight never pick the same GPU. It returns nil when the node has no topology or not
// enough free GPUs by index (lockstep then binds without choosing indices).
func (l *ledger) chooseGPUs(node string, uid types.UID, k int64) []int {
	n, ok := l.nodes[node]
	if !ok || n.topo == nil || k <= 0 {
		return nil
	}
	set, _, ok := n.topo.BestSet(n.gpus.free(n.gpuIndices, 0), int(k))
	if !ok {
		return nil
	}
	n.gpus.take(uid, set, k)
	return set
}

// unchooseGPUs gives back indices chosen for a binding that failed.
func (l *ledger) unchooseGPUs(node string, uid types.UID, ids []int) {
	if n, ok := l.nodes[node]; ok && len(ids) > 0 {
		n.gpus.release(uid, ids, int64(len(ids)))
	}
}

// gpuScore rates a node's best free k-set 0..MaxScore; nodes without GPUs score 0. reserved
// GPUs (gang reservations count GPUs, not indices) are taken off the free list like unknown ones.
func (n *nodeInfo) gpuScore(k, reserved int64) int {
	if n.topo == nil || k <= 0 {
		return 0
	}
	return n.topo.Score(n.gpus.free(n.gpuIndices, reserved), int(k))
}

// scoreMemo remembers GPU scores within one call. Nodes of one hardware model in the same state
// of use get the same score, and a large cluster is mostly such nodes, so the score is looked up
// once per distinct state rather than once per node (and computed once per topology, state and
// size for the life of the process: gpu.Topology.ScoreMask). The first states are kept in an
// array searched in order, which is quicker than hashing for the handful a call usually meets;
// the rest go to a map.
type scoreMemo struct {
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

func (memo *scoreMemo) gpuScore(n *nodeInfo, k, reserved int64) int {
	if n.topo == nil || k <= 0 {
		return 0
	}
	mask, ok := n.gpus.freeMask(n.gpuIndices, reserved)
	if !ok {
		return n.gpuScore(k, reserved)
	}
	key := scoreKey{n.topo, mask, k}
	for i := range memo.used {
		if memo.first[i].key == key {
			return memo.first[i].score
		}
	}
	if score, hit := memo.more[key]; hit {
		return score
	}
	score := n.topo.ScoreMask(mask, int(k))
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
