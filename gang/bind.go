package gang

import (
	"context"
	"errors"
	"fmt"
	"time"

	"k8s.io/apimachinery/pkg/types"
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
	d := m.decideBindLocked(p, node)
	m.mu.Unlock()
	switch {
	case d.err != nil || d.done:
		return d.err
	case d.held == nil:
		return m.bindNow(ctx, d.pod, node, "ordinary")
	}
	return m.awaitQuorum(ctx, d.held)
}

// bindDecision is what Bind does with a pod: nothing (done, or refused with err), bind it at once,
// or hold it for its gang's quorum.
type bindDecision struct {
	pod  *podInfo
	done bool
	err  error
	held *heldBind
}

// heldBind is a gang member's bind waiting for its gang's commit.
type heldBind struct {
	pod  *podInfo
	gang *gangInfo
	res  *reservation
	slot *slot
	node string
}

// decideBindLocked decides what Bind does, and for a held member counts it toward quorum,
// starting the commit when it completes the quorum.
func (m *Manager) decideBindLocked(p *podInfo, node string) bindDecision {
	if cur, ok := m.ledger.pods[p.uid]; ok {
		p = cur // an informer update may have replaced the record since the lookup
	}
	if p.node != "" && p.node == node {
		return bindDecision{done: true} // lockstep bound it already, from its reservation
	}
	if p.node != "" {
		return bindDecision{err: fmt.Errorf("pod %s is already bound to node %s", p.key(), p.node)}
	}
	g := m.ledger.gangOf(p)
	switch {
	case g == nil:
		return bindDecision{pod: p}
	case p.spec == nil:
		return bindDecision{err: fmt.Errorf("gang %s: pod %s cannot bind before its gang's rules are known: %v", g.key, p.key(), p.specErr)}
	case g.satisfied(p.spec):
		return bindDecision{pod: p}
	}
	res := m.liveReservation(g.key)
	var s *slot
	if res != nil {
		s = res.slotOf(p.uid)
	}
	if s == nil {
		return bindDecision{err: fmt.Errorf("gang %s: pod %s holds no reservation (it expired or was never made); the scheduler retries the pod and lockstep plans the gang again", g.key, p.key())}
	}
	if s.node != node {
		return bindDecision{err: fmt.Errorf("gang %s: pod %s is reserved on node %s, not %s", g.key, p.key(), s.node, node)}
	}
	if s.state == slotReserved {
		s.state = slotWaiting
	}
	if ready := g.ready(p.spec, res); res.state == reserving && ready.meets(p.spec) {
		m.quorumReadyLocked(g, res, p.spec)
	} else if res.state == reserving {
		g.lastReason = fmt.Sprintf("gang %s: %s; binds held until quorum or %s", g.key, ready.readyWords(p.spec), res.expires.UTC().Format("15:04:05"))
	}
	return bindDecision{held: &heldBind{pod: p, gang: g, res: res, slot: s, node: node}}
}

// awaitQuorum holds a member's bind until its gang's commit settles it, BindWait passes, the
// reservation expires before quorum, or the scheduler gives up on the call.
func (m *Manager) awaitQuorum(ctx context.Context, h *heldBind) error {
	hold := time.NewTimer(m.cfg.BindWait)
	defer hold.Stop()
	expiry := time.NewTimer(time.Until(h.res.expires))
	defer expiry.Stop()
	expired := expiry.C
	for {
		select {
		case <-h.res.done:
			return m.heldOutcome(h)
		case <-hold.C:
			return m.stillHeld(h)
		case <-expired:
			if !m.committing(h.res) {
				return fmt.Errorf("gang %s: reservation expired before quorum; pod %s is not bound", h.gang.key, h.pod.key())
			}
			// The quorum arrived in time; the commit decides this pod's fate.
			expired = nil
		case <-ctx.Done():
			return fmt.Errorf("gang %s: bind of %s abandoned: %w", h.gang.key, h.pod.key(), ctx.Err())
		}
	}
}

