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

// nominee is the member a slot's nomination was written for.
type nominee struct {
	namespace, name string
	// node is the node it was nominated to; "" when no nomination stands.
	node string
}

// nominate collects the nominations of a new reservation: every planned slot's member goes to the
// slot's node. The first slot is the member at filter, in its cycle already.
func (r *reservation) nominate() []Nomination {
	var out []Nomination
	for _, s := range r.slots {
		if s.state != slotPlanned || s.nominee == nil {
			continue
		}
		s.nominee.node = s.node
		out = append(out, Nomination{Namespace: s.nominee.namespace, Name: s.nominee.name, Node: s.node})
	}
	return out
}

// withdraw collects the withdrawals of a slot's standing nomination.
func (s *slot) withdraw() []Nomination {
	if s.nominee == nil || s.nominee.node == "" {
		return nil
	}
	n := Nomination{Namespace: s.nominee.namespace, Name: s.nominee.name, Was: s.nominee.node}
	s.nominee.node = ""
	return []Nomination{n}
}

// withdrawAll collects the withdrawals of every standing nomination of a reservation whose
// members will not bind through it. A bound member's is left alone: it named the node the member
// bound to, and kube-apiserver clears it at binding (ClearingNominatedNodeNameAfterBinding).
func (r *reservation) withdrawAll() []Nomination {
	var out []Nomination
	for _, s := range r.slots {
		if s.state != slotBound {
			out = append(out, s.withdraw()...)
		}
	}
	return out
}

// nominateLocked hands a new reservation's nominations to the Nominator, if there is one.
func (m *Manager) nominateLocked(r *reservation) {
	if m.cfg.Nominator != nil {
		m.cfg.Nominator.Nominate(r.nominate())
	}
}

// withdrawLocked hands withdrawals to the Nominator, if there is one.
func (m *Manager) withdrawLocked(ns []Nomination) {
	if m.cfg.Nominator != nil && len(ns) > 0 {
		m.cfg.Nominator.Nominate(ns)
	}
}
