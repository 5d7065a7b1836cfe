package gang

import (
	"context"
	"fmt"
	"sync"
	"time"

	gocache "github.com/patrickmn/go-cache"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/tools/record"
	"k8s.io/klog/v2"

	"github.com/lockstep-sched/lockstep/wellknown"
)

// Binder writes a pod's binding to the apiserver. gpuIDs, when not empty, are the GPU indices
// lockstep chose for the pod; they reach the pod (wellknown.AnnotationGPUIDs) with the binding itself, so
// they are in place when the pod starts on the node. Bind returns nil only when the apiserver
// confirmed the pod bound to node: lockstep's record of the cluster follows that answer, so a nil
// for a binding that did not happen would refuse the pod's every retry. Errors wrap ErrPodGone
// or ErrBoundElsewhere when no retry can help.
type Binder interface {
	Bind(ctx context.Context, namespace, name string, uid types.UID, node string, gpuIDs []int) error
}

// PodGetter fetches a pod lockstep has not seen through its informer yet.
type PodGetter func(ctx context.Context, namespace, name string) (*corev1.Pod, error)

// Config holds the manager's tunables; zero fields take the defaults below.
type Config struct {
	// DefaultWaitingTime is how long a gang's reservation lives when its pods do not say.
	DefaultWaitingTime time.Duration
	// BindWait is how long a gang member's bind call is held waiting for quorum before it answers
	// with an error (the scheduler then retries the pod; its reservation stays).
	BindWait time.Duration
	// CommitTimeout bounds how long lockstep keeps retrying the bindings of a committing gang.
	CommitTimeout time.Duration
	// ExpiryCheckInterval is how often expired reservations are swept to mark their gangs TimedOut.
	ExpiryCheckInterval time.Duration
}

const (
	DefaultWaitingTime   = 2 * time.Minute
	DefaultBindWait      = 4 * time.Second
	DefaultCommitTimeout = 30 * time.Second
)

func (c Config) withDefaults() Config {
	if c.DefaultWaitingTime <= 0 {
		c.DefaultWaitingTime = DefaultWaitingTime
	}
	if c.BindWait <= 0 {
		c.BindWait = DefaultBindWait
	}
	if c.CommitTimeout <= 0 {
		c.CommitTimeout = DefaultCommitTimeout
	}
	if c.ExpiryCheckInterval <= 0 {
		c.ExpiryCheckInterval = time.Second
	}
	return c
}

// Manager holds gang state and answers the scheduler's verbs. One lock guards all of it: a gang's
// admission decision reads every node and every other gang's reservation, and two gangs deciding at
// once on the same free capacity is exactly the deadlock lockstep exists to prevent. Filter of
// ordinary pods only reads, under the shared lock.
type Manager struct {
	cfg      Config
	binder   Binder
	getPod   PodGetter
	recorder record.EventRecorder
	metrics  *Metrics
	now      func() time.Time
	// conditions, when set, writes wellknown.ConditionGangScheduled (see conditions.go); guarded by mu.
	conditions ConditionWriter
	// conditionQueue feeds writeQueuedConditions.
	conditionQueue chan queuedWrite
	stop           chan struct{}
	stopOnce       sync.Once

	mu    sync.RWMutex
	state *state
	// reservations maps a gang key to its *reservation. go-cache hides an expired entry from Get
	// and Items the moment it expires, so expired capacity is free for others at once;
	// sweepExpired then reports the eviction and the gang is marked TimedOut.
	reservations *gocache.Cache
}

// NewManager builds a manager. recorder and metrics may be nil.
func NewManager(cfg Config, binder Binder, getPod PodGetter, recorder record.EventRecorder, metrics *Metrics) *Manager {
	cfg = cfg.withDefaults()
	if recorder == nil {
		recorder = &record.FakeRecorder{}
	}
	m := &Manager{
		cfg:      cfg,
		binder:   binder,
		getPod:   getPod,
		recorder: recorder,
		metrics:  metrics,
		now:      time.Now,
		state:    newState(),
		// No janitor of go-cache's own: it would hold the eviction callback, and with it the
		// manager, for the life of the process. sweepExpired runs until Stop.
		reservations:   gocache.New(gocache.NoExpiration, 0),
		conditionQueue: make(chan queuedWrite, conditionQueueSize),
		stop:           make(chan struct{}),
	}
	// go-cache calls this without its own lock but possibly while the caller of Delete holds ours,
	// so the work happens on another goroutine.
	m.reservations.OnEvicted(func(key string, v any) { go m.onEvicted(key, v.(*reservation)) })
	go m.sweepExpired()
	go m.writeQueuedConditions()
	return m
}

// sweepExpired evicts expired reservations every ExpiryCheckInterval, which reports them through
// OnEvicted; their capacity is free from the moment they expire regardless.
func (m *Manager) sweepExpired() {
	tick := time.NewTicker(m.cfg.ExpiryCheckInterval)
	defer tick.Stop()
	for {
		select {
		case <-tick.C:
			m.reservations.DeleteExpired()
		case <-m.stop:
			return
		}
	}
}

// Stop ends the manager's background sweep and condition writes; the manager answers calls no
// longer reliably after.
func (m *Manager) Stop() { m.stopOnce.Do(func() { close(m.stop) }) }

// --- informer input -------------------------------------------------------------------------

