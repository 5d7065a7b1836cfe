package gang

import (
	"sort"

	"github.com/lockstep-sched/lockstep/views"
)

// Nodes lists the nodes lockstep has seen, and those ResourceSlices name that do not exist,
// sorted by name; onlyProblems keeps those with something wrong: an invalid topology annotation,
// a DRA pool being updated, slices of a node that is not there.
func (m *Manager) Nodes(onlyProblems bool) []views.NodeStatus {
	m.mu.RLock()
	defer m.mu.RUnlock()
	l := m.ledger
	out := []views.NodeStatus{}
	for _, name := range l.devices.Nodes() {
		if n := l.nodes[name]; n == nil || !n.known {
			out = append(out, views.NodeStatus{Name: name, TopologySource: "none", Problems: []string{
				"ResourceSlices publish devices of node " + name + ", which does not exist: they count nowhere"}})
		}
	}
	for _, n := range l.nodes {
		if !n.known {
			continue
		}
		st := views.NodeStatus{Name: n.name, Unschedulable: n.unschedulable, GPUs: n.allocatable.GPU,
			GPUsFree: max(n.free().GPU, 0), TopologySource: n.topoSource.String(), DRA: l.draPools(n.name)}
		if n.topoErr != nil {
			st.TopologyError = n.topoErr.Error()
		}
		if g := l.devices.Node(n.name); g != nil {
			st.Problems = g.Problems
		}
		if onlyProblems && st.TopologyError == "" && len(st.Problems) == 0 {
			continue
		}
		out = append(out, st)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Name < out[j].Name })
	return out
}
