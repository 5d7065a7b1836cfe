package main

import (
	"fmt"
	"strconv"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/lockstep-sched/lockstep/gpu"
	"github.com/lockstep-sched/lockstep/wellknown"
)

// The openb node list names GPU models but not how their GPUs are wired. The benchmark gives
// every model the wiring of the usual server for it (printed with the results):
//
//   - V100M16 / V100M32 with 8 GPUs: DGX-1 V100 hybrid cube mesh, taken from lockstep's own table of
//     known systems (gpu.FromNode on a node labelled nvidia.com/gpu.product=Tesla-V100-SXM2-16GB
//     (-32GB), nvidia.com/gpu.count=8).
//   - G2 (8 GPUs, an anonymised model): two NVLink quads {0-3} and {4-7}, NV2 between every pair
//     inside a quad, SYS across (one quad per socket, NUMA 0 and 1); built with gpu.New.
//   - G3 (8 GPUs): NVSwitch, every pair NV12.
//   - V100M16 / V100M32 with 4 GPUs: every pair NV2.
//   - T4 / P100 / A10 (PCIe cards): GPUs in pairs {0,1}, {2,3} behind one PCIe switch (PIX); a
//     4-GPU box has one pair per socket, so the pairs reach each other over SYS (NODE would be the
//     same-socket case, which these boxes do not have); a 2-GPU box is one PIX pair.
//   - any 1-GPU node: a single GPU, no links.
//
// Every node carries its topology as the lockstep.dev/gpu-topology annotation
// ((*gpu.Topology).Annotation), which is what lockstep reads first.

// topologyRules is the list above, for the printed output.
var topologyRules = []string{
	"V100M16/V100M32, 8 GPUs: DGX-1 V100 hybrid cube mesh (gpu.FromNode, labels nvidia.com/gpu.product=Tesla-V100-SXM2-16GB|32GB, nvidia.com/gpu.count=8)",
	"G2, 8 GPUs (anonymised): two NVLink quads {0-3},{4-7}, NV2 inside each, SYS across (NUMA 0 / 1)",
	"G3, 8 GPUs: NVSwitch, every pair NV12",
	"V100M16/V100M32, 4 GPUs: every pair NV2",
	"T4/P100/A10: PCIe pairs {0,1},{2,3} PIX; 4-GPU boxes one pair per socket, SYS across; 2-GPU: one PIX pair",
	"1-GPU nodes: a single GPU",
	"each node carries it as the lockstep.dev/gpu-topology annotation; allocatable: trace cpu/memory, pods 110, nvidia.com/gpu",
}

type topoKey struct {
	model string
	gpus  int
}

// topologies builds each model's topology once; nodes of one model share it.
type topologies map[topoKey]*gpu.Topology

func (ts topologies) get(model string, n int) (*gpu.Topology, error) {
	k := topoKey{model, n}
	if t, ok := ts[k]; ok {
		return t, nil
	}
	t, err := buildTopology(model, n)
	if err != nil {
		return nil, fmt.Errorf("model %s with %d GPUs: %w", model, n, err)
	}
	ts[k] = t
	return t, nil
}

func buildTopology(model string, n int) (*gpu.Topology, error) {
	switch {
	case n == 1:
		return gpu.Uniform(1, gpu.LinkSYS)
	case (model == "V100M16" || model == "V100M32") && n == 8:
		product := "Tesla-V100-SXM2-16GB"
		if model == "V100M32" {
			product = "Tesla-V100-SXM2-32GB"
		}
		probe := &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: "probe", Labels: map[string]string{
			gpu.LabelGPUProduct: product, gpu.LabelGPUCount: "8",
		}}}
		t, src, err := gpu.FromNode(probe)
		if err != nil {
			return nil, err
		}
		if src != gpu.SourceKnownSystem || t == nil {
			return nil, fmt.Errorf("gpu.FromNode gave source %v for %s x8, want known-system", src, product)
		}
		return t, nil
	case (model == "V100M16" || model == "V100M32") && n == 4:
		return gpu.Uniform(4, gpu.NVLink(2))
	case model == "G2" && n == 8:
		return twoQuads()
	case model == "G3" && n == 8:
		return gpu.Uniform(8, gpu.NVLink(12))
	case (model == "T4" || model == "P100" || model == "A10") && (n == 2 || n == 4):
		return pcieBox(n)
	}
	return nil, fmt.Errorf("no topology rule")
}

