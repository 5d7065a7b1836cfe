package gang

import (
	"context"
	"errors"
	"fmt"
	"time"

	gocache "github.com/patrickmn/go-cache"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/klog/v2"

	"github.com/lockstep-sched/lockstep/wellknown"
)

// ErrAwaitingQuorum is returned (wrapped) when a gang member's bind was held for BindWait and the
// quorum did not arrive. The member keeps its place in the reservation and still counts toward
// quorum: when the quorum arrives lockstep binds it itself, and the scheduler's retry of the pod
// finds it bound.
var ErrAwaitingQuorum = errors.New("waiting for gang quorum")

// Bind binds a pod to a node. An ordinary pod, or a member of a gang that already has quorum,
// binds at once. A gang member before quorum is held: its bind counts toward quorum, and when
// min-available members have reached bind, every held member of the gang is bound together.
func (m *Manager) Bind(ctx context.Context, namespace, name string, uid types.UID, node string) error {
	p, err := m.lookupPod(ctx, namespace, name, uid)
	if err != nil {
		return err
	}

	m.mu.Lock()
	if cur, ok := m.state.pods[p.uid]; ok {
		p = cur // an informer update may have replaced the record since the lookup
	}
	if p.node != "" {
		m.mu.Unlock()
		if p.node == node {
			return nil // lockstep bound it already, from its reservation
		}
		return fmt.Errorf("pod %s is already bound to node %s", p.key(), p.node)
	}
	g := m.state.gangOf(p)
	if p.spec == nil || g == nil || g.boundCount() >= p.spec.MinAvailable {
		m.mu.Unlock()
		return m.bindNow(ctx, p, node, "ordinary")
	}
	res := m.liveReservation(g.key)
	var s *slot
	if res != nil {
		s = res.slotOf(p.uid)
	}
	if s == nil {
		m.mu.Unlock()
		return fmt.Errorf("gang %s: pod %s holds no reservation (it expired or was never made); the scheduler retries the pod and lockstep plans the gang again", g.key, p.key())
	}
	if s.node != node {
		m.mu.Unlock()
		return fmt.Errorf("gang %s: pod %s is reserved on node %s, not %s", g.key, p.key(), s.node, node)
	}
	if s.state == slotReserved {
		s.state = slotWaiting
	}
	ready := res.countState(slotWaiting) + g.boundCount()
	if res.state == reserving && ready >= p.spec.MinAvailable {
		m.startCommitLocked(g, res)
	} else if res.state == reserving {
		g.lastReason = fmt.Sprintf("gang %s: %d of %d members ready to bind; binds held until quorum or %s",
			g.key, ready, p.spec.MinAvailable, res.expires.UTC().Format("15:04:05"))
	}
	done, expires := res.done, res.expires
	m.mu.Unlock()

	hold := time.NewTimer(m.cfg.BindWait)
	defer hold.Stop()
	expiry := time.NewTimer(time.Until(expires))
	defer expiry.Stop()
	expired := expiry.C
wait:
	for {
		select {
		case <-done:
			break wait
		case <-hold.C:
			m.mu.RLock()
			defer m.mu.RUnlock()
			if res.state == committing {
				return fmt.Errorf("gang %s: quorum reached, bindings still being written after %s; the scheduler's retry finds pod %s bound", g.key, m.cfg.BindWait, p.key())
			}
			return fmt.Errorf("gang %s: %w: %d of %d members ready to bind after %s; pod %s keeps its reservation on %s and lockstep binds it when the quorum arrives",
				g.key, ErrAwaitingQuorum, res.countState(slotWaiting)+g.boundCount(), p.spec.MinAvailable, m.cfg.BindWait, p.key(), node)
		case <-expired:
			m.mu.RLock()
			committing := res.state == committing
			m.mu.RUnlock()
			if !committing {
				return fmt.Errorf("gang %s: reservation expired before quorum; pod %s is not bound", g.key, p.key())
			}
			// The quorum arrived in time; the commit decides this pod's fate.
			expired = nil
		case <-ctx.Done():
			return fmt.Errorf("gang %s: bind of %s abandoned: %w", g.key, p.key(), ctx.Err())
		}
	}
	m.mu.RLock()
	defer m.mu.RUnlock()
	switch {
	case s.state == slotBound:
		return nil
	case s.state == slotFailed:
		return fmt.Errorf("gang %s: binding %s to %s failed: %w", g.key, p.key(), node, s.err)
	case res.expired:
		return fmt.Errorf("gang %s: reservation expired before quorum; pod %s is not bound", g.key, p.key())
	default:
		return fmt.Errorf("gang %s: reservation released before pod %s was bound; the scheduler retries it", g.key, p.key())
	}
}

