package gpu

import (
	"sync"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/lockstep-sched/lockstep/wellknown"
)

func gpuNode(annotations, labels map[string]string, allocatable int64) *corev1.Node {
	node := &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: "gpu-1", Annotations: annotations, Labels: labels}}
	if allocatable >= 0 {
		node.Status.Allocatable = corev1.ResourceList{wellknown.ResourceGPU: *resource.NewQuantity(allocatable, resource.DecimalSI)}
	}
	return node
}

func gfd(product, count string) map[string]string {
	return map[string]string{LabelGPUProduct: product, LabelGPUCount: count, "nvidia.com/gpu.present": "true"}
}

func TestFromNodeConcurrent(t *testing.T) {
	// The scheduler calls FromNode from many goroutines; run under -race.
	ann := map[string]string{wellknown.AnnotationGPUTopology: loadFixture(t, "h100-nv18.txt").Annotation("")}
	var wg sync.WaitGroup
	for range 16 {
		wg.Go(func() {
			topo, _, err := FromNode(gpuNode(ann, nil, 8))
			assert.NoError(t, err)
			assert.Equal(t, 5, topo.Score(topo.Indices(), 2))
		})
	}
	wg.Wait()
}

func TestFromNode(t *testing.T) {
	a100 := loadFixture(t, "a100-nvswitch.txt")
	dgx1 := loadFixture(t, "dgx1-v100.txt")
	fromAgent := map[string]string{wellknown.AnnotationGPUTopology: a100.Annotation(AnnotationSourceNvidiaSMI)}
	byHand := map[string]string{wellknown.AnnotationGPUTopology: dgx1.Annotation("")}
	broken := map[string]string{wellknown.AnnotationGPUTopology: `{"version":"v0"}`}

	tests := []struct {
		name        string
		node        *corev1.Node
		source      Source
		want        *Topology // nil: only check n and link
		n           int
		link        Link // between GPU 0 and GPU 1
		errContains string
	}{
		{"annotation from gpu-agent", gpuNode(fromAgent, gfd("NVIDIA-H100-80GB-HBM3", "8"), 8), SourceNvidiaSMI, a100, 8, NVLink(12), ""},
		{"annotation by hand", gpuNode(byHand, nil, 8), SourceAnnotation, dgx1, 8, NVLink(1), ""},
		{"annotation wins over allocatable", gpuNode(fromAgent, nil, 4), SourceNvidiaSMI, a100, 8, NVLink(12), ""},
		{"invalid annotation falls back to GFD", gpuNode(broken, gfd("NVIDIA-A100-SXM4-80GB", "8"), 8), SourceKnownSystem, nil, 8, NVLink(12), `node gpu-1: gpu topology annotation: unsupported version "v0"`},
		{"invalid annotation falls back to uniform", gpuNode(broken, nil, 2), SourceUniform, nil, 2, LinkSYS, "unsupported version"},
		{"invalid annotation, no GPUs", gpuNode(broken, nil, -1), SourceNone, nil, 0, 0, "unsupported version"},
		{"HGX A100", gpuNode(nil, gfd("NVIDIA-A100-SXM4-80GB", "8"), 8), SourceKnownSystem, nil, 8, NVLink(12), ""},
		{"HGX A100 40GB, pre-NVIDIA-prefix name", gpuNode(nil, gfd("A100-SXM4-40GB", "8"), 8), SourceKnownSystem, nil, 8, NVLink(12), ""},
		{"H100 SXM", gpuNode(nil, gfd("NVIDIA-H100-80GB-HBM3", "8"), 8), SourceKnownSystem, nil, 8, NVLink(18), ""},
		{"H200", gpuNode(nil, gfd("NVIDIA-H200", "8"), 8), SourceKnownSystem, nil, 8, NVLink(18), ""},
		{"B200", gpuNode(nil, gfd("NVIDIA-B200", "8"), 8), SourceKnownSystem, nil, 8, NVLink(18), ""},
		{"DGX-1 V100", gpuNode(nil, gfd("Tesla-V100-SXM2-32GB", "8"), 8), SourceKnownSystem, dgx1, 8, NVLink(1), ""},
		{"DGX-2", gpuNode(nil, gfd("Tesla-V100-SXM3-32GB", "16"), 16), SourceKnownSystem, nil, 16, NVLink(6), ""},
		{"H100 PCIe is not NVSwitch", gpuNode(nil, gfd("NVIDIA-H100-PCIe", "8"), 8), SourceUniform, nil, 8, LinkSYS, ""},
		{"H100 NVL is bridged pairs", gpuNode(nil, gfd("NVIDIA-H100-NVL", "8"), 8), SourceUniform, nil, 8, LinkSYS, ""},
		{"A100 PCIe", gpuNode(nil, gfd("NVIDIA-A100-PCIE-40GB", "8"), 8), SourceUniform, nil, 8, LinkSYS, ""},
		{"MIG slices are not GPUs", gpuNode(nil, gfd("NVIDIA-A100-SXM4-40GB-MIG-1g.5gb", "8"), 56), SourceUniform, nil, 56, LinkSYS, ""},
		{"time-sliced", gpuNode(nil, gfd("NVIDIA-A100-SXM4-40GB-SHARED", "8"), 32), SourceUniform, nil, 32, LinkSYS, ""},
		{"count not in the table", gpuNode(nil, gfd("NVIDIA-H100-80GB-HBM3", "4"), 4), SourceUniform, nil, 4, LinkSYS, ""},
		{"count missing", gpuNode(nil, map[string]string{LabelGPUProduct: "NVIDIA-H100-80GB-HBM3"}, 8), SourceUniform, nil, 8, LinkSYS, ""},
		{"unknown product", gpuNode(nil, gfd("NVIDIA-L40S", "4"), 4), SourceUniform, nil, 4, LinkSYS, ""},
		{"no GPUs allocatable", gpuNode(nil, nil, 0), SourceNone, nil, 0, 0, ""},
		{"no GPU resource", gpuNode(nil, nil, -1), SourceNone, nil, 0, 0, ""},
		{"more GPUs than modelled", gpuNode(nil, nil, MaxGPUs+1), SourceNone, nil, 0, 0, ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			topo, source, err := FromNode(tt.node)
			if tt.errContains != "" {
				require.Error(t, err)
				assert.Contains(t, err.Error(), tt.errContains)
			} else {
				require.NoError(t, err)
			}
			assert.Equal(t, tt.source, source)
			if tt.n == 0 {
				assert.Nil(t, topo)
				return
			}
			require.NotNil(t, topo)
			assert.Equal(t, tt.n, topo.Len())
			if tt.want != nil {
				assert.True(t, tt.want.Equal(topo), "got %s", topo.Annotation(""))
			}
			l, ok := topo.Link(0, 1)
			require.True(t, ok)
			assert.Equal(t, tt.link, l)
		})
	}
}

