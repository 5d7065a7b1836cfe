package gang

// Nominations tell kube-scheduler where lockstep holds a place for a gang member that has not had
// its scheduling cycle yet, through the pod's status.nominatedNodeName (writable by components
// other than the scheduler since 1.35, KEP-5278). The scheduler then tries that one node first
// and, when it passes, filters and scores no other: a member whose place is already decided costs
// one node instead of the whole cluster. Pods nominated to a node also count there when the
// scheduler filters other pods of equal or lower priority, as lockstep's reservation does.
//
// What is decided here: which members get a nomination (the planned members of a reservation
// that fits without evicting anything) and when it is withdrawn (the reservation ends without
// binding them, or another member takes the place). Writing is a Nominator's job.

// Nominator writes nominations. Nominate must not block: the manager calls it under its lock.
type Nominator interface {
	Nominate(ns []Nomination)
}

// Nomination asks that pod Namespace/Name's status.nominatedNodeName be Node. An empty Node
// withdraws a nomination: the field is cleared if it still names Was, so that a nomination the
// scheduler made since is left alone.
type Nomination struct {
	Namespace, Name string
	Node, Was       string
}

// nominateLocked hands the Nominator, if there is one, the nominations of a new reservation:
// every planned slot's member goes to the slot's node. The first slot is the member at filter, in
// its cycle already.
func (m *Manager) nominateLocked(r *reservation) {
	if m.cfg.Nominator == nil {
		return
	}
	var out []Nomination
	for _, s := range r.slots {
		q := m.ledger.pods[s.plannedFor]
		if s.state != slotPlanned || q == nil {
			continue
		}
		s.nominated = s.node
		out = append(out, Nomination{Namespace: q.namespace, Name: q.name, Node: s.node})
	}
	m.cfg.Nominator.Nominate(out)
}

// withdrawLocked takes back the standing nominations of slots: each was written for the member
// the slot was planned for. A member gone from the ledger needs none taken back.
func (m *Manager) withdrawLocked(slots ...*slot) {
	var out []Nomination
	for _, s := range slots {
		if s.nominated == "" {
			continue
		}
		if q := m.ledger.pods[s.plannedFor]; q != nil {
			out = append(out, Nomination{Namespace: q.namespace, Name: q.name, Was: s.nominated})
		}
		s.nominated = ""
	}
	if len(out) > 0 && m.cfg.Nominator != nil {
		m.cfg.Nominator.Nominate(out)
	}
}

// withdrawReleasedLocked takes back the nominations of a reservation whose members will not bind
// through it. A bound member's is left alone: it named the node the member bound to, and
// kube-apiserver clears it at binding (ClearingNominatedNodeNameAfterBinding).
func (m *Manager) withdrawReleasedLocked(r *reservation) {
	for _, s := range r.slots {
		if s.state != slotBound {
			m.withdrawLocked(s)
		}
	}
}