func (m *Manager) committing(res *reservation) bool {
	m.mu.RLock()
	defer m.mu.RUnlock()
	return res.state == committing
}

// stillHeld is the answer to a bind held for BindWait: the pod keeps its place.
func (m *Manager) stillHeld(h *heldBind) error {
	m.mu.RLock()
	defer m.mu.RUnlock()
	if h.res.state == committing {
		return fmt.Errorf("gang %s: quorum reached, bindings still being written after %s; the scheduler's retry finds pod %s bound", h.gang.key, m.cfg.BindWait, h.pod.key())
	}
	spec := h.pod.spec
	ready := h.gang.ready(spec, h.res)
	status := fmt.Sprintf("%s after %s", ready.readyWords(spec), m.cfg.BindWait)
	if ready.meets(spec) {
		status = "its quorum is ready, its gang group's is not: " + h.gang.bundleWait
	}
	return fmt.Errorf("gang %s: %w: %s; pod %s keeps its reservation on %s and lockstep binds it when the quorum arrives",
		h.gang.key, ErrAwaitingQuorum, status, h.pod.key(), h.node)
}

// heldOutcome is the answer to a held bind once its reservation was released.
func (m *Manager) heldOutcome(h *heldBind) error {
	m.mu.RLock()
	defer m.mu.RUnlock()
	switch {
	case h.slot.state == slotBound:
		return nil
	case h.slot.state == slotFailed:
		return fmt.Errorf("gang %s: binding %s to %s failed: %w", h.gang.key, h.pod.key(), h.node, h.slot.err)
	case h.res.yieldedTo != "":
		return fmt.Errorf("gang %s: reservation given up to higher-priority %s; pod %s is not bound, and its gang plans again", h.gang.key, h.res.yieldedTo, h.pod.key())
	case h.res.expired:
		return fmt.Errorf("gang %s: reservation expired before quorum; pod %s is not bound", h.gang.key, h.pod.key())
	default:
		return fmt.Errorf("gang %s: reservation released before pod %s was bound; the scheduler retries it", h.gang.key, h.pod.key())
	}
}

func (m *Manager) lookupPod(ctx context.Context, namespace, name string, uid types.UID) (*podInfo, error) {
	m.mu.RLock()
	p, ok := m.ledger.pods[uid]
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
	// The Get can race the pod's deletion, whose event lockstep may have taken in since.
	return m.ledger.takeInFromScheduler(newPodInfo(pod, m.ledger.read))
}

// bindNow binds a pod that need not wait for anyone, with the GPUs chosen for it.
func (m *Manager) bindNow(ctx context.Context, p *podInfo, node, kind string) error {
	var fx effects
	m.mu.Lock()
	// Checked again here, where binds are counted as they start: pods the scheduler filtered
	// together each saw the queue before the others' binds.
	if why := m.podQueueWait(p); why != "" {
		m.mu.Unlock()
		return errors.New(why)
	}
	m.takeNodeLocked(p, node, &fx)
	gpuIDs := m.ledger.chooseGPUs(node, p.uid, p.requests.GPU)
	m.ledger.startBinding(node, p.requests)
	m.ledger.startQueueBinding(p)
	m.mu.Unlock()
	m.apply(&fx)
	err := m.binder.Bind(ctx, p.namespace, p.name, p.uid, node, gpuIDs)
	m.metrics.observeBind(kind, err)
	m.mu.Lock()
	defer m.mu.Unlock()
	m.ledger.endBinding(node, p.requests)
	m.ledger.endQueueBinding(p)
	if err != nil {
		m.ledger.unchooseGPUs(node, p.uid, gpuIDs)
		return fmt.Errorf("binding pod %s to node %s: %w", p.key(), node, err)
	}
	if cur, ok := m.ledger.pods[p.uid]; ok {
		m.ledger.markBound(cur, node, gpuIDs)
	}
	return nil
}
