package gang

import (
	"context"
	"encoding/json"
	"fmt"
	"slices"
	"strings"
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/kubernetes"
	"k8s.io/klog/v2"

	"github.com/lockstep-sched/lockstep/decide"
	"github.com/lockstep-sched/lockstep/wellknown"
)

// Applying a decision. package decide says what to do, reading the snapshot; the functions here
// make it true in the live state (the ledger, the book, the gang's record) and collect the effects
// (below) to emit once the lock is let go. They expect the manager's lock held for writing.

// applyAdmissionLocked makes an admission true for member p of gang g: it gives the member its
// place in the gang's live reservation, or books the new reservation (taking over the
// reservations it yields to and marking the pods it evicts), or books a starving gang's hold; and
// it records why the gang waits.
func (m *Manager) applyAdmissionLocked(p *podInfo, g *gangInfo, a decide.Admission, fx *effects) {
	if a.Join || a.Slot >= 0 {
		m.takePlaceLocked(p, g, a)
	}
	switch {
	case a.Wait != "":
		g.lastReason = a.Wait
		g.attempts++
		g.lackedMembers = g.lackedMembers || a.LacksMembers
		g.turnedAway = m.now()
		if a.Hold != nil {
			m.holdLocked(g, a.Hold, a.Wait)
		}
		if !a.Want.IsZero() {
			m.ledger.want(g.key, p.Queue, a.Want)
		}
		fx.podEvent(p, corev1.EventTypeWarning, wellknown.ReasonGangWaiting, a.Wait)
	case a.Reserve != nil:
		m.reserveLocked(p, g, a, fx)
	}
}

// takePlaceLocked gives the member its place in its gang's live reservation: the slot decided,
// or a new one beyond the plan (Join), moved to the node decided.
func (m *Manager) takePlaceLocked(p *podInfo, g *gangInfo, a decide.Admission) {
	res := m.snapshots.live[g.key]
	var s *slot
	if a.Join {
		s = &slot{plannedFor: p.UID, node: a.Node, requests: p.Requests, state: decide.SlotPlanned}
		res.slots = append(res.slots, s)
		res.changed()
	} else {
		s = res.slots[a.Slot]
	}
	if s.state == decide.SlotPlanned {
		if s.plannedFor != p.UID {
			// Another member takes the place: the one it was planned for is no longer expected
			// there.
			m.nominations.withdraw(s)
		}
		res.take(s, p)
	}
	if a.Node != "" && a.Node != s.node {
		// Moved only while reserved: a committing binding reads its slot's node unlocked.
		s.node = a.Node
		res.changed()
		m.nominations.withdraw(s)
	}
}

// reserveLocked books the gang's new reservation for its quorum, with what it takes over and
// evicts.
func (m *Manager) reserveLocked(p *podInfo, g *gangInfo, a decide.Admission, fx *effects) {
	r := newReservation(a.Reserve, p)
	for _, y := range a.Yield {
		if taken := m.snapshots.live[y.Gang]; taken != nil {
			m.yieldLocked(taken, "gang "+g.key, r.priority, fx)
		}
	}
	if h := m.book.hold(g.key); h != nil {
		m.book.release(h) // the quorum fits: the hold has done its job
	}
	m.book.add(r, r.expires.Sub(r.created))
	m.ledger.quota.Unwant(g.key)
	// Should this reservation go without binding, the gang waits again from now.
	h := g.History
	h.TimedOut, h.WaitingSince = false, r.created
	m.ledger.setHistory(g, h)
	g.reservation, g.takenBy = r, ""
	g.arrivals.gathered = 0 // should it lack members again, it may gather again
	g.lastReason = a.Reserved
	klog.V(2).InfoS("Gang reserved", "gang", g.key, "slots", len(r.slots), "expires", r.expires)
	fx.podEvent(p, corev1.EventTypeNormal, wellknown.ReasonGangReserved, g.lastReason)
	if len(a.Evict) > 0 {
		m.preemptLocked(g, r, a, fx)
		return
	}
	// Not while evicting: nominated to nodes still taken by the pods going, members would fail
	// there first and then filter every node anyway. Nor recalled: the victims' deletions bring
	// them back.
	m.nominations.nominate(r)
	m.wake.noteParked(r)
}

