package gang

import (
	"fmt"
	"sort"

	corev1 "k8s.io/api/core/v1"

	"github.com/lockstep-sched/lockstep/wellknown"
)

// NodeStatus is one node as /debug/nodes shows it: what lockstep counts there and where its GPU
// topology came from.
type NodeStatus struct {
	Name          string `json:"name"`
	Unschedulable bool   `json:"unschedulable,omitempty"`
	GPUs          int64  `json:"gpus"`
	GPUsFree      int64  `json:"gpusFree"`
	// TopologySource is where the GPU topology came from (see package gpu): annotation,
	// nvidia-smi, known-system, uniform or none.
	TopologySource string `json:"topologySource"`
	// TopologyError says what is wrong with the node's topology annotation; lockstep then uses
	// TopologySource instead.
	TopologyError string `json:"topologyError,omitempty"`
}

// Nodes lists the nodes lockstep has seen, sorted by name; onlyProblems keeps those whose topology
// annotation is invalid.
func (m *Manager) Nodes(onlyProblems bool) []NodeStatus {
	m.mu.RLock()
	defer m.mu.RUnlock()
	out := []NodeStatus{}
	for _, n := range m.ledger.nodes {
		if !n.known || (onlyProblems && n.topoErr == nil) {
			continue
		}
		st := NodeStatus{Name: n.name, Unschedulable: n.unschedulable, GPUs: n.allocatable.GPU,
			GPUsFree: max(n.free().GPU, 0), TopologySource: n.topoSource.String()}
		if n.topoErr != nil {
			st.TopologyError = n.topoErr.Error()
		}
		out = append(out, st)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Name < out[j].Name })
	return out
}

// reportTopologyLocked writes an Event on the node when its topology annotation became invalid or
// its error changed: once per error, not on every informer update of the node.
func (m *Manager) reportTopologyLocked(node *corev1.Node, before error, fx *effects) {
	n := m.ledger.nodes[node.Name]
	if n == nil || n.topoErr == nil || (before != nil && before.Error() == n.topoErr.Error()) {
		return
	}
	ref := &corev1.ObjectReference{Kind: "Node", APIVersion: "v1", Name: node.Name, UID: node.UID}
	fx.nodeEvent(ref, corev1.EventTypeWarning, wellknown.ReasonGPUTopologyInvalid, fmt.Sprintf(
		"annotation %s is not usable: %v; lockstep uses the %s topology instead", wellknown.AnnotationGPUTopology, n.topoErr, n.topoSource))
}
