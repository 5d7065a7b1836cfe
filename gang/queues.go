package gang

import (
	"fmt"
	"sort"

	corev1 "k8s.io/api/core/v1"

	"github.com/lockstep-sched/lockstep/placement"
	"github.com/lockstep-sched/lockstep/quota"
	"github.com/lockstep-sched/lockstep/wellknown"
)

// This file is the gang manager's side of team queues: it tells the quota book (package quota,
// kept in the ledger) what it counts and asks it one question before a gang's quorum is
// reserved. Which ecosystem a queue came from it never learns.

// SetQueue defines or redefines a queue or quota. The gangs waiting on it are planned again:
// a raised limit or an opened queue may let them in.
func (m *Manager) SetQueue(q quota.Queue) {
	var fx effects
	m.mu.Lock()
	m.ledger.requeueNamespaces(m.ledger.quota.SetQueue(q))
	m.wakeQueueLocked(q.Key(), q.Key()+" was created or changed", &fx)
	m.mu.Unlock()
	m.apply(&fx)
	m.queuesChanged()
}

func (m *Manager) queuesChanged() {
	if m.cfg.OnQueuesChange != nil {
		m.cfg.OnQueuesChange()
	}
}

// DeleteQueue forgets a queue; its gangs then wait for it to exist again.
func (m *Manager) DeleteQueue(key string) {
	var fx effects
	m.mu.Lock()
	m.ledger.requeueNamespaces(m.ledger.quota.DeleteQueue(key))
	m.wakeQueueLocked(key, key+" was deleted", &fx)
	m.mu.Unlock()
	m.apply(&fx)
	m.queuesChanged()
}

