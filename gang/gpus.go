package gang

import (
	"slices"

	"github.com/lockstep-sched/lockstep/gpu"
	"k8s.io/apimachinery/pkg/types"
)

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

// eachFreeByIndex calls f with the position in indices (the topology's, ascending) of every GPU
// no pod holds by index, highest first. GPUs taken by pods of unknown indices are not among the
// held: gpu.FreeSet says which of the free ones they are taken to be.
func (l *gpuLedger) eachFreeByIndex(indices []int, f func(pos int)) {
	for p := len(indices) - 1; p >= 0; p-- {
		if _, taken := l.owner[indices[p]]; !taken {
			f(p)
		}
	}
}

// chooseGPUs picks the best k-set on a node for a pod and marks it taken by uid at once, so two
// binds in flight never pick the same GPU. It returns nil when the node has no topology or not
// enough free GPUs by index (lockstep then binds without choosing indices), and on a node whose
// GPUs are DRA devices.
func (l *ledger) chooseGPUs(node string, uid types.UID, k int64) []int {
	n, ok := l.nodes[node]
	if !ok || n.topo == nil || k <= 0 || n.topoSource == gpu.SourceDRA {
		return nil // a DRA node's devices are the scheduler's allocator's to choose
	}
	free := n.gpuState()
	set, _, ok := n.topo.BestSet(free.FreeIndices(0), int(k))
	if !ok {
		return nil
	}
	n.gpus.take(uid, set, k)
	l.nodeChanged(node)
	return set
}

// unchooseGPUs gives back indices chosen for a binding that failed.
func (l *ledger) unchooseGPUs(node string, uid types.UID, ids []int) {
	if n, ok := l.nodes[node]; ok && len(ids) > 0 {
		n.gpus.release(uid, ids, int64(len(ids)))
		l.nodeChanged(node)
	}
}

// gpuState is the node's GPUs as scoring reads them (gpu.FreeSet). It allocates nothing for a
// node of up to 64 GPUs numbered 0..n-1, as nearly all are: prioritize asks for it on every node
// on every call.
func (n *nodeInfo) gpuState() gpu.FreeSet {
	g := gpu.FreeSet{Topo: n.topo, Indices: n.gpuIndices, Unknown: n.gpus.unknown}
	if free, ok := n.freeByIndex(); ok {
		g.Free = free
	} else if len(n.gpuIndices) > 64 {
		g.FreeBig = []int{}
		n.gpus.eachFreeByIndex(n.gpuIndices, func(p int) { g.FreeBig = append(g.FreeBig, p) })
		slices.Reverse(g.FreeBig)
	} else {
		n.gpus.eachFreeByIndex(n.gpuIndices, func(p int) { g.Free |= 1 << p })
	}
	return g
}

// freeByIndex is the node's free GPUs by index as a bit set, for the usual node of up to 64 GPUs
// numbered 0..n-1 (indices ascend without repeats, so they are exactly when the last is n-1);
// ok is false for any other.
func (n *nodeInfo) freeByIndex() (free uint64, ok bool) {
	count := len(n.gpuIndices)
	if count == 0 || count > 64 || n.gpuIndices[count-1] != count-1 {
		return 0, false
	}
	return (^uint64(0) >> (64 - count)) &^ n.gpus.takenLow, true
}

// gpuScore rates the node's best free set of k GPUs beside reserved GPUs held for others, through
// memo. Prioritize and the shortlist ask it of every node on every call, so the usual node is
// scored from its bit set, without a copy of its state.
func (n *nodeInfo) gpuScore(memo *gpu.Memo, k, reserved int64) int {
	if n.topo == nil || k <= 0 {
		return 0
	}
	if free, ok := n.freeByIndex(); ok {
		return memo.ScoreFree(n.topo, gpu.DropHighest(free, n.gpus.unknown+reserved), k)
	}
	state := n.gpuState()
	return memo.Score(&state, k, reserved)
}