// holdLocked books a starving gang's hold; reason is why the gang waits, the hold included.
func (m *Manager) holdLocked(g *gangInfo, plan *decide.Reservation, reason string) {
	res := newReservation(plan, nil)
	m.book.add(res, res.expires.Sub(res.created))
	g.lastReason = reason
	klog.InfoS("Starving gang holds capacity", "gang", g.key, "slots", len(res.slots), "waited", m.now().Sub(g.view().WaitedSince()))
}

// yieldLocked releases a reservation to higher-priority work (taker, at priority): its held binds
// fail saying who took the capacity, its members are told, and its gang plans again.
func (m *Manager) yieldLocked(r *reservation, taker string, priority int32, fx *effects) {
	r.yieldedTo = fmt.Sprintf("%s (priority %d)", taker, priority)
	m.book.release(r)
	m.metrics.observeYield()
	g, ok := m.ledger.gangs[r.gang]
	if !ok {
		return
	}
	fx.touched(g.key)
	g.takenBy = fmt.Sprintf("%s, at %s", r.yieldedTo, m.now().UTC().Format("15:04:05"))
	g.lastReason = fmt.Sprintf("gang %s: its reservation (priority %d) was given up to higher-priority %s; it plans again",
		g.key, r.priority, r.yieldedTo)
	klog.InfoS("Gang reservation yielded", "gang", g.key, "priority", r.priority, "to", r.yieldedTo)
	for _, p := range g.sortedMembers() {
		if !p.Holds() && !p.Terminal {
			fx.podEvent(p, corev1.EventTypeWarning, wellknown.ReasonGangReservationYielded, g.lastReason)
		}
	}
	m.wake.gang(g, wellknown.ConditionReasonReservationYielded, g.lastReason, fx)
}

// preemptLocked records a preemption the gang's new reservation r depends on: the reasons, the
// Events naming victims and preemptor to each other, and the evictions to make.
func (m *Manager) preemptLocked(g *gangInfo, r *reservation, a decide.Admission, fx *effects) {
	g.lastReason = a.Preempting
	names := make([]string, len(a.Evict))
	e := eviction{preemptor: g, res: r, cause: a.Cause}
	for i, u := range a.Evict {
		names[i] = fmt.Sprintf("%s (priority %d)", u.Name(), u.Priority)
		v := victim{gang: u.Gang, extra: u.Extra}
		for _, q := range u.Pods {
			if p := m.ledger.pods[q.UID]; p != nil {
				m.ledger.setEvicting(p, true)
				fx.podEvent(p, corev1.EventTypeWarning, wellknown.ReasonPreempted, u.Why)
			}
			v.pods = append(v.pods, podRef{namespace: q.Namespace, name: q.Name, uid: q.UID})
		}
		e.victims = append(e.victims, v)
	}
	klog.InfoS("Gang preempting", "gang", g.key, "priority", r.priority, "victims", strings.Join(names, ", "), "cause", a.Cause.Kind, "queue", a.Cause.Queue)
	for _, s := range r.slots {
		if s.pod != nil {
			fx.podEvent(s.pod, corev1.EventTypeNormal, wellknown.ReasonGangPreempting, g.lastReason)
		}
	}
	fx.evictions = append(fx.evictions, e)
}

// --- effects: what decisions tell the world ------------------------------------------------

// What decisions tell the world: Events, pod conditions that wake parked members, nominations and
// evictions. Each is decided under the manager's lock and sent after it is let go.

// effects are what a decision tells the world: Events, pod conditions and evictions. A verb
// collects them while it holds the manager's lock and emits them once it has let go, so that
// nothing outside lockstep's own state is touched under the lock. Metrics are recorded where the
// outcome is known, also outside the lock.
type effects struct {
	events     []event
	conditions []conditionWrite
	// gangs changed, for Config.OnGangChange.
	gangs []string
	// evictions are preemptions to carry out.
	evictions []eviction
	// releases are claims whose devices a waiting gang gives back (releases.go).
	releases []claimRelease
}

