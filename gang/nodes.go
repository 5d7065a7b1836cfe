package gang

import (
	"fmt"
	"sort"

	corev1 "k8s.io/api/core/v1"

	"github.com/lockstep-sched/lockstep/wellknown"

	"github.com/lockstep-sched/lockstep/views"
)

// Nodes lists the nodes lockstep has seen, sorted by name; onlyProblems keeps those whose topology
// annotation is invalid.
func (m *Manager) Nodes(onlyProblems bool) []views.NodeStatus {
	m.mu.RLock()
	defer m.mu.RUnlock()
	out := []views.NodeStatus{}
	for _, n := range m.ledger.nodes {
		if !n.known || (onlyProblems && n.topoErr == nil) {
			continue
		}
		st := views.NodeStatus{Name: n.name, Unschedulable: n.unschedulable, GPUs: n.allocatable.GPU,
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
