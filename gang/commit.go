package gang

import (
	"context"
	"fmt"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/klog/v2"

	"github.com/lockstep-sched/lockstep/wellknown"
)

// A commit binds a gang's waiting members once the quorum has reached bind. It runs in the
// background: it must finish even when the scheduler call that completed the quorum has already
// given up on its own deadline. Bindings cannot be written atomically, so the commit records each
// answer as it comes (commitrecord.go keeps the partly-bound clock).

// commitItem is one member's binding in a commit, with the context that can stop it.
type commitItem struct {
	slot *slot
	ctx  context.Context
}

type commitOutcome struct {
	slot *slot
	err  error
}

// startCommitLocked moves a reservation to committing, chooses each member's GPUs and starts the
// bindings.
func (m *Manager) startCommitLocked(g *gangInfo, res *reservation) {
	res.state = committing
	m.book.keepUntilReleased(res)
	ctx, cancel := context.WithTimeout(context.Background(), m.cfg.CommitTimeout)
	var todo []commitItem
	for _, s := range res.slots {
		if s.state == slotWaiting {
			// Members sharing a node get disjoint GPU sets: each choice is marked taken at once.
			s.gpuIDs = m.ledger.chooseGPUs(s.node, s.pod.uid, s.requests.GPU)
			// A member deleted meanwhile stops its binding at once (see deletePodLocked).
			item := commitItem{slot: s}
			item.ctx, s.cancel = context.WithCancel(ctx)
			todo = append(todo, item)
		}
	}
	if g.boundCount() == 0 {
		// A gang with members bound already had its wait counted by the commit that bound them.
		m.metrics.observeWait(m.now().Sub(g.oldest().created))
	}
	rec := newCommitRecord(m.now(), len(todo), g.boundCount(), g.minAvailable())
	g.lastCommit = rec
	g.lastReason = fmt.Sprintf("gang %s: quorum reached (%d members ready), binding", g.key, len(todo)+g.boundCount())
	klog.InfoS("Gang committing", "gang", g.key, "members", len(todo))
	go m.commit(cancel, g, res, rec, todo)
}

// commit writes the bindings at once (the Binder paces what reaches the apiserver) and records
// each answer as it comes, so that lockstep's ledger, /debug/gangs and the partly-bound clock
// follow the apiserver binding by binding.
func (m *Manager) commit(cancel context.CancelFunc, g *gangInfo, res *reservation, rec *commitRecord, todo []commitItem) {
	defer cancel()
	outcomes := make(chan commitOutcome, len(todo))
	for _, it := range todo {
		go func() {
			p := it.slot.pod
			outcomes <- commitOutcome{it.slot, m.binder.Bind(it.ctx, p.namespace, p.name, p.uid, it.slot.node, it.slot.gpuIDs)}
		}()
	}
	for range todo {
		out := <-outcomes
		m.metrics.observeBind("gang", out.err)
		m.recordOutcome(g, rec, out)
	}
	var fx effects
	m.mu.Lock()
	m.finishCommitLocked(g, res, rec, todo, &fx)
	m.mu.Unlock()
	m.metrics.observeCommit(rec)
	m.apply(&fx)
}

// recordOutcome takes one binding's answer into the ledger and the commit's record.
func (m *Manager) recordOutcome(g *gangInfo, rec *commitRecord, out commitOutcome) {
	m.mu.Lock()
	defer m.mu.Unlock()
	s := out.slot
	s.cancel()
	if out.err != nil {
		s.state, s.err = slotFailed, out.err
		m.ledger.unchooseGPUs(s.node, s.pod.uid, s.gpuIDs)
		rec.failed++
		return
	}
	s.state = slotBound
	if cur, ok := m.ledger.pods[s.pod.uid]; ok {
		m.ledger.markBound(cur, s.node, s.gpuIDs)
	}
	rec.bindingConfirmed(m.now(), g.boundCount())
}

// finishCommitLocked releases the reservation and says how the commit went.
func (m *Manager) finishCommitLocked(g *gangInfo, res *reservation, rec *commitRecord, todo []commitItem, fx *effects) {
	m.book.release(res)
	rec.finish(m.now())
	if rec.failed == 0 {
		g.lastReason = fmt.Sprintf("gang %s: quorum reached, %d members bound in %s", g.key, rec.members, formatSpan(rec.duration()))
		klog.InfoS("Gang bound", "gang", g.key, "members", rec.members, "took", rec.duration())
	} else {
		// Bindings cannot be undone, so lockstep does not try to unbind the members that made it.
		// The failed members stay unbound; the scheduler retries them, and because the gang's
		// bound members count toward quorum, each then needs only its own reservation.
		first := firstFailure(todo)
		g.lastReason = fmt.Sprintf("gang %s: %d of %d bindings failed (first: %v); %s. Bound members stay, the failed ones are retried by the scheduler",
			g.key, rec.failed, rec.members, first, rec.partialNote())
		klog.ErrorS(first, "Gang commit incomplete", "gang", g.key, "failed", rec.failed, "members", rec.members,
			"partlyBoundFor", rec.partlyBoundFor())
	}
	for _, it := range todo {
		m.commitEventLocked(g, it.slot, rec, fx)
	}
}

func (m *Manager) commitEventLocked(g *gangInfo, s *slot, rec *commitRecord, fx *effects) {
	p := s.pod
	if cur, ok := m.ledger.pods[p.uid]; ok {
		p = cur // the informer may have replaced the record since the slot was claimed
	}
	if s.state != slotBound {
		fx.podEvent(p, corev1.EventTypeWarning, wellknown.ReasonGangBindFailed, fmt.Sprintf("gang %s: binding to node %s failed: %v; %s", g.key, s.node, s.err, rec.partialNote()))
		return
	}
	msg := fmt.Sprintf("gang %s: quorum reached, bound to node %s", g.key, s.node)
	if len(s.gpuIDs) > 0 {
		msg += " with GPUs " + FormatGPUIDs(s.gpuIDs)
	}
	msg += fmt.Sprintf("; %d members bound in %s", rec.bound, formatSpan(rec.duration()))
	fx.podEvent(p, corev1.EventTypeNormal, wellknown.ReasonGangBound, msg)
}

func firstFailure(todo []commitItem) error {
	for _, it := range todo {
		if it.slot.err != nil {
			return it.slot.err
		}
	}
	return nil
}
