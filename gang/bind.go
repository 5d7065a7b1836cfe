package gang

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/lockstep-sched/lockstep/decide"
	"github.com/lockstep-sched/lockstep/gangspec"
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
	var d bindDecision
	m.locked(func() { d = m.decideBindLocked(p, node) })
	switch {
	case d.err != nil || d.done:
		return d.err
	case d.held == nil:
		return m.bindNow(ctx, d.pod, node, "ordinary")
	}
	return d.held.await(ctx)
}

// bindDecision is what Bind does with a pod: nothing (done, or refused with err), bind it at once,
// or hold it for its gang's quorum.
type bindDecision struct {
	pod  *podInfo
	done bool
	err  error
	held *heldBind
}

// heldBind is a gang member's bind waiting for its gang's commit, at most wait; it reads what the
// commit writes under mu, the manager's lock.
type heldBind struct {
	pod  *podInfo
	gang *gangInfo
	res  *reservation
	slot *slot
	node string
	wait time.Duration
	mu   *sync.RWMutex
	// devices: the pod's GPUs are DRA devices, which only the scheduler's cycle reserves for it
	// (ledger.usesDevices): lockstep cannot bind it outside a bind call.
	devices bool
}

// decideBindLocked decides what Bind does, and for a held member counts it toward quorum,
// starting the commit when it completes the quorum.
func (m *Manager) decideBindLocked(p *podInfo, node string) bindDecision {
	if cur, ok := m.ledger.pods[p.UID]; ok {
		p = cur // an informer update may have replaced the record since the lookup
	}
	if p.Node != "" && p.Node == node {
		return bindDecision{done: true} // lockstep bound it already, from its reservation
	}
	if p.Node != "" {
		return bindDecision{err: fmt.Errorf("pod %s is already bound to node %s", p.Key(), p.Node)}
	}
	g := m.ledger.gangOf(p)
	switch {
	case g == nil:
		return bindDecision{pod: p}
	case p.Spec == nil:
		return bindDecision{err: fmt.Errorf("gang %s: pod %s cannot bind before its gang's rules are known: %v", g.key, p.Key(), p.SpecErr)}
	case g.view().Satisfied(p.Spec):
		return bindDecision{pod: p}
	}
	res := m.book.reserving(g.key)
	var s *slot
	if res != nil {
		s = res.slotOf(p.UID)
	}
	if s == nil {
		return bindDecision{err: fmt.Errorf("gang %s: pod %s holds no reservation (it expired or was never made); the scheduler retries the pod and lockstep plans the gang again", g.key, p.Key())}
	}
	if s.node != node {
		return bindDecision{err: fmt.Errorf("gang %s: pod %s is reserved on node %s, not %s", g.key, p.Key(), s.node, node)}
	}
	if s.state == decide.SlotReserved {
		s.state = decide.SlotWaiting
		res.changed()
	}
	if ready := ready(g, p.Spec, res); res.state == decide.Reserving && ready.Meets(p.Spec) {
		m.quorumReadyLocked(g, res, p.Spec)
	} else if res.state == decide.Reserving {
		g.lastReason = fmt.Sprintf("gang %s: %s; binds held until quorum or %s", g.key, ready.ReadyWords(p.Spec), res.expires.UTC().Format("15:04:05"))
	}
	return bindDecision{held: &heldBind{pod: p, gang: g, res: res, slot: s, node: node, wait: m.cfg.BindWait, mu: &m.mu,
		devices: m.ledger.usesDevices(p, node)}}
}

// await holds a member's bind until its gang's commit settles it, BindWait passes, the
// reservation expires before quorum, or the scheduler gives up on the call.
func (h *heldBind) await(ctx context.Context) error {
	hold := time.NewTimer(h.wait)
	defer hold.Stop()
	expiry := time.NewTimer(time.Until(h.res.expires))
	defer expiry.Stop()
	expired := expiry.C
	for {
		select {
		case <-h.res.done:
			return h.outcome()
		case <-hold.C:
			return h.stillHeld()
		case <-expired:
			if !h.committing() {
				return fmt.Errorf("gang %s: reservation expired before quorum; pod %s is not bound", h.gang.key, h.pod.Key())
			}
			// The quorum arrived in time; the commit decides this pod's fate.
			expired = nil
		case <-ctx.Done():
			return fmt.Errorf("gang %s: bind of %s abandoned: %w", h.gang.key, h.pod.Key(), ctx.Err())
		}
	}
}

func (h *heldBind) committing() bool {
	h.mu.RLock()
	defer h.mu.RUnlock()
	return h.res.state == decide.Committing
}

