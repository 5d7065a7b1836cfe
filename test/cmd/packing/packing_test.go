package main

import (
	"io"
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
	l, err := newLockstep(c)
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