func TestFromNodeSharesFallbacks(t *testing.T) {
	// Fallback topologies are built once, so Score's idle-node cache is too.
	a, _, _ := FromNode(gpuNode(nil, gfd("NVIDIA-H100-80GB-HBM3", "8"), 8))
	b, _, _ := FromNode(gpuNode(nil, gfd("NVIDIA-H100-80GB-HBM3", "8"), 8))
	assert.Same(t, a, b)
	c, _, _ := FromNode(gpuNode(nil, nil, 3))
	d, _, _ := FromNode(gpuNode(nil, nil, 3))
	assert.Same(t, c, d)

	// So are topologies parsed from equal annotations.
	ann := map[string]string{wellknown.AnnotationGPUTopology: loadFixture(t, "pcie-8gpu.txt").Annotation("test")}
	e, _, err := FromNode(gpuNode(ann, nil, 8))
	require.NoError(t, err)
	f, _, _ := FromNode(gpuNode(ann, nil, 8))
	assert.Same(t, e, f)
}

func TestParseAnnotationCacheIsBounded(t *testing.T) {
	for i := range 2*parsedAnnotationsMax + 1 {
		topo, err := New([]GPU{{Index: i, NUMA: NUMAUnknown}}, [][]Link{{LinkSelf}})
		require.NoError(t, err)
		got, _, err := parseAnnotationCached(topo.Annotation(""))
		require.NoError(t, err)
		require.True(t, topo.Equal(got))
	}
	parsedAnnotations.Lock()
	defer parsedAnnotations.Unlock()
	assert.LessOrEqual(t, len(parsedAnnotations.m), parsedAnnotationsMax)
}

func TestKnownSystemsBuild(t *testing.T) {
	for _, s := range knownSystems {
		topo := s.topo()
		assert.Equal(t, s.count, topo.Len(), "%s %s", s.family, s.form)
		assert.Len(t, topo.Islands(), 1, "%s %s: every known system is one NVLink domain", s.family, s.form)
	}
}

func TestSourceString(t *testing.T) {
	for s, want := range map[Source]string{
		SourceNone: "none", SourceAnnotation: "annotation", SourceNvidiaSMI: "nvidia-smi",
		SourceKnownSystem: "known-system", SourceUniform: "uniform", Source(42): "Source(42)",
	} {
		assert.Equal(t, want, s.String())
	}
}
