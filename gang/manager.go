package gang

import (
	"context"
	"fmt"
	"slices"
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/tools/record"

	"github.com/lockstep-sched/lockstep/decide"
	"github.com/lockstep-sched/lockstep/dra"
	"github.com/lockstep-sched/lockstep/fabric"
	"github.com/lockstep-sched/lockstep/gangspec"
	"github.com/lockstep-sched/lockstep/wellknown"
)

// Binder writes a pod's binding to the apiserver. gpuIDs, when not empty, are the GPU indices
// lockstep chose for the pod; they reach the pod (wellknown.AnnotationGPUIDs) with the binding
// itself, so they are in place when the pod starts on the node. Bind returns nil only when the
// apiserver confirmed the pod bound to node: lockstep's record of the cluster follows that answer,
// so a nil for a binding that did not happen would refuse the pod's every retry. Errors wrap
// ErrPodGone or ErrBoundElsewhere when no retry can help.
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
	// Evicter, when set, lets a gang whose quorum does not fit evict lower-priority pods (whole
	// gangs or ordinary pods) for it; nil turns gang preemption off.
	Evicter Evicter
	// NoPriorityPreemption keeps gangs from evicting lower-priority pods while Evicter is set for
	// QueueReclaim alone.
	NoPriorityPreemption bool
	// NoExtrasTakeBack keeps a gang waiting for its quorum from evicting members beyond their
	// own gang's quorum (package decide); with Evicter nil nothing is evicted anyway.
	NoExtrasTakeBack bool
	// QueueReclaim lets a gang whose team queue is below its fair share take capacity back from
	// queues above theirs (package decide); it needs Evicter.
	QueueReclaim bool
	// StarvationThreshold is how long a gang whose quorum fits the cluster's capacity may wait
	// for free capacity before lockstep holds capacity for it as it frees (package decide); 0 turns
	// the rule off.
	StarvationThreshold time.Duration
	// Tiers are the network tiers between nodes, narrowest first (package fabric): a gang's
	// quorum goes to the narrowest single domain that holds it. nil places by nodes alone.
	Tiers fabric.Tiers
	// ScoreEveryNode turns the shortlist off (filter.go): filter then passes an ordinary GPU
	// pod every node it fits, and lockstep's packing only adds to the scheduler's scores.
	ScoreEveryNode bool
	// Reader tells gang members from ordinary pods and reads their rules (package dialect); nil
	// makes every pod ordinary.
	Reader gangspec.Reader
	// OnGangChange, when set, is called with a gang's key after lockstep's view of the gang
	// changed (members, rules, reservation, commit), outside the manager's lock; it must not
	// block. Package podgroup uses it to keep group objects' status current.
	OnGangChange func(gang string)
	// OnQueuesChange, when set, is called after a team queue was defined, changed or deleted,
	// outside the manager's lock; it must not block. Package podgroup looks at every group
	// object again: one waiting for its queue may go Inqueue now.
	OnQueuesChange func()
	// Nominator, when set, writes the nominated node of members lockstep holds a place for
	// (apply.go); nil nominates nothing.
	Nominator Nominator
	// GPUClasses name the DeviceClasses whose devices count as GPUs beside those that serve
	// nvidia.com/gpu (package dra); nil for dra.DefaultGPUClasses.
	GPUClasses []string
	// ClaimReleaser, when set, gives back the devices a waiting gang member's claims were
	// allocated once no reservation holds the member (releases.go); nil leaves them allocated.
	ClaimReleaser ClaimReleaser
	// GatherWait is how long past the latest arrival of a gang's member a member lacking only
	// the rest of its gang waits at filter for the next (filter.go, gathering); 0 turns waiting off.
	GatherWait time.Duration
}

