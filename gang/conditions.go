package gang

import (
	"context"
	"encoding/json"
	"fmt"
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/kubernetes"
	"k8s.io/klog/v2"

	"github.com/lockstep-sched/lockstep/wellknown"
)

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
func (m *Manager) SetConditionWriter(w ConditionWriter) { m.conditions.setWriter(w) }

type conditionWrite struct {
	namespace, name string
	cond            corev1.PodCondition
}

// capacityFreedLocked collects the writes that wake the gangs waiting without a reservation:
// one member each is enough, because the first member back at filter reserves for its whole gang
// and its reservation recalls the rest (recallParkedLocked).
func (m *Manager) capacityFreedLocked(freedBy string, fx *effects) {
	for key, g := range m.ledger.gangs {
		if key == freedBy || m.liveReservation(key) != nil {
			continue
		}
		m.wakeLocked(g, wellknown.ConditionReasonCapacityFreed, "capacity held by gang "+freedBy+" was released; gang "+key+" is being planned again", fx)
	}
}

// wakeLocked writes the condition on one waiting member of a gang that has no quorum yet.
func (m *Manager) wakeLocked(g *gangInfo, reason, message string, fx *effects) {
	spec, _ := g.reference()
	if spec == nil || g.satisfied(spec) {
		return
	}
	for _, p := range g.sortedMembers() {
		if !p.holds() && !p.terminal && !p.gated && p.spec != nil {
			m.writeConditionLocked(p, reason, message, fx)
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

// noteParkedLocked remembers a new reservation that planned places for members lockstep had
// turned away, for recallParkedLocked.
func (m *Manager) noteParkedLocked(r *reservation) {
	for _, s := range r.slots {
		if m.parkedFor(s) != nil {
			m.recalls[r.gang] = r
			return
		}
	}
}

// parkedFor is the member a planned slot still waits for, when lockstep turned it away and has
// not seen it back since; nil otherwise.
func (m *Manager) parkedFor(s *slot) *podInfo {
	p := m.ledger.pods[s.plannedFor]
	if s.state != slotPlanned || p == nil || !p.parked || p.terminal {
		return nil
	}
	return p
}

// recallParkedLocked sends back to filter the members that reservations made at least
// recallAfter ago still wait for and that lockstep turned away before, once per reservation.
// Members an operator creates one after another are turned away in turn while the gang is short,
// so a gang often has several.
func (m *Manager) recallParkedLocked(fx *effects) {
	now := m.now()
	for gang, r := range m.recalls {
		if r.state == reserving && now.Sub(r.created) < recallAfter {
			continue
		}
		delete(m.recalls, gang)
		if r.state != reserving {
			continue
		}
		for _, s := range r.slots {
			if p := m.parkedFor(s); p != nil {
				m.writeConditionLocked(p, wellknown.ConditionReasonPlaceReserved,
					fmt.Sprintf("gang %s reserved a place for this member on node %s; it is being scheduled again", gang, s.node), fx)
			}
		}
	}
}

// writeConditionLocked writes the condition on p, which kube-scheduler takes as a reason to try
// the pod again; p is then no longer parked.
func (m *Manager) writeConditionLocked(p *podInfo, reason, message string, fx *effects) {
	p.parked = false
	fx.condition(conditionWrite{p.namespace, p.name, corev1.PodCondition{
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