// touched notes that a gang changed.
func (fx *effects) touched(gang string) {
	if gang != "" && !slices.Contains(fx.gangs, gang) {
		fx.gangs = append(fx.gangs, gang)
	}
}

type event struct {
	ref                        *corev1.ObjectReference
	eventType, reason, message string
}

// podEvent adds an Event on a pod unless it is the same as the last one lockstep wrote there: the
// scheduler retries a waiting pod every few seconds, and one line per change is what a reader
// wants. It updates the pod's record, so it too runs under the lock.
func (fx *effects) podEvent(p *podInfo, eventType, reason, message string) {
	key := reason + "\x00" + message
	if p.lastEvent == key {
		return
	}
	p.lastEvent = key
	fx.events = append(fx.events, event{p.ref(), eventType, reason, message})
}

// topologyProblem adds an Event on a node whose topology annotation became invalid or whose error
// changed (before is the error of its previous version): once per error, not on every informer
// update of the node.
func (fx *effects) topologyProblem(n *nodeInfo, node *corev1.Node, before error) {
	if n == nil || n.topoErr == nil || (before != nil && before.Error() == n.topoErr.Error()) {
		return
	}
	ref := &corev1.ObjectReference{Kind: "Node", APIVersion: "v1", Name: node.Name, UID: node.UID}
	fx.events = append(fx.events, event{ref, corev1.EventTypeWarning, wellknown.ReasonGPUTopologyInvalid, fmt.Sprintf(
		"annotation %s is not usable: %v; lockstep uses the %s topology instead", wellknown.AnnotationGPUTopology, n.topoErr, n.topoSource)})
}

func (fx *effects) condition(w conditionWrite) { fx.conditions = append(fx.conditions, w) }

// emit writes the effects; the caller must not hold the lock.
func (m *Manager) emit(fx *effects) {
	for _, e := range fx.events {
		m.recorder.Event(e.ref, e.eventType, e.reason, e.message)
	}
	m.wake.conditions.enqueue(fx.conditions)
	for _, e := range fx.evictions {
		go evictRun{m, e}.run()
	}
	for _, r := range fx.releases {
		go releaseRun{m, r}.run()
	}
	if m.cfg.OnGangChange != nil {
		for _, g := range fx.gangs {
			m.cfg.OnGangChange(g)
		}
	}
}

// --- pod conditions: waking members the scheduler parked ---------------------------------

// lockstep writes wellknown.ConditionGangScheduled on gang members whose gang's situation
// changed while they wait: `kubectl get pod -o yaml` shows it, and (what makes it
// necessary) kube-scheduler requeues an unschedulable pod when the pod is updated. Since 1.30 the
// scheduler parks pods an extender rejected until some cluster event happens; a reservation that
// expires inside lockstep is no such event, so without this write the gangs waiting behind it
// would sit until the scheduler's five-minute flush.

// ConditionWriter sets a condition on a pod's status.
type ConditionWriter interface {
	SetCondition(ctx context.Context, namespace, name string, cond corev1.PodCondition) error
}

// SetConditionWriter makes the manager write wellknown.ConditionGangScheduled; without one it
// writes none.
func (m *Manager) SetConditionWriter(w ConditionWriter) { m.wake.conditions.setWriter(w) }

type conditionWrite struct {
	namespace, name string
	cond            corev1.PodCondition
}

// waker sends waiting members back to kube-scheduler's filter by writing the condition on them:
// one member of each gang whose situation changed, and the members a new reservation planned
// places for after lockstep had turned them away. Its methods expect the manager's lock; the
// writes themselves go out on the conditionQueue's goroutine.
type waker struct {
	ledger     *ledger
	book       *reservationBook
	conditions *conditionQueue
	// recalls are the new reservations, by gang, with members lockstep had turned away
	// (recallParked).
	recalls map[string]*reservation
}

func newWaker(l *ledger, b *reservationBook, metrics *Metrics) *waker {
	return &waker{ledger: l, book: b, conditions: newConditionQueue(metrics), recalls: map[string]*reservation{}}
}

