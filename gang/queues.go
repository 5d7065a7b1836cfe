package gang

import (
	"sort"

	"github.com/lockstep-sched/lockstep/decide"
	"github.com/lockstep-sched/lockstep/placement"
	"github.com/lockstep-sched/lockstep/quota"
	"github.com/lockstep-sched/lockstep/wellknown"
)

// This file is the gang manager's side of team queues: it tells the quota book (package quota,
// kept in the ledger) what the queue watchers report and what it counts, and shows each queue
// with its waiting gangs. The queue question itself is package decide's. Which ecosystem a queue
// came from it never learns.

// SetQueue defines or redefines a queue or quota. The gangs waiting on it are planned again:
// a raised limit or an opened queue may let them in.
func (m *Manager) SetQueue(q quota.Queue) {
	m.queueChanged(q.Key(), q.Key()+" was created or changed", func() []string { return m.ledger.quota.SetQueue(q) })
}

// DeleteQueue forgets a queue; its gangs then wait for it to exist again.
func (m *Manager) DeleteQueue(key string) {
	m.queueChanged(key, key+" was deleted", func() []string { return m.ledger.quota.DeleteQueue(key) })
}

// queueChanged applies a change of a queue's definition (change returns the namespaces whose
// pods' queue may have moved) and wakes the gangs waiting on it.
func (m *Manager) queueChanged(key, why string, change func() []string) {
	var fx effects
	m.locked(func() {
		m.ledger.requeueNamespaces(change())
		for _, g := range m.ledger.gangs {
			if q, _, ok := m.ledger.quota.Wants(g.key); ok && m.ledger.quota.Nested(q, key) && m.book.reserving(g.key) == nil {
				m.wake.gang(g, wellknown.ConditionReasonQueueChanged, why+"; gang "+g.key+" is being planned again", &fx)
			}
		}
	})
	m.emit(&fx)
	if m.cfg.OnQueuesChange != nil {
		m.cfg.OnQueuesChange()
	}
}

// SetNamespaceDefault records the queue of kind that gangs of namespace go to when their group
// names none (Volcano's namespace annotation); an empty name forgets it.
func (m *Manager) SetNamespaceDefault(namespace, kind, name string) {
	changed := false
	m.locked(func() {
		if changed = m.ledger.quota.SetNamespaceDefault(namespace, kind, name); changed {
			m.ledger.requeueNamespace(namespace)
		}
	})
	if changed && m.cfg.OnQueuesChange != nil {
		m.cfg.OnQueuesChange()
	}
}

// QueueView is one queue as /debug/queues shows it and the status writers write it.
type QueueView struct {
	quota.Status
	// Gangs are the queue's gangs that wait, first in line first, with why.
	Gangs []QueueGang
}

// QueueGang is a waiting gang of a queue.
type QueueGang struct {
	Gang   string              `json:"gang"`
	Asks   placement.Resources `json:"-"`
	Reason string              `json:"reason"`
}

// Queues lists every queue lockstep knows: the defined ones and those only named by pods.
func (m *Manager) Queues() []QueueView {
	m.mu.RLock()
	defer m.mu.RUnlock()
	q := m.snapshots.queues()
	statuses := m.ledger.quota.Statuses(q.Capacity, q.Held)
	out := make([]QueueView, len(statuses))
	index := map[string]int{}
	for i, s := range statuses {
		out[i] = QueueView{Status: s}
		index[s.Key] = i
	}
	for _, g := range m.ledger.gangs {
		queue, asks, ok := m.ledger.quota.Wants(g.key)
		if i, known := index[queue]; ok && known {
			out[i].Gangs = append(out[i].Gangs, QueueGang{Gang: g.key, Asks: asks, Reason: g.lastReason})
		}
	}
	for i := range out {
		sort.Slice(out[i].Gangs, func(a, b int) bool { return out[i].Gangs[a].Gang < out[i].Gangs[b].Gang })
	}
	return out
}

// QueueTakes reports whether the queue that ref names, for a gang of namespace, could take a gang
// asking req now by its state, its limits and the others' guarantees: Volcano's enqueue test,
// which package podgroup makes before a PodGroup goes Inqueue and its job controller creates the
// pods (decide.Queues.Takes).
func (m *Manager) QueueTakes(namespace, name string, ref quota.Ref, req placement.Resources) (bool, string) {
	m.mu.RLock()
	defer m.mu.RUnlock()
	if !m.ledger.quota.Enforcing() {
		return true, ""
	}
	return m.snapshots.queues().Takes(namespace, name, ref, req)
}

// noteTurnedAwayLocked records the wait of a gang whose member the scheduler turned away: on a
// full cluster its own resource checks refuse every member before lockstep's filter is asked.
// Where queues are enforced, a queue whose gangs are never counted as waiting would be owed
// nothing. And the gang is planned at once for what the scheduler's preemption cannot see
// (evictForLocked).
func (m *Manager) noteTurnedAwayLocked(p *podInfo, fx *effects) {
	g := m.ledger.gangOf(p)
	if g == nil || p.Spec == nil || p.Holds() {
		return
	}
	s := m.snapshots.current()
	if s.Gangs[g.key].Satisfied(p.Spec) || s.Reservations.Live(g.key) != nil {
		return
	}
	members, wait := s.QuorumMembers(p.UID)
	if wait != "" {
		return
	}
	m.ledger.want(g.key, p.Queue, decide.QuorumRequests(members))
	m.evictForLocked(g, p, fx)
}

// evictForLocked applies decide's EvictFor for member p: a plan for its waiting gang that evicts
// what the scheduler's preemption cannot see. It reports whether it applied one.
func (m *Manager) evictForLocked(g *gangInfo, p *podInfo, fx *effects) bool {
	s := m.snapshots.current()
	a, ok := s.EvictFor(s.Pods[p.UID])
	if !ok {
		return false
	}
	fx.touched(g.key)
	m.applyAdmissionLocked(p, g, a, fx)
	return true
}
