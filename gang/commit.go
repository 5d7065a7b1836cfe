package gang

import (
	"context"
	"fmt"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/klog/v2"

	"github.com/lockstep-sched/lockstep/decide"
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
	res.state = decide.Committing
	res.changed()
	m.book.keepUntilReleased(res)
	ctx, cancel := context.WithTimeout(context.Background(), m.cfg.CommitTimeout)
	c := &commitRun{m: m, g: g, res: res, cancel: cancel}
	for _, s := range res.slots {
		if s.state == decide.SlotWaiting {
			// Members sharing a node get disjoint GPU sets: each choice is marked taken at once.
			s.gpuIDs = m.ledger.chooseGPUs(s.node, s.pod.UID, s.requests.GPU)
			// A member deleted meanwhile stops its binding at once (see memberLeftLocked).
			item := commitItem{slot: s}
			item.ctx, s.cancel = context.WithCancel(ctx)
			c.todo = append(c.todo, item)
		}
	}
	view := g.view()
	bound := view.BoundCount()
	if bound == 0 {
		// A gang with members bound already had its wait counted by the commit that bound them.
		m.metrics.observeWait(m.now().Sub(view.Oldest().Created))
	}
	c.rec = newCommitRecord(m.now(), len(c.todo), bound, view.MinAvailable())
	g.lastCommit = c.rec
	g.lastReason = fmt.Sprintf("gang %s: quorum reached (%d members ready), binding", g.key, len(c.todo)+bound)
	klog.InfoS("Gang committing", "gang", g.key, "members", len(c.todo))
	go c.run()
}

// commitRun is one gang's commit on its way: the bindings it writes and what came of each.
type commitRun struct {
	m      *Manager
	g      *gangInfo
	res    *reservation
	rec    *commitRecord
	todo   []commitItem
	cancel context.CancelFunc
}

// run writes the bindings at once (the Binder paces what reaches the apiserver) and records each
// answer as it comes, so that lockstep's ledger, /debug/gangs and the partly-bound clock follow
// the apiserver binding by binding.
func (c *commitRun) run() {
	defer c.cancel()
	outcomes := make(chan commitOutcome, len(c.todo))
	for _, it := range c.todo {
		go func() {
			p := it.slot.pod
			outcomes <- commitOutcome{it.slot, c.m.binder.Bind(it.ctx, p.Namespace, p.Name, p.UID, it.slot.node, it.slot.gpuIDs)}
		}()
	}
	for range c.todo {
		out := <-outcomes
		c.m.metrics.observeBind("gang", out.err)
		c.m.locked(func() { c.recordLocked(out) })
	}
	var fx effects
	c.m.locked(func() { c.finishLocked(&fx) })
	c.m.metrics.observeCommit(c.rec)
	c.m.emit(&fx)
}

// recordLocked takes one binding's answer into the ledger and the commit's record.
func (c *commitRun) recordLocked(out commitOutcome) {
	l, s := c.m.ledger, out.slot
	s.cancel()
	c.res.changed()
	if out.err != nil {
		s.state, s.err = decide.SlotFailed, out.err
		l.unchooseGPUs(s.node, s.pod.UID, s.gpuIDs)
		c.rec.failed++
		return
	}
	s.state = decide.SlotBound
	if cur, ok := l.pods[s.pod.UID]; ok {
		l.markBound(cur, s.node, s.gpuIDs)
	}
	c.rec.bindingConfirmed(c.m.now(), c.g.view().BoundCount())
}

// finishLocked releases the reservation and says how the commit went.
func (c *commitRun) finishLocked(fx *effects) {
	g, rec := c.g, c.rec
	c.m.book.release(c.res)
	rec.finish(c.m.now())
	if rec.failed == 0 {
		g.lastReason = fmt.Sprintf("gang %s: quorum reached, %d members bound in %s", g.key, rec.members, formatSpan(rec.duration()))
		klog.InfoS("Gang bound", "gang", g.key, "members", rec.members, "took", rec.duration())
	} else {
		// Bindings cannot be undone, so lockstep does not try to unbind the members that made it.
		// The failed members stay unbound; the scheduler retries them, and because the gang's
		// bound members count toward quorum, each then needs only its own reservation.
		first := firstFailure(c.todo)
		g.lastReason = fmt.Sprintf("gang %s: %d of %d bindings failed (first: %v); %s. Bound members stay, the failed ones are retried by the scheduler",
			g.key, rec.failed, rec.members, first, rec.partialNote())
		klog.ErrorS(first, "Gang commit incomplete", "gang", g.key, "failed", rec.failed, "members", rec.members,
			"partlyBoundFor", rec.partlyBoundFor())
	}
	for _, it := range c.todo {
		c.eventLocked(it.slot, fx)
	}
}

func (c *commitRun) eventLocked(s *slot, fx *effects) {
	g, rec, p := c.g, c.rec, s.pod
	if cur, ok := c.m.ledger.pods[p.UID]; ok {
		p = cur // the informer may have replaced the record since the slot was claimed
	}
	if s.state != decide.SlotBound {
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