// capacityFreed collects the writes that wake the gangs waiting without a reservation: one
// member each is enough, because the first member back at filter reserves for its whole gang and
// its reservation recalls the rest (recallParked).
func (w *waker) capacityFreed(freedBy string, fx *effects) {
	for key, g := range w.ledger.gangs {
		if key == freedBy || w.book.reserving(key) != nil {
			continue
		}
		w.gang(g, wellknown.ConditionReasonCapacityFreed, "capacity held by gang "+freedBy+" was released; gang "+key+" is being planned again", fx)
	}
}

// gang writes the condition on one waiting member of a gang that has no quorum yet.
func (w *waker) gang(g *gangInfo, reason, message string, fx *effects) {
	view := g.view()
	if spec, _ := view.Reference(); spec == nil || view.Satisfied(spec) {
		return
	}
	for _, p := range g.sortedMembers() {
		if !p.Holds() && !p.Terminal && !p.Gated && p.Spec != nil {
			w.write(p, reason, message, fx)
			return
		}
	}
}

// recallAfter is how long a new reservation leaves its members turned away earlier to come back
// by themselves before lockstep recalls them. Most do: the status kube-scheduler writes on a pod
// it turns away is itself an update, which moves the pod to its backoff queue. A pod turned away
// again for the same reason gets no such write, stays parked, and the quorum would wait on it until
// a held bind gave up. Recalling every one at once would put a status write per member on the path
// from the reservation to its commit, for members mostly on their way back already.
const recallAfter = 200 * time.Millisecond

// noteParked remembers a new reservation that planned places for members lockstep had turned
// away, for recallParked.
func (w *waker) noteParked(r *reservation) {
	for _, s := range r.slots {
		if w.parkedFor(s) != nil {
			w.recalls[r.gang] = r
			return
		}
	}
}

// parkedFor is the member a planned slot still waits for, when lockstep turned it away and has
// not seen it back since; nil otherwise.
func (w *waker) parkedFor(s *slot) *podInfo {
	p := w.ledger.pods[s.plannedFor]
	if s.state != decide.SlotPlanned || p == nil || !p.parked || p.Terminal {
		return nil
	}
	return p
}

// recallParked sends back to filter the members that reservations made at least recallAfter
// before now still wait for and that lockstep turned away before, once per reservation. Members
// an operator creates one after another are turned away in turn while the gang is short, so a gang
// often has several.
func (w *waker) recallParked(now time.Time, fx *effects) {
	for gang, r := range w.recalls {
		if r.state == decide.Reserving && now.Sub(r.created) < recallAfter {
			continue
		}
		delete(w.recalls, gang)
		if r.state != decide.Reserving {
			continue
		}
		for _, s := range r.slots {
			if p := w.parkedFor(s); p != nil {
				w.write(p, wellknown.ConditionReasonPlaceReserved,
					fmt.Sprintf("gang %s reserved a place for this member on node %s; it is being scheduled again", gang, s.node), fx)
			}
		}
	}
}

// write writes the condition on p, which kube-scheduler takes as a reason to try the pod again; p
// is then no longer parked.
func (w *waker) write(p *podInfo, reason, message string, fx *effects) {
	p.parked = false
	fx.condition(conditionWrite{p.Namespace, p.Name, corev1.PodCondition{
		Type: wellknown.ConditionGangScheduled, Status: corev1.ConditionFalse, Reason: reason, Message: message,
	}})
}

// conditionQueueSize bounds the condition writes waiting for the apiserver. They are wake-up
// calls for parked pods: when the queue is full the scheduler is already busy with the cluster,
// and a write dropped costs at most a later retry, whereas an unbounded backlog would hold memory
// and keep writing stale news long after.
const conditionQueueSize = 512

// conditionQueue writes conditions one at a time on a goroutine of its own, so that neither a
// verb nor an informer handler ever waits on the apiserver for one, and drops them when full.
type conditionQueue struct {
	mu      sync.Mutex
	writer  ConditionWriter
	pending chan conditionWrite
	metrics *Metrics
}

