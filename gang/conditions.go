package gang

import (
	"context"
	"encoding/json"
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

// SetConditionWriter makes the manager write wellknown.ConditionGangScheduled; without one it writes none.
func (m *Manager) SetConditionWriter(w ConditionWriter) {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.conditions = w
}

type conditionWrite struct {
	namespace, name string
	cond            corev1.PodCondition
}

// capacityFreedLocked collects the writes that wake the gangs waiting without a reservation:
// one member each is enough, because the first member back at filter reserves for its whole gang
// and its held bind brings the rest (a failing bind makes the scheduler retry every parked pod).
func (m *Manager) capacityFreedLocked(freedBy string) []conditionWrite {
	var writes []conditionWrite
	for key, g := range m.state.gangs {
		if key == freedBy || m.liveReservation(key) != nil {
			continue
		}
		spec, _ := g.reference()
		if spec == nil || g.boundCount() >= spec.MinAvailable {
			continue
		}
		for _, p := range g.sortedMembers() {
			if !p.holds() && !p.terminal && !p.gated && p.spec != nil {
				writes = append(writes, conditionWrite{p.namespace, p.name, corev1.PodCondition{
					Type: wellknown.ConditionGangScheduled, Status: corev1.ConditionFalse, Reason: wellknown.ConditionReasonCapacityFreed,
					Message: "capacity held by gang " + freedBy + " was released; gang " + key + " is being planned again",
				}})
				break
			}
		}
	}
	return writes
}

// conditionQueueSize bounds the condition writes waiting for the apiserver. They are wake-up
// calls for parked pods: when the queue is full the scheduler is already busy with the cluster,
// and a write dropped costs at most a later retry, whereas an unbounded backlog would hold memory
// and keep writing stale news long after.
const conditionQueueSize = 512

type queuedWrite struct {
	writer ConditionWriter
	write  conditionWrite
}

// writeConditions queues the writes for writeQueuedConditions; its callers hold no lock but may
// be the informer's event handler or a filter call, and neither may wait on the apiserver.
func (m *Manager) writeConditions(w ConditionWriter, writes []conditionWrite) {
	if w == nil {
		return
	}
	for _, c := range writes {
		select {
		case m.conditionQueue <- queuedWrite{w, c}:
		default:
			m.metrics.conditionDropped()
			klog.V(2).InfoS("Dropped a gang condition write: too many queued", "pod", c.namespace+"/"+c.name, "reason", c.cond.Reason)
		}
	}
}

// writeQueuedConditions writes queued conditions one at a time until the manager stops.
func (m *Manager) writeQueuedConditions() {
	for {
		select {
		case q := <-m.conditionQueue:
			ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
			if err := q.writer.SetCondition(ctx, q.write.namespace, q.write.name, q.write.cond); err != nil {
				klog.InfoS("Could not write gang condition", "pod", q.write.namespace+"/"+q.write.name, "err", err)
			}
			cancel()
		case <-m.stop:
			return
		}
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
