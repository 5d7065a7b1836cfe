package main

import (
	"fmt"

	"github.com/lockstep-sched/lockstep/gpu"
)

// nodeState is the benchmark's own ledger of one node, kept for every policy: baselines place by
// it, and lockstep's placements (as its Binder reports them) are mirrored into it, so that every
// metric is computed the same way from the same kind of record.
type nodeState struct {
	traceNode
	topo     *gpu.Topology
	freeCPU  int64
	freeMem  int64
	freePods int
	owner    []string // per GPU index: the pod holding it, "" when free
	freeGPUs int
}

// placement is where one pod went.
type placement struct {
	pod    tracePod
	gang   *gangSpec
	node   *nodeState
	gpuIDs []int
}

type cluster struct {
	nodes  []*nodeState
	byName map[string]*nodeState
	placed []placement
}

func newCluster(nodes []traceNode, topos topologies) (*cluster, error) {
	c := &cluster{byName: make(map[string]*nodeState, len(nodes))}
	for _, n := range nodes {
		t, err := topos.get(n.model, n.gpus)
		if err != nil {
			return nil, fmt.Errorf("node %s: %w", n.name, err)
		}
		ns := &nodeState{traceNode: n, topo: t, freeCPU: n.cpuMilli, freeMem: n.memMiB, freePods: 110,
			owner: make([]string, n.gpus), freeGPUs: n.gpus}
		c.nodes = append(c.nodes, ns)
		c.byName[n.name] = ns
	}
	return c, nil
}

func (n *nodeState) fits(p tracePod) bool {
	return n.freeGPUs >= p.numGPU && n.freeCPU >= p.cpuMilli && n.freeMem >= p.memMiB && n.freePods >= 1
}

// lowestFree is what a device plugin without topology awareness hands out.
func (n *nodeState) lowestFree(k int) []int {
	ids := make([]int, 0, k)
	for i, o := range n.owner {
		if len(ids) == k {
			break
		}
		if o == "" {
			ids = append(ids, i)
		}
	}
	return ids
}

func (n *nodeState) freeIndices() []int {
	var ids []int
	for i, o := range n.owner {
		if o == "" {
			ids = append(ids, i)
		}
	}
	return ids
}

// place records p on n with the given GPU indices, checking that they are n's and free and that
// the pod fits: lockstep's placements go through the same check.
func (c *cluster) place(p tracePod, g *gangSpec, n *nodeState, ids []int) error {
	if !n.fits(p) {
		return fmt.Errorf("pod %s (%d GPU, %dm cpu, %d MiB) does not fit on %s (%d GPU, %dm cpu, %d MiB free)",
			p.name, p.numGPU, p.cpuMilli, p.memMiB, n.name, n.freeGPUs, n.freeCPU, n.freeMem)
	}
	if len(ids) != p.numGPU {
		return fmt.Errorf("pod %s on %s: %d GPU indices %v for %d GPUs", p.name, n.name, len(ids), ids, p.numGPU)
	}
	for _, id := range ids {
		if id < 0 || id >= len(n.owner) || n.owner[id] != "" {
			return fmt.Errorf("pod %s on %s: GPU %d is not a free GPU of the node (indices %v)", p.name, n.name, id, ids)
		}
	}
	for _, id := range ids {
		n.owner[id] = p.name
	}
	n.freeGPUs -= p.numGPU
	n.freeCPU -= p.cpuMilli
	n.freeMem -= p.memMiB
	n.freePods--
	c.placed = append(c.placed, placement{pod: p, gang: g, node: n, gpuIDs: ids})
	return nil
}

// unplaceLast takes the last count placements back (a baseline's gang that did not fit whole).
func (c *cluster) unplaceLast(count int) {
	for _, pl := range c.placed[len(c.placed)-count:] {
		n := pl.node
		for _, id := range pl.gpuIDs {
			n.owner[id] = ""
		}
		n.freeGPUs += pl.pod.numGPU
		n.freeCPU += pl.pod.cpuMilli
		n.freeMem += pl.pod.memMiB
		n.freePods++
	}
	c.placed = c.placed[:len(c.placed)-count]
}

// baseline is a topology-unaware, all-or-nothing placer: each member goes to the node pick
// chooses among the feasible ones, with the lowest free GPU indices; if a member finds no node,
// the whole gang is taken back.
type baseline struct {
	name string
	// better reports whether node a is preferred over node b for the next member.
	better func(a, b *nodeState) bool
}

// spread is kube-scheduler's default LeastAllocated flavour: most free GPUs, then most free CPU,
// then name.
var spread = baseline{name: "spread", better: func(a, b *nodeState) bool {
	if a.freeGPUs != b.freeGPUs {
		return a.freeGPUs > b.freeGPUs
	}
	if a.freeCPU != b.freeCPU {
		return a.freeCPU > b.freeCPU
	}
	return a.name < b.name
}}

// bestFit takes the feasible node with the fewest free GPUs, then the least free CPU, then name.
var bestFit = baseline{name: "best-fit", better: func(a, b *nodeState) bool {
	if a.freeGPUs != b.freeGPUs {
		return a.freeGPUs < b.freeGPUs
	}
	if a.freeCPU != b.freeCPU {
		return a.freeCPU < b.freeCPU
	}
	return a.name < b.name
}}

func (b baseline) placeGang(c *cluster, g *gangSpec) (ok bool, reason string, err error) {
	for i, p := range g.pods {
		var best *nodeState
		for _, n := range c.nodes {
			if n.fits(p) && (best == nil || b.better(n, best)) {
				best = n
			}
		}
		if best == nil {
			c.unplaceLast(i)
			return false, fmt.Sprintf("member %d of %d (%s) fits on no node after placing the %d before it", i+1, len(g.pods), p.name, i), nil
		}
		if err := c.place(p, g, best, best.lowestFree(p.numGPU)); err != nil {
			return false, "", err
		}
	}
	return true, "", nil
}
