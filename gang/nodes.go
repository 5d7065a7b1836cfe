package gang

import (
	"sort"

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