const (
	DefaultWaitingTime   = 2 * time.Minute
	DefaultBindWait      = 4 * time.Second
	DefaultCommitTimeout = 30 * time.Second
	// DefaultStarvationThreshold: five minutes is long past a healthy cluster's churn (pods
	// binding in seconds) and short beside the hours a training job runs.
	DefaultStarvationThreshold = 5 * time.Minute
	// DefaultGatherWait is several times the gap between the pods an operator creates one after
	// another on a healthy apiserver (a few milliseconds each), and short beside a scheduling
	// cycle's worth of other pods.
	DefaultGatherWait = 30 * time.Millisecond
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

// Manager answers the scheduler's verbs and takes in what the informers and the group and queue
// watchers report. It owns the lock and the live state, and every change to that state goes
// through it in one shape: lock, bring the snapshot up to date, decide (package decide, on the
// snapshot), apply the decision (applyAdmissionLocked and its kind), unlock, emit the effects
// (Events, pod conditions, evictions, nominations) collected meanwhile.
//
// One lock guards the ledger and the book: a gang's admission decision reads every node and every
// other gang's reservation, and two gangs deciding at once on the same free capacity is exactly
// the deadlock lockstep exists to prevent. Filter of ordinary pods only reads, under the shared
// lock.
type Manager struct {
	cfg      Config
	rules    decide.Rules
	binder   Binder
	getPod   PodGetter
	recorder record.EventRecorder
	metrics  *Metrics
	now      func() time.Time
	stop     chan struct{}
	stopOnce sync.Once

	mu          sync.RWMutex
	ledger      *ledger
	book        *reservationBook
	snapshots   *snapshots
	wake        *waker
	nominations *nominations
	// evictRefused is when each pod's eviction was last refused (decide.EvictRefusedFor).
	evictRefused map[types.UID]time.Time
	// strandedLook is when wakeStrandedLocked last looked.
	strandedLook time.Time
}

// NewManager builds a manager. recorder and metrics may be nil.
func NewManager(cfg Config, binder Binder, getPod PodGetter, recorder record.EventRecorder, metrics *Metrics) *Manager {
	if recorder == nil {
		recorder = &record.FakeRecorder{}
	}
	cfg = cfg.withDefaults()
	m := &Manager{
		cfg:      cfg,
		binder:   binder,
		getPod:   getPod,
		recorder: recorder,
		metrics:  metrics,
		now:      time.Now,
		stop:     make(chan struct{}),
		ledger:   newLedger(cfg.Reader, cfg.Tiers),

		evictRefused: map[types.UID]time.Time{},
	}
	if cfg.GPUClasses != nil {
		m.ledger.devices = dra.NewInventory(cfg.GPUClasses)
	}
	m.rules = decide.Rules{DefaultWaitingTime: cfg.DefaultWaitingTime, StarvationThreshold: cfg.StarvationThreshold,
		Tiers: cfg.Tiers, MayEvict: cfg.Evicter != nil, NoPriorityPreemption: cfg.NoPriorityPreemption,
		NoExtrasTakeBack: cfg.NoExtrasTakeBack, QueueReclaim: cfg.QueueReclaim}
	m.nominations = &nominations{ledger: m.ledger, to: cfg.Nominator}
	m.book = newReservationBook(m.onExpired, m.nominations.withdrawReleased)
	m.snapshots = &snapshots{ledger: m.ledger, book: m.book, rules: m.rules, now: func() time.Time { return m.now() },
		evictRefused: m.evictRefused, snap: newSnapshot(), live: map[string]*reservation{}}
	m.wake = newWaker(m.ledger, m.book, metrics)
	go m.sweepExpired()
	go m.wake.conditions.run(m.stop)
	return m
}

// locked runs decide under the manager's lock, and lets go of the lock even when decide panics:
// net/http recovers a handler's panic, and a lock left taken would hang every verb after it.
func (m *Manager) locked(decide func()) {
	m.mu.Lock()
	defer m.mu.Unlock()
	decide()
}

// reading runs read under the manager's shared lock, as locked does under the lock.
func (m *Manager) reading(read func()) {
	m.mu.RLock()
	defer m.mu.RUnlock()
	read()
}

// Stop ends the manager's background sweep and condition writes; the manager answers calls no
// longer reliably after.
func (m *Manager) Stop() { m.stopOnce.Do(func() { close(m.stop) }) }

// --- informer input -------------------------------------------------------------------------

// UpsertNode records a node's capacity and GPU topology, and reports a topology annotation that
// became invalid.
func (m *Manager) UpsertNode(node *corev1.Node) {
	var fx effects
	m.locked(func() {
		var before error
		if n, ok := m.ledger.nodes[node.Name]; ok {
			before = n.topoErr
		}
		m.ledger.upsertNode(node)
		fx.topologyProblem(m.ledger.nodes[node.Name], node, before)
	})
	m.emit(&fx)
}

// DeleteNode forgets a node's capacity.
func (m *Manager) DeleteNode(name string) {
	m.locked(func() {
		m.ledger.deleteNode(name)
		// A starving gang's hold waits for capacity to free on its nodes; on a node gone it never
		// would. Let it go: the next sweep plans the gang's hold afresh on the nodes there are.
		if h := m.book.hold(m.book.holder()); h != nil && slices.ContainsFunc(h.slots, func(s *slot) bool { return s.node == name }) {
			m.book.release(h)
		}
	})
}

// UpsertPod records a pod's latest version.
func (m *Manager) UpsertPod(pod *corev1.Pod) {
	m.upsertInfo(newPodInfo(pod, m.ledger.read))
}

// upsertInfo takes in a pod's summary. A member's first arrival wakes a gang that turned members
// away for lack of members; a member the scheduler turned away has its gang's wait recorded.
func (m *Manager) upsertInfo(info *podInfo) *podInfo {
	var fx effects
	var p *podInfo
	m.locked(func() {
		prev, known := m.ledger.pods[info.UID]
		turnedAway := info.condition != "" && (!known || prev.condition != info.condition)
		p = m.ledger.upsertInfo(info)
		if g := m.ledger.gangOf(p); g != nil && !known && !p.Terminal {
			m.memberArrivedLocked(p, g, &fx)
		}
		if turnedAway {
			m.noteTurnedAwayLocked(p, &fx)
		}
	})
	m.emit(&fx)
	return p
}

// memberArrivedLocked wakes a gang that turned members away for lack of members, now that one
// more exists: its oldest waiting member comes back to filter and plans the quorum.
func (m *Manager) memberArrivedLocked(p *podInfo, g *gangInfo, fx *effects) {
	g.arrivals.noteArrival(m.now())
	if !g.lackedMembers {
		return
	}
	g.lackedMembers = false
	m.wake.gang(g, wellknown.ConditionReasonMemberArrived, fmt.Sprintf("member %s was created; gang %s is being planned again", p.Key(), g.key), fx)
}

// DeletePod forgets a pod. A departed member's slot goes back to its gang's pool, and a gang left
// with no members gives its reservation up at once.
func (m *Manager) DeletePod(uid types.UID) {
	var fx effects
	m.locked(func() {
		p := m.ledger.deletePod(uid, m.now())
		if p == nil {
			return
		}
		if g := m.ledger.gangOf(p); g != nil {
			m.memberLeftLocked(g, uid, &fx)
		}
	})
	m.emit(&fx)
}

// memberLeftLocked gives the slot of a departed member back to its gang's pool, and forgets a
// gang left with no members along with its reservation.
func (m *Manager) memberLeftLocked(g *gangInfo, uid types.UID, fx *effects) {
	if res := m.book.hold(g.key); res != nil && len(g.members) == 0 {
		m.book.release(res)
	}
	if res := m.book.live(g.key); res != nil && res.state == decide.Reserving {
		res.unclaim(uid)
		if len(g.members) == 0 {
			m.book.release(res)
			m.wake.capacityFreed(g.key, fx)
		}
	} else if res != nil && res.state == decide.Committing {
		// A binding for a pod that is gone can only fail; stop it rather than spend the
		// commit's time and the client's rate limit retrying it.
		if s := res.slotOf(uid); s != nil && s.cancel != nil {
			s.cancel()
		}
	}
	if len(g.members) == 0 {
		m.ledger.forgetGang(g.key)
		m.ledger.quota.Unwant(g.key)
	}
}

// GroupRules is what a group object (a PodGroup) says about its gang, as package dialect read it.
type GroupRules struct {
	// Key is the name pods' markers give the object (gangspec.Membership.Group).
	Key string
	// Namespace and Name are the gang's.
	Namespace, Name string
	// Spec is the gang's rules; Err, when set, is why the object is unusable: its members are
	// refused with it.
	Spec *gangspec.Spec
	Err  error
}

// SetGroup records a group object's rules for the members that name it. Members waiting for the
// object to exist are woken so that the scheduler tries them again now.
func (m *Manager) SetGroup(r GroupRules) {
	m.updateGroup(r, true)
}

// DeleteGroup forgets a group object; its members wait for it again.
func (m *Manager) DeleteGroup(key, namespace, name string) {
	m.updateGroup(GroupRules{Key: key, Namespace: namespace, Name: name}, false)
}

func (m *Manager) updateGroup(r GroupRules, exists bool) {
	var fx effects
	gangKey := r.Namespace + "/" + r.Name
	m.locked(func() {
		if g := m.ledger.setGroup(r.Key, gangKey, groupRules{r.Spec, r.Err}, exists); g != nil && exists {
			m.wake.gang(g, wellknown.ConditionReasonRulesChanged, r.Key+" was created or changed; gang "+gangKey+" is being planned again", &fx)
		}
	})
	fx.touched(gangKey)
	m.emit(&fx)
}
