package gpu

import (
	"fmt"
	"strconv"
	"strings"
	"sync"

	corev1 "k8s.io/api/core/v1"

	"github.com/lockstep-sched/lockstep/wellknown"
)

// GPU Feature Discovery labels FromNode falls back on.
const (
	LabelGPUProduct = "nvidia.com/gpu.product"
	LabelGPUCount   = "nvidia.com/gpu.count"
	// LabelGPUClique names the multi-node NVLink domain (a GB200 NVL72 partition) of a node's
	// GPUs: <cluster UUID>.<clique id>.
	LabelGPUClique = "nvidia.com/gpu.clique"
)

// Source says where FromNode found a node's topology, for display.
type Source int

const (
	// SourceNone: the node has no GPUs lockstep can model; the Topology is nil.
	SourceNone Source = iota
	// SourceAnnotation: wellknown.AnnotationGPUTopology, written by an administrator or a tool
	// other than gpu-agent.
	SourceAnnotation
	// SourceNvidiaSMI: wellknown.AnnotationGPUTopology as gpu-agent writes it, from `nvidia-smi
	// topo -m`.
	SourceNvidiaSMI
	// SourceKnownSystem: the GFD product and count labels matched the table of known systems.
	SourceKnownSystem
	// SourceUniform: nothing known about the wiring; every pair is assumed SYS, sized by the
	// node's allocatable nvidia.com/gpu, so that best-fit packing still applies.
	SourceUniform
	// SourceDRA: the node's GPUs are the devices its ResourceSlices publish (FromDevices).
	SourceDRA
)

func (s Source) String() string {
	switch s {
	case SourceNone:
		return "none"
	case SourceAnnotation:
		return "annotation"
	case SourceNvidiaSMI:
		return "nvidia-smi"
	case SourceKnownSystem:
		return "known-system"
	case SourceUniform:
		return "uniform"
	case SourceDRA:
		return "dra"
	}
	return "Source(" + strconv.Itoa(int(s)) + ")"
}

// FromNode works out a node's GPU topology from, in order: the wellknown.AnnotationGPUTopology
// annotation (written by gpu-agent, or by hand); the GPU Feature Discovery labels LabelGPUProduct
// and LabelGPUCount looked up in the table of known systems (docs/gpu-topology.md); a uniform
// topology sized by the node's allocatable nvidia.com/gpu. A node without GPUs yields (nil,
// SourceNone, nil).
//
// err is non-nil only when the annotation is present but invalid. FromNode then still returns
// the topology from the remaining sources, so the caller can report the error and carry on with
// what FromNode returned.
func FromNode(node *corev1.Node) (*Topology, Source, error) {
	var annErr error
	if value, ok := node.Annotations[wellknown.AnnotationGPUTopology]; ok {
		t, source, err := parseAnnotationCached(value)
		if err == nil {
			if source == AnnotationSourceNvidiaSMI {
				return t, SourceNvidiaSMI, nil
			}
			return t, SourceAnnotation, nil
		}
		annErr = fmt.Errorf("node %s: %w", node.Name, err)
	}
	if t := knownSystemTopology(node.Labels[LabelGPUProduct], node.Labels[LabelGPUCount]); t != nil {
		return t, SourceKnownSystem, annErr
	}
	q, ok := node.Status.Allocatable[wellknown.ResourceGPU]
	if n := q.Value(); ok && n > 0 && n <= MaxGPUs {
		return uniformSYS(int(n)), SourceUniform, annErr
	}
	return nil, SourceNone, annErr
}

// parsedAnnotations caches ParseAnnotation by annotation value. A cluster has a handful of
// distinct topologies, each on many nodes, so this makes FromNode cheap in the scheduler's hot
// path and lets identical nodes share one Topology, and with it Score's idle-node cache. The
// cache is emptied when full, which bounds it without bookkeeping.
var parsedAnnotations struct {
	sync.Mutex
	m map[string]parsedAnnotation
}

const parsedAnnotationsMax = 256

type parsedAnnotation struct {
	t      *Topology
	source string
	err    error
}

func parseAnnotationCached(value string) (*Topology, string, error) {
	parsedAnnotations.Lock()
	p, ok := parsedAnnotations.m[value]
	parsedAnnotations.Unlock()
	if ok {
		return p.t, p.source, p.err
	}
	p.t, p.source, p.err = ParseAnnotation(value)
	parsedAnnotations.Lock()
	defer parsedAnnotations.Unlock()
	if parsedAnnotations.m == nil || len(parsedAnnotations.m) >= parsedAnnotationsMax {
		parsedAnnotations.m = make(map[string]parsedAnnotation)
	}
	if prev, ok := parsedAnnotations.m[value]; ok {
		return prev.t, prev.source, prev.err // parsed concurrently; keep the first
	}
	parsedAnnotations.m[value] = p
	return p.t, p.source, p.err
}

// Fallback topologies are shared between nodes, so that the idle-node yardstick Score caches
// in them is computed once per shape rather than once per node.
var uniformSYSCache sync.Map // int -> *Topology

func uniformSYS(n int) *Topology {
	if t, ok := uniformSYSCache.Load(n); ok {
		return t.(*Topology)
	}
	t, err := Uniform(n, LinkSYS)
	if err != nil {
		panic(fmt.Sprintf("gpu: uniform topology of %d GPUs: %v", n, err)) // n was checked
	}
	actual, _ := uniformSYSCache.LoadOrStore(n, t)
	return actual.(*Topology)
}