// stillHeld is the answer to a bind held for BindWait: the pod keeps its place. A pod of DRA
// devices stops counting toward the quorum until its next bind: when this call answers, the
// scheduler takes back its reservation of the pod's claims, which a binding lockstep made alone
// would leave unreserved.
func (h *heldBind) stillHeld() error {
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.res.state == decide.Committing {
		return fmt.Errorf("gang %s: quorum reached, bindings still being written after %s; the scheduler's retry finds pod %s bound", h.gang.key, h.wait, h.pod.Key())
	}
	spec := h.pod.Spec
	ready := ready(h.gang, spec, h.res)
	status := fmt.Sprintf("%s after %s", ready.ReadyWords(spec), h.wait)
	if ready.Meets(spec) {
		status = "its quorum is ready, its gang group's is not: " + h.gang.bundleWait
	}
	if h.devices {
		if h.slot.state == decide.SlotWaiting {
			h.slot.state = decide.SlotReserved
			h.res.changed()
		}
		return fmt.Errorf("gang %s: %w: %s; pod %s keeps its reservation on %s and binds when it comes back with the quorum (its devices are allocated in the scheduler's cycle)",
			h.gang.key, ErrAwaitingQuorum, status, h.pod.Key(), h.node)
	}
	return fmt.Errorf("gang %s: %w: %s; pod %s keeps its reservation on %s and lockstep binds it when the quorum arrives",
		h.gang.key, ErrAwaitingQuorum, status, h.pod.Key(), h.node)
}

// outcome is the answer to a held bind once its reservation was released.
func (h *heldBind) outcome() error {
	h.mu.RLock()
	defer h.mu.RUnlock()
	switch {
	case h.slot.state == decide.SlotBound:
		return nil
	case h.slot.state == decide.SlotFailed:
		return fmt.Errorf("gang %s: binding %s to %s failed: %w", h.gang.key, h.pod.Key(), h.node, h.slot.err)
	case h.res.yieldedTo != "":
		return fmt.Errorf("gang %s: reservation given up to higher-priority %s; pod %s is not bound, and its gang plans again", h.gang.key, h.res.yieldedTo, h.pod.Key())
	case h.res.expired:
		return fmt.Errorf("gang %s: reservation expired before quorum; pod %s is not bound", h.gang.key, h.pod.Key())
	default:
		return fmt.Errorf("gang %s: reservation released before pod %s was bound; the scheduler retries it", h.gang.key, h.pod.Key())
	}
}

func (m *Manager) lookupPod(ctx context.Context, namespace, name string, uid types.UID) (*podInfo, error) {
	var p *podInfo
	m.reading(func() { p = m.ledger.pods[uid] })
	if p != nil {
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

// ready is the tally a reservation's commit waits for: the members waiting at bind plus those that
// count already.
func ready(g *gangInfo, spec *gangspec.Spec, res *reservation) decide.Tally {
	t := g.view().Counted(spec)
	for _, s := range res.slots {
		if s.state == decide.SlotWaiting {
			waiting := s.pod.Pod
			t.Add(&waiting)
		}
	}
	return t
}

// bindNow binds a pod that need not wait for anyone, with the GPUs chosen for it.
func (m *Manager) bindNow(ctx context.Context, p *podInfo, node, kind string) error {
	var fx effects
	var gpuIDs []int
	var refused error
	m.locked(func() {
		// Checked again here, where binds are counted as they start: pods the scheduler
		// filtered together each saw the queue before the others' binds.
		if m.ledger.quota.Enforcing() {
			if why := m.snapshots.queues().PodWait(p.Namespace, p.Name, p.Queue, p.Requests); why != "" {
				refused = errors.New(why)
				return
			}
		}
		m.takeNodeLocked(p, node, &fx)
		gpuIDs = m.ledger.chooseGPUs(node, p.UID, p.Requests.GPU)
		m.ledger.startBinding(p, node)
	})
	if refused != nil {
		return refused
	}
	m.emit(&fx)
	err := m.binder.Bind(ctx, p.Namespace, p.Name, p.UID, node, gpuIDs)
	m.metrics.observeBind(kind, err)
	m.mu.Lock()
	defer m.mu.Unlock()
	m.ledger.endBinding(p, node)
	if err != nil {
		m.ledger.unchooseGPUs(node, p.UID, gpuIDs)
		return fmt.Errorf("binding pod %s to node %s: %w", p.Key(), node, err)
	}
	if cur, ok := m.ledger.pods[p.UID]; ok {
		m.ledger.markBound(cur, node, gpuIDs)
	}
	return nil
}

// takeNodeLocked makes room on node for p, about to bind there: filter let it pass lower-priority
// reservations, and here they are given up, lowest priority first, until p fits beside what stays
// held.
func (m *Manager) takeNodeLocked(p *podInfo, node string, fx *effects) {
	n := m.ledger.nodes[node]
	if n == nil || m.book.empty() {
		return
	}
	rs, live := m.book.view(true)
	for _, gang := range decide.TakeNode(rs, n.view(), p.Gang, p.Priority, p.Requests) {
		m.yieldLocked(live[gang], "pod "+p.Key(), p.Priority, fx)
	}
}