func newConditionQueue(metrics *Metrics) *conditionQueue {
	return &conditionQueue{pending: make(chan conditionWrite, conditionQueueSize), metrics: metrics}
}

func (q *conditionQueue) setWriter(w ConditionWriter) {
	q.mu.Lock()
	defer q.mu.Unlock()
	q.writer = w
}

func (q *conditionQueue) currentWriter() ConditionWriter {
	q.mu.Lock()
	defer q.mu.Unlock()
	return q.writer
}

// enqueue queues writes, or drops them (counted) when the queue is full; without a writer they
// go nowhere.
func (q *conditionQueue) enqueue(writes []conditionWrite) {
	if len(writes) == 0 || q.currentWriter() == nil {
		return
	}
	for _, c := range writes {
		select {
		case q.pending <- c:
		default:
			q.metrics.conditionDropped()
			klog.V(2).InfoS("Dropped a gang condition write: too many queued", "pod", c.namespace+"/"+c.name, "reason", c.cond.Reason)
		}
	}
}

// run writes queued conditions until stop is closed.
func (q *conditionQueue) run(stop <-chan struct{}) {
	for {
		select {
		case c := <-q.pending:
			q.write(c)
		case <-stop:
			return
		}
	}
}

func (q *conditionQueue) write(c conditionWrite) {
	w := q.currentWriter()
	if w == nil {
		return
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if err := w.SetCondition(ctx, c.namespace, c.name, c.cond); err != nil {
		klog.InfoS("Could not write gang condition", "pod", c.namespace+"/"+c.name, "err", err)
	}
}

// APIConditionWriter patches pods/status through client-go.
type APIConditionWriter struct{ Client kubernetes.Interface }

func (a APIConditionWriter) SetCondition(ctx context.Context, namespace, name string, cond corev1.PodCondition) error {
	cond.LastTransitionTime = metav1.Now()
	patch, err := json.Marshal(map[string]any{"status": map[string]any{"conditions": []corev1.PodCondition{cond}}})
	if err != nil {
		return err
	}
	_, err = a.Client.CoreV1().Pods(namespace).Patch(ctx, name, types.StrategicMergePatchType, patch, metav1.PatchOptions{}, "status")
	return err
}

// --- nominations -----------------------------------------------------------------------------

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

// nominations decides and hands the Nominator the nominations of members lockstep holds places
// for. Its methods expect the manager's lock; the Nominator must not block.
type nominations struct {
	ledger *ledger
	// to writes them; nil nominates nothing.
	to Nominator
}

// nominate hands the Nominator, if there is one, the nominations of a new reservation: every
// planned slot's member goes to the slot's node. The first slot is the member at filter, in its
// cycle already.
func (n *nominations) nominate(r *reservation) {
	if n.to == nil {
		return
	}
	var out []Nomination
	for _, s := range r.slots {
		q := n.ledger.pods[s.plannedFor]
		if s.state != decide.SlotPlanned || q == nil {
			continue
		}
		s.nominated = s.node
		out = append(out, Nomination{Namespace: q.Namespace, Name: q.Name, Node: s.node})
	}
	n.to.Nominate(out)
}

// withdraw takes back the standing nominations of slots: each was written for the member the slot
// was planned for. A member gone from the ledger needs none taken back.
func (n *nominations) withdraw(slots ...*slot) {
	var out []Nomination
	for _, s := range slots {
		if s.nominated == "" {
			continue
		}
		if q := n.ledger.pods[s.plannedFor]; q != nil {
			out = append(out, Nomination{Namespace: q.Namespace, Name: q.Name, Was: s.nominated})
		}
		s.nominated = ""
	}
	if len(out) > 0 && n.to != nil {
		n.to.Nominate(out)
	}
}

// withdrawReleased takes back the nominations of a reservation whose members will not bind
// through it. A bound member's is left alone: it named the node the member bound to, and
// kube-apiserver clears it at binding (ClearingNominatedNodeNameAfterBinding).
func (n *nominations) withdrawReleased(r *reservation) {
	for _, s := range r.slots {
		if s.state != decide.SlotBound {
			n.withdraw(s)
		}
	}
}