// SetNamespaceDefault records the queue of kind that gangs of namespace go to when their group
// names none (Volcano's namespace annotation); an empty name forgets it.
func (m *Manager) SetNamespaceDefault(namespace, kind, name string) {
	m.mu.Lock()
	changed := m.ledger.quota.SetNamespaceDefault(namespace, kind, name)
	if changed {
		m.ledger.requeueNamespace(namespace)
	}
	m.mu.Unlock()
	if changed {
		m.queuesChanged()
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
	statuses := m.ledger.quota.Statuses(m.ledger.queueCapacity(), m.queueHeld())
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

// Queue is one queue's view; ok is false for a queue lockstep does not know.
func (m *Manager) Queue(key string) (QueueView, bool) {
	for _, v := range m.Queues() {
		if v.Key == key {
			return v, true
		}
	}
	return QueueView{}, false
}

// queueWait asks the quota book whether the gang's quorum, asking req in all, may be admitted
// into its queue now; "" when it may. A refused gang is recorded as waiting in its queue, so
// that its queue's fair share counts it.
func (m *Manager) queueWait(g *gangInfo, p *podInfo, req placement.Resources) string {
	book := m.ledger.quota
	if !book.Enforcing() || p.queue == "" {
		return ""
	}
	why := book.Admit(quota.Question{Queue: p.queue, Gang: g.key, Request: req, Held: m.queueHeldBesides(g.key),
		Capacity: m.ledger.queueCapacity(), Fair: true})
	if why != "" {
		return fmt.Sprintf("gang %s waits for its queue: %s", g.key, why)
	}
	return ""
}

// queueMayHold reports whether a starving gang's queue lets it claim capacity before it frees:
// its queue takes the quorum now, and would stay within its fair share with it. What frees later
// may by then be owed to a queue below its share, which a hold granted past the share would keep.
func (m *Manager) queueMayHold(g *gangInfo, members []*podInfo) bool {
	p, req := members[0], quorumRequests(members)
	if m.queueWait(g, p, req) != "" {
		return false
	}
	if !m.ledger.quota.Enforcing() || p.queue == "" {
		return true
	}
	return m.ledger.quota.WithinShare(quota.Question{Queue: p.queue, Gang: g.key, Request: req,
		Held: m.queueHeldBesides(g.key), Capacity: m.ledger.queueCapacity()}) == ""
}

// podQueueWait is queueWait for one pod that needs no quorum (a member beyond its gang's
// quorum): only the queue's hard limits and others' guarantees apply.
func (m *Manager) podQueueWait(p *podInfo) string {
	return m.singleQueueWait(p.namespace, p.name, p.queue, p.requests)
}

// ordinaryQueueWait is podQueueWait for an ordinary pod: the queue its own markers name (ref,
// Koordinator's quota label), else its namespace's quota, if any, applies. It only reads, under
// the shared lock.
func (m *Manager) ordinaryQueueWait(pod *corev1.Pod, ref quota.Ref, req placement.Resources) string {
	if !m.ledger.quota.Enforcing() {
		return ""
	}
	return m.singleQueueWait(pod.Namespace, pod.Name, m.ledger.quota.Resolve(pod.Namespace, ref), req)
}

func (m *Manager) singleQueueWait(namespace, name, queue string, req placement.Resources) string {
	book := m.ledger.quota
	if !book.Enforcing() || queue == "" {
		return ""
	}
	why := book.Admit(quota.Question{Queue: queue, Request: req, Held: m.queueHeld(), Capacity: m.ledger.queueCapacity()})
	if why != "" {
		return fmt.Sprintf("pod %s/%s waits for its queue: %s", namespace, name, why)
	}
	return ""
}

// wantLocked records that the gang waits for capacity with its quorum asking req, so that its
// queue is owed a share; unwantLocked says it no longer does.
func (m *Manager) wantLocked(g *gangInfo, p *podInfo, req placement.Resources) {
	if m.ledger.quota.Enforcing() && p.queue != "" {
		m.ledger.quota.Want(g.key, p.queue, req)
	}
}

func (m *Manager) unwantLocked(gang string) { m.ledger.quota.Unwant(gang) }

// noteTurnedAwayLocked records the wait of a gang whose member the scheduler turned away: on a
// full cluster its own resource checks refuse every member before lockstep's filter is asked.
// Where queues are enforced, a queue whose gangs are never counted as waiting would be owed
// nothing. And the gang is planned at once for what the scheduler's preemption cannot see
// (evictForLocked).
func (m *Manager) noteTurnedAwayLocked(p *podInfo, fx *effects) {
	g := m.ledger.gangOf(p)
	if g == nil || p.spec == nil || p.holds() || g.satisfied(p.spec) || m.liveReservation(g.key) != nil {
		return
	}
	members, wait := quorumMembers(p, g, p.spec)
	if wait != "" {
		return
	}
	if m.ledger.quota.Enforcing() {
		m.wantLocked(g, p, quorumRequests(members))
	}
	m.evictForLocked(g, p, fx)
}

// evictForLocked plans a waiting gang the scheduler keeps from lockstep's filter, as its
// preemption would have it planned (preempt.go), for what that preemption cannot see: it looks
// for victims only among pods of lower priority, and then never asks lockstep, yet members
// beyond other gangs' quorums of equal priority (extras.go) and, with reclaim, pods of other
// queues (reclaim.go) may make room. A plan that evicts nothing is left for the gang's next
// filter, except under reclaim, whose queue is owed its wait. It reports whether it applied one.
func (m *Manager) evictForLocked(g *gangInfo, p *podInfo, fx *effects) bool {
	reclaim := m.mayReclaim(g, p)
	if !reclaim && !m.mayTakeBackExtras(g) || memberError(p, g) != nil || p.spec == nil || m.liveReservation(g.key) != nil {
		return false
	}
	a := m.admit(p, g, p.spec, nil, nil)
	if len(a.evict) == 0 && !reclaim {
		return false
	}
	fx.touched(g.key)
	m.applyAdmission(p, g, nil, a, fx)
	return true
}

// wakeQueueLocked sends a waiting member of each gang waiting on queue back to filter.
func (m *Manager) wakeQueueLocked(queue, why string, fx *effects) {
	for _, g := range m.ledger.gangs {
		if q, _, ok := m.ledger.quota.Wants(g.key); ok && q == queue && m.liveReservation(g.key) == nil {
			m.wakeLocked(g, wellknown.ConditionReasonQueueChanged, why+"; gang "+g.key+" is being planned again", fx)
		}
	}
}

// queueRanker ranks team queues for the line, computing the shares once for all; it ranks every
// queue alike where none is enforced.
func (m *Manager) queueRanker() func(queue string) quota.Rank {
	book := m.ledger.quota
	if !book.Enforcing() {
		return func(string) quota.Rank { return quota.Rank{} }
	}
	held := m.queueHeld()
	shares := book.Shares(m.ledger.queueCapacity(), held, "", placement.Resources{})
	return func(queue string) quota.Rank { return book.Rank(queue, shares, held) }
}

// queueHeld is what each queue holds beside its bound pods: its gangs' reservations and its
// ordinary binds on their way.
func (m *Manager) queueHeld() map[string]placement.Resources {
	held := m.book.heldByQueue()
	for q, r := range m.ledger.queueBinding {
		held[q] = held[q].Add(r)
	}
	return held
}

// queueHeldBesides is queueHeld less what gang's own reservation sets aside: a gang asking for its
// quorum must not be counted twice, once in what it asks and once in what it holds. (A starving
// gang's hold is in neither: heldByQueue leaves holds out.)
func (m *Manager) queueHeldBesides(gang string) map[string]placement.Resources {
	held := m.queueHeld()
	if res := m.book.live(gang); res != nil && res.queue != "" && res.state != holding {
		for _, s := range res.slots {
			if s.holdsCapacity() {
				held[res.queue] = held[res.queue].Sub(s.requests)
			}
		}
	}
	return held
}

func (l *ledger) startQueueBinding(p *podInfo) {
	if p.queue != "" {
		l.queueBinding[p.queue] = l.queueBinding[p.queue].Add(p.requests)
	}
}

func (l *ledger) endQueueBinding(p *podInfo) {
	if p.queue == "" {
		return
	}
	if left := l.queueBinding[p.queue].Sub(p.requests); left.IsZero() {
		delete(l.queueBinding, p.queue)
	} else {
		l.queueBinding[p.queue] = left
	}
}

// quorumRequests is what pods ask in all: a quorum's members, or a unit reclaim takes.
func quorumRequests(members []*podInfo) placement.Resources {
	var sum placement.Resources
	for _, q := range members {
		sum = sum.Add(q.requests)
	}
	return sum
}

// QueueTakes reports whether the queue that ref names, for a gang of namespace, could take a gang
// asking req now by its state, its limits and the others' guarantees: Volcano's enqueue test,
// which package podgroup makes before a PodGroup goes Inqueue and its job controller creates the
// pods. Fairness is left to admission: a gang must exist to wait its turn.
func (m *Manager) QueueTakes(namespace, name string, ref quota.Ref, req placement.Resources) (bool, string) {
	m.mu.RLock()
	defer m.mu.RUnlock()
	book, key := m.ledger.quota, namespace+"/"+name
	if !book.Enforcing() || m.liveReservation(key) != nil {
		return true, "" // a gang with a reservation was admitted already
	}
	why := book.Admit(quota.Question{Queue: book.Resolve(namespace, ref), Gang: key, Request: req,
		Held: m.queueHeldBesides(key), Capacity: m.ledger.queueCapacity()})
	return why == "", why
}