// twoQuads is the G2 wiring: NVLink quads {0-3} and {4-7} (NV2 inside), SYS between them.
func twoQuads() (*gpu.Topology, error) {
	gpus := make([]gpu.GPU, 8)
	links := make([][]gpu.Link, 8)
	for i := range 8 {
		gpus[i] = gpu.GPU{Index: i, NUMA: i / 4}
		links[i] = make([]gpu.Link, 8)
		for j := range 8 {
			switch {
			case i == j:
				links[i][j] = gpu.LinkSelf
			case i/4 == j/4:
				links[i][j] = gpu.NVLink(2)
			default:
				links[i][j] = gpu.LinkSYS
			}
		}
	}
	return gpu.New(gpus, links)
}

// pcieBox is a PCIe GPU server: pairs {0,1}, {2,3} behind one switch each (PIX), one pair per
// socket, SYS between pairs.
func pcieBox(n int) (*gpu.Topology, error) {
	gpus := make([]gpu.GPU, n)
	links := make([][]gpu.Link, n)
	for i := range n {
		gpus[i] = gpu.GPU{Index: i, NUMA: i / 2}
		links[i] = make([]gpu.Link, n)
		for j := range n {
			switch {
			case i == j:
				links[i][j] = gpu.LinkSelf
			case i/2 == j/2:
				links[i][j] = gpu.LinkPIX
			default:
				links[i][j] = gpu.LinkSYS
			}
		}
	}
	return gpu.New(gpus, links)
}

// nodeObject is the Node lockstep sees for a trace node.
func nodeObject(n traceNode, t *gpu.Topology) *corev1.Node {
	alloc := corev1.ResourceList{
		corev1.ResourceCPU:    *resource.NewMilliQuantity(n.cpuMilli, resource.DecimalSI),
		corev1.ResourceMemory: *resource.NewQuantity(n.memMiB<<20, resource.BinarySI),
		corev1.ResourcePods:   *resource.NewQuantity(110, resource.DecimalSI),
		wellknown.ResourceGPU: *resource.NewQuantity(int64(n.gpus), resource.DecimalSI),
	}
	return &corev1.Node{
		ObjectMeta: metav1.ObjectMeta{
			Name:        n.name,
			UID:         types.UID("uid-node-" + n.name),
			Labels:      map[string]string{"openb/model": n.model, "openb/gpus": strconv.Itoa(n.gpus)},
			Annotations: map[string]string{wellknown.AnnotationGPUTopology: t.Annotation("openb-" + n.model)},
		},
		Status: corev1.NodeStatus{
			Capacity:    alloc.DeepCopy(),
			Allocatable: alloc,
			Conditions:  []corev1.NodeCondition{{Type: corev1.NodeReady, Status: corev1.ConditionTrue}},
		},
	}
}

// nvlinkCapable reports whether the idle node has k GPUs that are pairwise NVLink-connected.
func nvlinkCapable(t *gpu.Topology, k int) bool {
	if k < 2 || k > t.Len() {
		return false
	}
	_, q, ok := t.BestSet(t.Indices(), k)
	return ok && q.WeakestLink.IsNVLink()
}

// allNVLink reports whether every pair of set is NVLink-connected on t.
func allNVLink(t *gpu.Topology, set []int) bool {
	for i, a := range set {
		for _, b := range set[i+1:] {
			l, ok := t.Link(a, b)
			if !ok || !l.IsNVLink() {
				return false
			}
		}
	}
	return true
}
