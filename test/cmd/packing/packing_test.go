package main

import (
	"fmt"
	"io"
	"reflect"
	"slices"
	"testing"

	"k8s.io/klog/v2"

	"github.com/lockstep-sched/lockstep/gpu"
)

func TestMakeGangsCutAtNumGPUChange(t *testing.T) {
	var pods []tracePod
	for i, k := range []int{1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 8, 8, 8, 2, 1, 1} {
		pods = append(pods, tracePod{name: string(rune('a' + i)), row: i, numGPU: k})
	}
	gangs := makeGangs(pods, 1)
	total := 0
	for _, g := range gangs {
		total += len(g.pods)
		for _, p := range g.pods {
			if p.numGPU != g.numGPU {
				t.Fatalf("gang %s mixes num_gpu: %+v", g.name, g.pods)
			}
		}
		if !slices.Contains([]int{1, 2, 3, 4, 5, 6, 7, 8}, len(g.pods)) {
			t.Fatalf("gang %s has %d members", g.name, len(g.pods))
		}
	}
	if total != len(pods) {
		t.Fatalf("gangs hold %d pods, want %d", total, len(pods))
	}
	if again := makeGangs(pods, 1); len(again) != len(gangs) {
		t.Fatalf("same seed, different grouping")
	}
}

func TestTopologies(t *testing.T) {
	ts := topologies{}
	cases := []struct {
		model         string
		gpus          int
		nvlink2, nv4  bool
		nv8           bool
		pairs01, pair bool // {0,1} NVLink; {0,4} (or {0,2}) NVLink
	}{
		{"G2", 8, true, true, false, true, false},
		{"G3", 8, true, true, true, true, true},
		{"V100M16", 8, true, true, false, true, true}, // cube mesh: GPU 0 and 4 are linked
		{"V100M32", 4, true, true, false, true, true},
		{"T4", 4, false, false, false, false, false},
		{"P100", 2, false, false, false, false, false},
	}
	for _, c := range cases {
		tp, err := ts.get(c.model, c.gpus)
		if err != nil {
			t.Fatal(err)
		}
		if got := nvlinkCapable(tp, 2); got != c.nvlink2 {
			t.Errorf("%s x%d: NVLink pair %v, want %v", c.model, c.gpus, got, c.nvlink2)
		}
		if got := nvlinkCapable(tp, 4); got != c.nv4 {
			t.Errorf("%s x%d: NVLink quad %v, want %v", c.model, c.gpus, got, c.nv4)
		}
		if got := nvlinkCapable(tp, 8); got != c.nv8 {
			t.Errorf("%s x%d: NVLink 8-set %v, want %v", c.model, c.gpus, got, c.nv8)
		}
		if got := allNVLink(tp, []int{0, 1}); got != c.pairs01 {
			t.Errorf("%s x%d: {0,1} NVLink %v, want %v", c.model, c.gpus, got, c.pairs01)
		}
		other := 4
		if c.gpus < 8 {
			other = c.gpus - 1
		}
		if got := allNVLink(tp, []int{0, other}); got != c.pair {
			t.Errorf("%s x%d: {0,%d} NVLink %v, want %v", c.model, c.gpus, other, got, c.pair)
		}
		obj := nodeObject(traceNode{name: "n", cpuMilli: 1000, memMiB: 1024, gpus: c.gpus, model: c.model}, tp)
		back, src, err := gpu.FromNode(obj)
		if err != nil || src != gpu.SourceAnnotation || !back.Equal(tp) {
			t.Errorf("%s x%d: annotation round trip: %v %v %v", c.model, c.gpus, src, err, back.Equal(tp))
		}
	}
}

func TestBaselineRollsBackGang(t *testing.T) {
	nodes := []traceNode{{name: "a", cpuMilli: 8000, memMiB: 8192, gpus: 2, model: "T4"}, {name: "b", cpuMilli: 8000, memMiB: 8192, gpus: 2, model: "T4"}}
	for _, b := range []baseline{spread, bestFit} {
		c, err := newCluster(nodes, topologies{})
		if err != nil {
			t.Fatal(err)
		}
		g := &gangSpec{name: "g", numGPU: 2, pods: []tracePod{{name: "p0", numGPU: 2}, {name: "p1", numGPU: 2}, {name: "p2", numGPU: 2}}}
		ok, _, err := b.placeGang(c, g)
		if err != nil || ok {
			t.Fatalf("%s: 3 x 2 GPU on 2 x 2 GPU placed: ok %v err %v", b.name, ok, err)
		}
		if len(c.placed) != 0 || c.nodes[0].freeGPUs != 2 || c.nodes[1].freeGPUs != 2 {
			t.Fatalf("%s: gang not rolled back: %d placed", b.name, len(c.placed))
		}
	}
}

