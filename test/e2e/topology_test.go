package e2e

import (
	"encoding/json"
	"fmt"
	"net/http"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/lockstep-sched/lockstep/gang"
	"github.com/lockstep-sched/lockstep/gpu"
	"github.com/lockstep-sched/lockstep/test/lib/cluster"
	"github.com/lockstep-sched/lockstep/views"
	"github.com/lockstep-sched/lockstep/wellknown"
)

// A gang of 4 x 2 GPUs lands whole on one free 8-GPU node (not spread over the small nodes, where
// it would also fit), and lockstep writes each member's GPUs: disjoint, within the node, each pair
// NVLink-connected on a DGX-1 whose topology is given by annotation.
func TestGangLandsOnOneNodeWithNVLinkPairs(t *testing.T) {
	dgx1 := dgx1Topology(t)
	annotated := map[string]string{wellknown.AnnotationGPUTopology: dgx1.Annotation("e2e")}
	s := newScenarioWithNodes(t,
		cluster.NodeSpec{Name: "small-0", GPUs: 2},
		cluster.NodeSpec{Name: "small-1", GPUs: 2},
		cluster.NodeSpec{Name: "small-2", GPUs: 2},
		cluster.NodeSpec{Name: "small-3", GPUs: 2},
		cluster.NodeSpec{Name: "dgx-0", GPUs: 8, Annotations: annotated},
		cluster.NodeSpec{Name: "dgx-1", GPUs: 8, Annotations: annotated},
	)
	for i := range 4 {
		s.create(podSpec{name: fmt.Sprintf("ring-%d", i), gpus: 2, gang: "ring", minAvailable: 4}.pod())
	}
	s.eventually(60*time.Second, "the gang bound", func() bool { return s.boundIn("ring") == 4 })
	s.binds.assertNeverPartial(t, "ring", 4)

	nodes := map[string]bool{}
	var all []int
	for _, p := range s.pods() {
		nodes[p.Spec.NodeName] = true
		ids, err := gang.ParseGPUIDs(p.Annotations[wellknown.AnnotationGPUIDs], 2)
		require.NoError(t, err, "pod %s: %s=%q", p.Name, wellknown.AnnotationGPUIDs, p.Annotations[wellknown.AnnotationGPUIDs])
		link, _ := dgx1.Link(ids[0], ids[1])
		require.True(t, link.IsNVLink(), "pod %s got GPUs %v linked by %s", p.Name, ids, link)
		all = append(all, ids...)
	}
	require.Len(t, nodes, 1, "the gang is packed onto one node: %v", nodes)
	for n := range nodes {
		require.True(t, strings.HasSuffix(n, "dgx-0") || strings.HasSuffix(n, "dgx-1"), "packed onto an 8-GPU node, got %s", n)
	}
	sort.Ints(all)
	require.Equal(t, []int{0, 1, 2, 3, 4, 5, 6, 7}, all, "disjoint GPU sets covering the node's 8 GPUs")

	// An ordinary 4-GPU pod on the other DGX-1 gets one NVLink quad.
	s.create(podSpec{name: "quad", gpus: 4}.pod())
	s.eventually(60*time.Second, "the 4-GPU pod bound", func() bool { return s.boundIn("quad") == 1 })
	var quad corev1.Pod
	for _, p := range s.pods() {
		if p.Name == "quad" {
			quad = p
		}
	}
	require.False(t, nodes[quad.Spec.NodeName], "the other DGX-1 is the only node with 4 free GPUs")
	ids, err := gang.ParseGPUIDs(quad.Annotations[wellknown.AnnotationGPUIDs], 4)
	require.NoError(t, err)
	for _, a := range ids {
		for _, b := range ids {
			if a != b {
				link, _ := dgx1.Link(a, b)
				require.True(t, link.IsNVLink(), "quad %v: %d-%d is %s", ids, a, b, link)
			}
		}
	}
	g := s.gangs()["ring"]
	for _, m := range g.Members {
		require.Len(t, m.GPUIDs, 2, "/debug/gangs shows %s's GPUs", m.Pod)
	}
}

// dgx1Topology is the DGX-1 V100 hybrid cube mesh, as the gpu package's known-systems table has it.
func dgx1Topology(t *testing.T) *gpu.Topology {
	t.Helper()
	topo, source, err := gpu.FromNode(&corev1.Node{
		ObjectMeta: metav1.ObjectMeta{Labels: map[string]string{gpu.LabelGPUProduct: "Tesla-V100-SXM2-16GB", gpu.LabelGPUCount: "8"}},
	})
	require.NoError(t, err)
	require.Equal(t, gpu.SourceKnownSystem, source)
	return topo
}

// A node whose topology annotation does not parse is named, with what is wrong, in
// /debug/nodes?problems=true and in a Warning Event on the Node, and still takes GPU pods with the
// fallback topology.
func TestInvalidTopologyAnnotationIsReported(t *testing.T) {
	s := newScenarioWithNodes(t,
		cluster.NodeSpec{Name: "garbled", GPUs: 4, Annotations: map[string]string{wellknown.AnnotationGPUTopology: "{not json"}})
	node := s.nodes[0]
	var problem views.NodeStatus
	s.eventually(30*time.Second, "/debug/nodes to report the node", func() bool {
		resp, err := http.Get(env.lockstep.DebugURL + "/debug/nodes?problems=true")
		if err != nil {
			return false
		}
		defer resp.Body.Close()
		var list []views.NodeStatus
		if json.NewDecoder(resp.Body).Decode(&list) != nil {
			return false
		}
		for _, n := range list {
			if n.Name == node {
				problem = n
				return true
			}
		}
		return false
	})
	require.Contains(t, problem.TopologyError, "node "+node)
	require.Equal(t, "uniform", problem.TopologySource)
	s.eventually(30*time.Second, "a GPUTopologyInvalid event on the Node", func() bool {
		list, err := env.client.CoreV1().Events(metav1.NamespaceDefault).List(s.ctx, metav1.ListOptions{
			FieldSelector: "involvedObject.kind=Node,involvedObject.name=" + node + ",reason=" + wellknown.ReasonGPUTopologyInvalid,
		})
		return err == nil && len(list.Items) > 0 && strings.Contains(list.Items[0].Message, wellknown.AnnotationGPUTopology)
	})
	s.create(podSpec{name: "uses-it", gpus: 2}.pod())
	s.eventually(60*time.Second, "a GPU pod bound on the node anyway", func() bool { return s.boundIn("uses-it") == 1 })
}