// UpsertNode records a node's capacity and GPU topology, and reports a topology annotation that
// became invalid.
func (m *Manager) UpsertNode(node *corev1.Node) {
	m.mu.Lock()
	defer m.mu.Unlock()
	var before error
	if n, ok := m.state.nodes[node.Name]; ok {
		before = n.topoErr
	}
	m.state.upsertNode(node)
	m.reportTopologyLocked(node, before)
}

// DeleteNode forgets a node's capacity.
func (m *Manager) DeleteNode(name string) {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.state.deleteNode(name)
}

// UpsertPod records a pod's latest version.
func (m *Manager) UpsertPod(pod *corev1.Pod) {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.state.upsertPod(pod)
}

// DeletePod forgets a pod. A departed member's slot goes back to its gang's pool, and a gang left
// with no members gives its reservation up at once.
func (m *Manager) DeletePod(uid types.UID) {
	m.mu.Lock()
	writes, writer := m.deletePodLocked(uid)
	m.mu.Unlock()
	m.writeConditions(writer, writes)
}

func (m *Manager) deletePodLocked(uid types.UID) ([]conditionWrite, ConditionWriter) {
	p := m.state.deletePod(uid)
	if p == nil {
		return nil, nil
	}
	key := gangKeyOf(p)
	g, ok := m.state.gangs[key]
	if !ok {
		return nil, nil
	}
	var writes []conditionWrite
	if res := m.liveReservation(key); res != nil && res.state == reserving {
		res.unclaim(uid)
		if len(g.members) == 0 {
			m.releaseLocked(res)
			writes = m.capacityFreedLocked(key)
		}
	} else if res != nil && res.state == committing {
		// A binding for a pod that is gone can only fail; stop it rather than spend the
		// commit's time and the client's rate limit retrying it.
		if s := res.slotOf(uid); s != nil && s.cancel != nil {
			s.cancel()
		}
	}
	if len(g.members) == 0 {
		delete(m.state.gangs, key)
	}
	return writes, m.conditions
}

// --- reservations ---------------------------------------------------------------------------

func (m *Manager) liveReservation(gang string) *reservation {
	v, ok := m.reservations.Get(gang)
	if !ok {
		return nil
	}
	res := v.(*reservation)
	if res.state == released {
		return nil
	}
	return res
}

// reservedByNode sums what live reservations hold per node, leaving out one gang's own (its
// members may use what their gang holds). heldByGang gives the same per gang, for reasons.
func (m *Manager) reservedByNode(excludeGang string) (byNode map[string]Resources, byGang map[string]Resources) {
	byNode, byGang = map[string]Resources{}, map[string]Resources{}
	for key, item := range m.reservations.Items() {
		res := item.Object.(*reservation)
		if key == excludeGang || res.state == released {
			continue
		}
		for _, s := range res.slots {
			if s.holdsCapacity() {
				byNode[s.node] = byNode[s.node].Add(s.requests)
				byGang[key] = byGang[key].Add(s.requests)
			}
		}
	}
	return byNode, byGang
}

// releaseLocked drops a reservation without a commit and wakes its waiting binds.
func (m *Manager) releaseLocked(res *reservation) {
	if res.state == released {
		return
	}
	res.state = released
	m.reservations.Delete(res.gang)
	close(res.done)
}

// onEvicted runs when sweepExpired drops an expired reservation (or after our own Delete, which it
// then ignores because the reservation is already released).
func (m *Manager) onEvicted(key string, res *reservation) {
	m.mu.Lock()
	writes, writer := m.expireLocked(key, res)
	m.mu.Unlock()
	m.writeConditions(writer, writes)
}

func (m *Manager) expireLocked(key string, res *reservation) ([]conditionWrite, ConditionWriter) {
	if res.state != reserving {
		return nil, nil
	}
	res.state = released
	res.expired = true
	close(res.done)
	g, ok := m.state.gangs[key]
	if !ok {
		return nil, nil
	}
	ready := res.countState(slotWaiting) + g.boundCount()
	g.timedOut, g.timedOutAt = true, m.now()
	g.lastReason = fmt.Sprintf("gang %s: reservation expired after %s with %d of %d members ready to bind; capacity released, the gang plans again when a member is retried",
		key, res.expires.Sub(res.created).Round(time.Second), ready, g.minAvailable())
	klog.InfoS("Gang reservation expired", "gang", key, "ready", ready)
	writes := m.capacityFreedLocked(key)
	for _, p := range g.sortedMembers() {
		m.eventLocked(p, corev1.EventTypeWarning, wellknown.ReasonGangTimedOut, g.lastReason)
		if !p.holds() && !p.terminal {
			writes = append(writes, conditionWrite{p.namespace, p.name, corev1.PodCondition{
				Type: wellknown.ConditionGangScheduled, Status: corev1.ConditionFalse, Reason: wellknown.ConditionReasonTimedOut, Message: g.lastReason,
			}})
		}
	}
	return writes, m.conditions
}

// --- events ---------------------------------------------------------------------------------

// eventLocked emits an event unless the same one was the last emitted on this pod: the scheduler
// retries a waiting pod every few seconds and one line per change is what a reader wants.
func (m *Manager) eventLocked(p *podInfo, eventType, reason, message string) {
	key := reason + "\x00" + message
	if p.lastEvent == key {
		return
	}
	p.lastEvent = key
	m.recorder.Event(p.ref(), eventType, reason, message)
}

func (g *gangInfo) minAvailable() int {
	if spec, _ := g.reference(); spec != nil {
		return spec.MinAvailable
	}
	return 0
}