// TestLockstepSmall drives the real manager on one G2 node.
func TestLockstepSmall(t *testing.T) {
	klog.SetOutput(io.Discard)
	klog.LogToStderr(false)
	nodes := []traceNode{{name: "g2", cpuMilli: 96000, memMiB: 393216, gpus: 8, model: "G2"}}
	c, err := newCluster(nodes, topologies{})
	if err != nil {
		t.Fatal(err)
	}
	l, err := newLockstep(c, nil, nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(l.m.Stop)
	misses := 0
	l.onPlaced = func(g *gangSpec, member int, n *nodeState, ids []int) {
		if _, ok := checkNVLink(c, g, member, n, ids); ok {
			misses++
		}
	}
	// Three 1-GPU pods fill three GPUs of one quad; a gang of two 2-GPU pods then gets the
	// other quad's two NVLink pairs; one GPU is left, too few for another 2-GPU pod.
	g1 := &gangSpec{name: "g1", numGPU: 1, pods: []tracePod{pod("a", 1), pod("b", 1), pod("c", 1)}}
	g2 := &gangSpec{name: "g2", numGPU: 2, pods: []tracePod{pod("d", 2), pod("e", 2)}}
	for _, g := range []*gangSpec{g1, g2} {
		ok, why, err := l.placeGang(c, g)
		if err != nil || !ok {
			t.Fatalf("gang %s: ok %v why %q err %v", g.name, ok, why, err)
		}
	}
	if len(c.placed) != 5 || c.nodes[0].freeGPUs != 1 || misses != 0 {
		t.Fatalf("%d placed, %d GPUs free, %d NVLink misses", len(c.placed), c.nodes[0].freeGPUs, misses)
	}
	ok, _, err := l.placeGang(c, &gangSpec{name: "g3", numGPU: 2, pods: []tracePod{pod("f", 2)}})
	if err != nil || ok {
		t.Fatalf("a 2-GPU pod placed with 1 GPU free: ok %v err %v", ok, err)
	}
}

func TestCheckNVLink(t *testing.T) {
	nodes := []traceNode{{name: "n1", cpuMilli: 96000, memMiB: 393216, gpus: 8, model: "G2"}, {name: "n2", cpuMilli: 96000, memMiB: 393216, gpus: 8, model: "G2"}}
	c, err := newCluster(nodes, topologies{})
	if err != nil {
		t.Fatal(err)
	}
	filler := &gangSpec{name: "filler", numGPU: 3, pods: []tracePod{pod("x", 3), pod("y", 3)}}
	if err := c.place(filler.pods[0], filler, c.nodes[0], []int{0, 1, 2}); err != nil {
		t.Fatal(err)
	}
	if err := c.place(filler.pods[1], filler, c.nodes[0], []int{5, 6, 7}); err != nil {
		t.Fatal(err)
	}
	g := &gangSpec{name: "g", numGPU: 2, pods: []tracePod{pod("p", 2)}}
	m, ok := checkNVLink(c, g, 0, c.nodes[0], []int{3, 4})
	if !ok || m.nodeCould || m.elsewhere != 1 || m.mates != 0 || !slices.Equal(m.freeThen, []int{3, 4}) {
		t.Fatalf("miss %+v, ok %v", m, ok)
	}
	if _, ok := checkNVLink(c, g, 0, c.nodes[1], []int{0, 1}); ok {
		t.Fatal("an NVLink pair reported as a miss")
	}
}

func pod(name string, k int) tracePod {
	return tracePod{name: name, numGPU: k, cpuMilli: 1000, memMiB: 1024}
}

func TestFabricLayout(t *testing.T) {
	var nodes []traceNode
	for i := range 70 {
		nodes = append(nodes, traceNode{name: fmt.Sprintf("n%02d", i), gpus: 8, model: "G2"})
	}
	f := newFabric(nodes, 7)
	if again := newFabric(nodes, 7); !reflect.DeepEqual(f, again) {
		t.Fatal("same seed, different layout")
	}
	if other := newFabric(nodes, 8); reflect.DeepEqual(f.rackOf, other.rackOf) {
		t.Fatal("another seed, the same layout")
	}
	// 70 nodes: 8 racks of 8 and one of 6; racks 0-3 in b00, 4-7 in b01, 8 in b02.
	if len(f.racks) != 9 || len(f.rackOf) != 70 {
		t.Fatalf("%d racks, %d nodes placed", len(f.racks), len(f.rackOf))
	}
	names := map[string]bool{}
	for i, r := range f.racks {
		want := rackNodes
		if i == 8 {
			want = 6
		}
		if len(r.nodes) != want || r.block != fmt.Sprintf("b%02d", i/4) || r.name != fmt.Sprintf("b%02d-r%d", i/4, i%4) || names[r.name] {
			t.Fatalf("rack %d: %s in %s with %d nodes", i, r.name, r.block, len(r.nodes))
		}
		names[r.name] = true
		for _, n := range r.nodes {
			if f.rackOf[n.name] != i {
				t.Fatalf("node %s in rack %d, rackOf says %d", n.name, i, f.rackOf[n.name])
			}
		}
	}
	obj := nodeObject(nodes[0], mustTopology(t, "G2", 8))
	f.label(obj)
	r := f.racks[f.rackOf["n00"]]
	if obj.Labels[labelRack] != r.name || obj.Labels[labelBlock] != r.block {
		t.Fatalf("labels %v, want rack %s block %s", obj.Labels, r.name, r.block)
	}
}

// TestNetworkMetrics places gangs by hand on 5 racks of 8-GPU nodes (n00-n07 rack b00-r0,
// n08-n15 b00-r1, ..., n32-n39 b01-r0).
func TestNetworkMetrics(t *testing.T) {
	var nodes []traceNode
	for i := range 40 {
		nodes = append(nodes, traceNode{name: fmt.Sprintf("n%02d", i), cpuMilli: 96000, memMiB: 393216, gpus: 8, model: "G2"})
	}
	f := chunkFabric(nodes)
	c, err := newCluster(nodes, topologies{})
	if err != nil {
		t.Fatal(err)
	}
	gangs := []gangSpec{
		{name: "two-racks", numGPU: 8, pods: []tracePod{pod("a0", 8), pod("a1", 8)}},
		{name: "one-rack", numGPU: 8, pods: []tracePod{pod("b0", 8), pod("b1", 8)}},
		{name: "two-blocks", numGPU: 8, pods: []tracePod{pod("c0", 8), pod("c1", 8)}},
		{name: "one-node", numGPU: 1, pods: []tracePod{pod("d0", 1), pod("d1", 1)}}, // not multi-node
	}
	where := [][]int{{0, 8}, {1, 2}, {3, 32}, {4, 4}}
	allocated := 0
	for i, at := range where {
		for j, n := range at {
			ids := []int{0, 1, 2, 3, 4, 5, 6, 7}
			if gangs[i].numGPU == 1 {
				ids = []int{j}
			}
			if err := c.place(gangs[i].pods[j], &gangs[i], c.nodes[n], ids); err != nil {
				t.Fatal(err)
			}
			allocated += len(ids)
		}
	}
	kind := classifyGangs(gangs, nodes, f)
	if len(kind) != 3 || kind[&gangs[3]].multiNode || !kind[&gangs[0]].rackFit {
		t.Fatalf("classified %v", kind)
	}
	s := measureNetwork(c, f, kind)
	want := netStats{gangs: 3, oneRack: 1, oneBlock: 2, racks: 5, rackFit: 3, rackFitInOne: 1, allocated: allocated, total: 320}
	if s != want {
		t.Fatalf("stats %+v, want %+v", s, want)
	}
}

// TestRackFit: two 8-GPU members fit a rack with two 8-GPU nodes, not one with a single 8-GPU
// node and many small ones, whatever its GPU total.
func TestRackFit(t *testing.T) {
	big := traceNode{name: "big", cpuMilli: 96000, memMiB: 393216, gpus: 8, model: "G2"}
	small := traceNode{name: "small", cpuMilli: 64000, memMiB: 262144, gpus: 2, model: "T4"}
	g := &gangSpec{name: "g", numGPU: 8, pods: []tracePod{pod("a", 8), pod("b", 8)}}
	if !fitsOn(g, []traceNode{big, small, big}) || fitsOn(g, []traceNode{big, small, small, small, small}) {
		t.Fatal("fitsOn")
	}
	cpuHog := &gangSpec{name: "h", numGPU: 4, pods: []tracePod{pod("c", 4), pod("d", 4)}}
	cpuHog.pods[0].cpuMilli, cpuHog.pods[1].cpuMilli = 60000, 60000
	if fitsOn(cpuHog, []traceNode{big}) || !fitsOn(cpuHog, []traceNode{big, big}) {
		t.Fatal("fitsOn ignores cpu")
	}
}

// TestLockstepTiersOneRack: only rack b00-r1 has two 8-GPU nodes; with tiers the manager puts a
// gang of 2 x 8 GPU there, not on the 8-GPU node of each rack.
func TestLockstepTiersOneRack(t *testing.T) {
	klog.SetOutput(io.Discard)
	klog.LogToStderr(false)
	var nodes []traceNode
	for i := range 16 {
		n := traceNode{name: fmt.Sprintf("n%02d", i), cpuMilli: 64000, memMiB: 262144, gpus: 2, model: "T4"}
		if i == 0 || i == 14 || i == 15 {
			n = traceNode{name: n.name, cpuMilli: 96000, memMiB: 393216, gpus: 8, model: "G2"}
		}
		nodes = append(nodes, n)
	}
	f := chunkFabric(nodes)
	c, err := newCluster(nodes, topologies{})
	if err != nil {
		t.Fatal(err)
	}
	l, err := newLockstep(c, f, benchTiers)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(l.m.Stop)
	g := &gangSpec{name: "g", numGPU: 8, pods: []tracePod{pod("a", 8), pod("b", 8)}}
	if ok, why, err := l.placeGang(c, g); err != nil || !ok {
		t.Fatalf("ok %v why %q err %v", ok, why, err)
	}
	for _, pl := range c.placed {
		if f.racks[f.rackOf[pl.node.name]].name != "b00-r1" {
			t.Fatalf("member %s on %s, rack %s", pl.pod.name, pl.node.name, f.racks[f.rackOf[pl.node.name]].name)
		}
	}
}

func mustTopology(t *testing.T, model string, n int) *gpu.Topology {
	t.Helper()
	tp, err := topologies{}.get(model, n)
	if err != nil {
		t.Fatal(err)
	}
	return tp
}
