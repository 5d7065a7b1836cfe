package main

import (
	"fmt"
	"maps"
	"math/rand/v2"
	"slices"
	"sort"
	"strings"

	corev1 "k8s.io/api/core/v1"

	"github.com/lockstep-sched/lockstep/fabric"
)

// The openb trace says nothing about the network between its nodes. To measure lockstep's
// network tiers (gang.Config.Tiers) the benchmark gives the nodes a three-tier fabric of its own:
//
//   - rack: 8 nodes behind one top-of-rack switch, label lockstep.bench/rack=bNN-rM (unique per
//     rack: block NN, rack M of 0..3 in it);
//   - block: 4 racks, 32 nodes, behind one aggregation switch, label lockstep.bench/block=bNN;
//   - the whole cluster above the blocks: no label, since lockstep places a gang that fits in
//     no block across the cluster anyway.
//
// The nodes are shuffled with the fabric seed (math/rand/v2 PCG), then cut in that order into
// racks of 8 and the racks into blocks of 4; the last rack holds what is left (1,213 nodes =
// 151 racks of 8 + one of 5, in 38 blocks). Why shuffle: the trace's node order is anonymised
// serial numbers, which say nothing of where a node stands. Cut in that order, a rack would be
// nodes with neighbouring names, and every policy here breaks ties by name, so the baselines
// would keep gangs in one rack by accident (unshuffled, lockstep without tiers put 36% of
// multi-node gangs in one rack, shuffled none): the table would credit the tie-break, not the
// policy. The order also has runs of one model (22 P100 boxes first, 17 T4 further on) that
// would make a few racks all small boxes. Shuffled, every rack is a sample of the cluster's mix,
// and -fabric-seed gives another layout, to check a result is not one layout's luck. Real racks
// are often of one server model; the trace does not say which nodes share one, so the benchmark
// does not guess.

const (
	labelRack  = "lockstep.bench/rack"
	labelBlock = "lockstep.bench/block"
	rackNodes  = 8
	blockRacks = 4
)

// benchTiers is lockstep+tiers' gang.Config.Tiers, narrowest first.
var benchTiers = fabric.Keys(labelRack, labelBlock)

// rack is one rack of the fabric, named by its label values.
type rack struct {
	name, block string
	nodes       []traceNode
}

// netFabric is where every node stands.
type netFabric struct {
	seed   uint64
	racks  []rack
	rackOf map[string]int // node name -> index in racks
}

// newFabric lays the nodes out by the rule above.
func newFabric(nodes []traceNode, seed uint64) *netFabric {
	order := slices.Clone(nodes)
	rng := rand.New(rand.NewPCG(seed, 0x6661627269630000)) // "fabric"
	rng.Shuffle(len(order), func(i, j int) { order[i], order[j] = order[j], order[i] })
	f := chunkFabric(order)
	f.seed = seed
	return f
}

// chunkFabric cuts nodes, in the order given, into racks of rackNodes and blocks of blockRacks.
func chunkFabric(order []traceNode) *netFabric {
	f := &netFabric{rackOf: make(map[string]int, len(order))}
	for i := 0; i < len(order); i += rackNodes {
		r := len(f.racks)
		block := fmt.Sprintf("b%02d", r/blockRacks)
		f.racks = append(f.racks, rack{name: fmt.Sprintf("%s-r%d", block, r%blockRacks), block: block,
			nodes: order[i:min(i+rackNodes, len(order))]})
		for _, n := range f.racks[r].nodes {
			f.rackOf[n.name] = r
		}
	}
	return f
}

// label gives a Node lockstep sees its rack and block; a nil fabric labels nothing.
func (f *netFabric) label(obj *corev1.Node) {
	if f == nil {
		return
	}
	r, ok := f.rackOf[obj.Name]
	if !ok {
		return
	}
	obj.Labels[labelRack] = f.racks[r].name
	obj.Labels[labelBlock] = f.racks[r].block
}

func rackGPUs(r rack) int {
	n := 0
	for _, node := range r.nodes {
		n += node.gpus
	}
	return n
}

// describe is the layout in one line: rack and block counts and the spread of a rack's GPUs.
func (f *netFabric) describe() string {
	if len(f.racks) == 0 {
		return "no nodes"
	}
	sizes := map[int]int{}
	blocks := map[string]bool{}
	gpus := make([]int, len(f.racks))
	for i, r := range f.racks {
		sizes[len(r.nodes)]++
		blocks[r.block] = true
		gpus[i] = rackGPUs(r)
	}
	sort.Ints(gpus)
	var parts []string
	for _, s := range slices.Backward(slices.Sorted(maps.Keys(sizes))) {
		parts = append(parts, fmt.Sprintf("%d of %d nodes", sizes[s], s))
	}
	return fmt.Sprintf("%d racks (%s) in %d blocks of up to %d racks, then the whole cluster; GPUs per rack min %d, median %d, max %d "+
		"(nodes shuffled with seed %d, then cut in order; labels %s, %s)",
		len(f.racks), strings.Join(parts, ", "), len(blocks), blockRacks, gpus[0], gpus[(len(gpus)-1)/2], gpus[len(gpus)-1],
		f.seed, labelRack, labelBlock)
}