func (m *Manager) lookupPod(ctx context.Context, namespace, name string, uid types.UID) (*podInfo, error) {
	m.mu.RLock()
	p, ok := m.state.pods[uid]
	m.mu.RUnlock()
	if ok {
		return p, nil
	}
	// The scheduler can be ahead of lockstep's informer for a pod created a moment ago.
	pod, err := m.getPod(ctx, namespace, name)
	if err != nil {
		return nil, fmt.Errorf("pod %s/%s: %w", namespace, name, err)
	}
	if uid != "" && pod.UID != uid {
		return nil, fmt.Errorf("pod %s/%s: uid is %s, the scheduler asked for %s (the pod was recreated)", namespace, name, pod.UID, uid)
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.state.upsertPod(pod), nil
}

func (m *Manager) bindNow(ctx context.Context, p *podInfo, node, kind string) error {
	m.mu.Lock()
	gpuIDs := m.state.chooseGPUs(node, p.uid, p.requests.GPU)
	m.mu.Unlock()
	err := m.binder.Bind(ctx, p.namespace, p.name, p.uid, node, gpuIDs)
	m.metrics.observeBind(kind, err)
	m.mu.Lock()
	defer m.mu.Unlock()
	if err != nil {
		m.state.unchooseGPUs(node, p.uid, gpuIDs)
		return fmt.Errorf("binding pod %s to node %s: %w", p.key(), node, err)
	}
	if cur, ok := m.state.pods[p.uid]; ok {
		m.state.markBound(cur, node, gpuIDs)
	}
	return nil
}

// startCommitLocked moves a reservation to committing and binds its waiting members in the
// background: the commit must finish even when the scheduler call that completed the quorum has
// already given up on its own deadline.
func (m *Manager) startCommitLocked(g *gangInfo, res *reservation) {
	res.state = committing
	// A commit outlives the waiting time if the apiserver is slow; keep the capacity held
	// until the last binding is answered so that nothing else is offered it meanwhile.
	m.reservations.Set(res.gang, res, gocache.NoExpiration)
	ctx, cancel := context.WithTimeout(context.Background(), m.cfg.CommitTimeout)
	var todo []commitItem
	for _, s := range res.slots {
		if s.state == slotWaiting {
			// Members sharing a node get disjoint GPU sets: each choice is marked taken at once.
			s.gpuIDs = m.state.chooseGPUs(s.node, s.pod.uid, s.requests.GPU)
			// A member deleted meanwhile stops its binding at once (see deletePodLocked).
			item := commitItem{slot: s}
			item.ctx, s.cancel = context.WithCancel(ctx)
			todo = append(todo, item)
		}
	}
	rec := newCommitRecord(m.now(), len(todo), g.boundCount(), g.minAvailable())
	g.lastCommit = rec
	g.lastReason = fmt.Sprintf("gang %s: quorum reached (%d members ready), binding", g.key, len(todo)+g.boundCount())
	klog.InfoS("Gang committing", "gang", g.key, "members", len(todo))
	go m.commit(cancel, g, res, rec, todo)
}

// commitItem is one member's binding in a commit, with the context that can stop it.
type commitItem struct {
	slot *slot
	ctx  context.Context
}

type commitOutcome struct {
	slot *slot
	err  error
}

// commit writes the bindings at once (the Binder paces what reaches the apiserver) and records
// each answer as it comes, so that lockstep's state, /debug/gangs and the partly-bound clock
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
		m.recordOutcome(g, rec, <-outcomes)
	}
	m.finishCommit(g, res, rec, todo)
}

func (m *Manager) recordOutcome(g *gangInfo, rec *commitRecord, out commitOutcome) {
	m.mu.Lock()
	defer m.mu.Unlock()
	s := out.slot
	s.cancel()
	m.metrics.observeBind("gang", out.err)
	if out.err != nil {
		s.state, s.err = slotFailed, out.err
		m.state.unchooseGPUs(s.node, s.pod.uid, s.gpuIDs)
		rec.failed++
		return
	}
	s.state = slotBound
	if cur, ok := m.state.pods[s.pod.uid]; ok {
		m.state.markBound(cur, s.node, s.gpuIDs)
	}
	rec.bindingConfirmed(m.now(), g.boundCount())
}

func (m *Manager) finishCommit(g *gangInfo, res *reservation, rec *commitRecord, todo []commitItem) {
	m.mu.Lock()
	defer m.mu.Unlock()
	res.state = released
	m.reservations.Delete(res.gang)
	close(res.done)
	rec.finish(m.now())
	m.metrics.observeCommit(rec)

	var errs []error
	for _, it := range todo {
		errs = append(errs, it.slot.err)
	}
	if rec.failed == 0 {
		g.lastReason = fmt.Sprintf("gang %s: quorum reached, %d members bound in %s", g.key, rec.members, formatSpan(rec.duration()))
		klog.InfoS("Gang bound", "gang", g.key, "members", rec.members, "took", rec.duration())
	} else {
		// Bindings cannot be undone, so lockstep does not try to unbind the members that made it.
		// The failed members stay unbound; the scheduler retries them, and because the gang's
		// bound members count toward quorum, each then needs only its own reservation.
		g.lastReason = fmt.Sprintf("gang %s: %d of %d bindings failed (first: %v); %s. Bound members stay, the failed ones are retried by the scheduler",
			g.key, rec.failed, rec.members, firstErr(errs), rec.partialNote())
		klog.ErrorS(firstErr(errs), "Gang commit incomplete", "gang", g.key, "failed", rec.failed, "members", rec.members,
			"partlyBoundFor", rec.partlyBoundFor())
	}
	for _, it := range todo {
		m.commitEventLocked(g, it.slot, rec)
	}
}

func (m *Manager) commitEventLocked(g *gangInfo, s *slot, rec *commitRecord) {
	p := s.pod
	if cur, ok := m.state.pods[p.uid]; ok {
		p = cur // the informer may have replaced the record since the slot was claimed
	}
	if s.state != slotBound {
		m.eventLocked(p, corev1.EventTypeWarning, wellknown.ReasonGangBindFailed, fmt.Sprintf("gang %s: binding to node %s failed: %v; %s", g.key, s.node, s.err, rec.partialNote()))
		return
	}
	msg := fmt.Sprintf("gang %s: quorum reached, bound to node %s", g.key, s.node)
	if len(s.gpuIDs) > 0 {
		msg += " with GPUs " + FormatGPUIDs(s.gpuIDs)
	}
	msg += fmt.Sprintf("; %d members bound in %s", rec.bound, formatSpan(rec.duration()))
	m.eventLocked(p, corev1.EventTypeNormal, wellknown.ReasonGangBound, msg)
}

func firstErr(errs []error) error {
	for _, err := range errs {
		if err != nil {
			return err
		}
	}
	return nil
}