// knownSystem is one row of the table of systems whose topology follows from the GPU product
// and count alone. Keep docs/gpu-topology.md in step with this table.
type knownSystem struct {
	family string // product family token: "A100", "H100", ...
	form   string // required form-factor token ("SXM4"), or "" when the family implies it
	count  int
	topo   func() *Topology
}

var knownSystems = []knownSystem{
	// HGX/DGX A100 8-GPU: six NVSwitches, twelve NVLink 3 links from every GPU to every other.
	{family: "A100", form: "SXM4", count: 8, topo: shared(uniformNV(8, 12))},
	// A800: the export variant of A100 with 8 NVLinks per GPU.
	{family: "A800", form: "SXM4", count: 8, topo: shared(uniformNV(8, 8))},
	// HGX/DGX H100 and H200: NVSwitch, 18 NVLink 4 links per GPU.
	{family: "H100", count: 8, topo: shared(uniformNV(8, 18))},
	{family: "H200", count: 8, topo: shared(uniformNV(8, 18))},
	// H800: the export variant of H100 with 8 NVLinks per GPU.
	{family: "H800", count: 8, topo: shared(uniformNV(8, 8))},
	// HGX/DGX B200: NVSwitch, 18 NVLink 5 links per GPU.
	{family: "B200", count: 8, topo: shared(uniformNV(8, 18))},
	// GB200 NVL72 compute tray: four GPUs on the rack's NVLink switch, 18 links each.
	{family: "GB200", count: 4, topo: shared(uniformNV(4, 18))},
	// DGX-1 / HGX-1 with V100: hybrid cube mesh, six NVLink 2 links per GPU.
	{family: "V100", form: "SXM2", count: 8, topo: shared(dgx1V100)},
	// DGX-2 / HGX-2: sixteen V100 SXM3 on NVSwitch, six links per GPU.
	{family: "V100", form: "SXM3", count: 16, topo: shared(uniformNV(16, 6))},
	// DGX-1 with P100: the same cube mesh with one NVLink 1 link per edge.
	{family: "P100", form: "SXM2", count: 8, topo: shared(dgx1P100)},
}

// knownSystemTopology matches GFD labels against knownSystems. GFD's product label is the
// nvidia-smi product name with spaces turned into dashes ("NVIDIA-A100-SXM4-80GB",
// "NVIDIA-H100-80GB-HBM3", "Tesla-V100-SXM2-32GB"). PCIe and NVL cards (bridged pairs, not
// all-to-all) never match, nor do MIG or shared (time-sliced) products, whose nvidia.com/gpu
// units are not whole GPUs.
func knownSystemTopology(product, count string) *Topology {
	tokens := strings.Split(strings.ToUpper(product), "-")
	if len(tokens) > 0 && (tokens[0] == "NVIDIA" || tokens[0] == "TESLA") {
		tokens = tokens[1:]
	}
	if len(tokens) == 0 {
		return nil
	}
	for _, tok := range tokens {
		switch tok {
		case "PCIE", "NVL", "MIG", "SHARED":
			return nil
		}
	}
	n, err := strconv.Atoi(count)
	if err != nil {
		return nil
	}
	for _, s := range knownSystems {
		if tokens[0] != s.family || n != s.count || s.form != "" && !containsToken(tokens[1:], s.form) {
			continue
		}
		return s.topo()
	}
	return nil
}

func containsToken(tokens []string, want string) bool {
	for _, t := range tokens {
		if t == want {
			return true
		}
	}
	return false
}

// shared builds a table topology on first use and hands out the same one afterwards. The
// builders are fixed data, so an error is a bug in this file.
func shared(build func() (*Topology, error)) func() *Topology {
	return sync.OnceValue(func() *Topology {
		t, err := build()
		if err != nil {
			panic(fmt.Sprintf("gpu: known-system topology: %v", err))
		}
		return t
	})
}

func uniformNV(n, links int) func() (*Topology, error) {
	return func() (*Topology, error) { return Uniform(n, NVLink(links)) }
}

// dgx1Mesh builds the DGX-1 hybrid cube mesh: GPUs 0-3 and 4-7 are fully connected quads and
// GPU i is also linked to GPU i+4; the other cross pairs go through the CPUs (SYS).
func dgx1Mesh(quad [4][4]Link, cross [4]Link) (*Topology, error) {
	return newFromFunc(8, func(a, b int) Link {
		switch {
		case a/4 == b/4:
			return quad[a%4][b%4]
		case b == a+4:
			return cross[a]
		}
		return LinkSYS
	})
}

func dgx1V100() (*Topology, error) {
	nv1, nv2 := NVLink(1), NVLink(2)
	return dgx1Mesh([4][4]Link{
		{LinkSelf, nv1, nv1, nv2},
		{nv1, LinkSelf, nv2, nv1},
		{nv1, nv2, LinkSelf, nv2},
		{nv2, nv1, nv2, LinkSelf},
	}, [4]Link{nv2, nv2, nv1, nv1})
}

func dgx1P100() (*Topology, error) {
	nv1 := NVLink(1)
	return dgx1Mesh([4][4]Link{
		{LinkSelf, nv1, nv1, nv1},
		{nv1, LinkSelf, nv1, nv1},
		{nv1, nv1, LinkSelf, nv1},
		{nv1, nv1, nv1, LinkSelf},
	}, [4]Link{nv1, nv1, nv1, nv1})
}
