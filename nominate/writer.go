// Package nominate writes kube-scheduler's status.nominatedNodeName for the gang members package
// gang holds places for, and clears the nominations gang withdraws. It owns the write queue and
// nothing else: which member goes to which node, and when a nomination ends, is gang's decision
// (gang/apply.go, nominations).
//
// Writes go through client-go's workqueue, one key per pod: a pod nominated and withdrawn before
// the first write is made gets only the latest of the two, and no pod is written by two workers at
// once, so writes for one pod land in the order gang asked for them.
package nominate

import (
	"context"
	"encoding/json"
	"fmt"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/util/workqueue"
	"k8s.io/klog/v2"

	"github.com/lockstep-sched/lockstep/gang"
)

// attempts bounds the tries of one write that the apiserver refused for a reason that may pass
// (throttled, unavailable, timed out). A nomination is a hint: one not written costs a member a
// cycle over every node, not its place.
const attempts = 3

// Writer is a gang.Nominator that patches pods' status.
type Writer struct {
	client  kubernetes.Interface
	workers int
	queue   workqueue.TypedRateLimitingInterface[types.NamespacedName]
	results *prometheus.CounterVec

	mu   sync.Mutex
	want map[types.NamespacedName]gang.Nomination
}

// New returns a writer with workers goroutines (once Run), counting its writes in reg when given.
func New(client kubernetes.Interface, workers int, reg prometheus.Registerer) *Writer {
	w := &Writer{
		client:  client,
		workers: workers,
		queue: workqueue.NewTypedRateLimitingQueueWithConfig(
			workqueue.NewTypedItemExponentialFailureRateLimiter[types.NamespacedName](50*time.Millisecond, 2*time.Second),
			workqueue.TypedRateLimitingQueueConfig[types.NamespacedName]{Name: "nominations"}),
		results: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "lockstep_nominations_total",
			Help: "Writes of status.nominatedNodeName for gang members lockstep holds a place for, by what was written (nominated, withdrawn) and result (written, skipped: the pod was gone or the scheduler had nominated it elsewhere since, failed).",
		}, []string{"write", "result"}),
		want: map[types.NamespacedName]gang.Nomination{},
	}
	if reg != nil {
		reg.MustRegister(w.results)
	}
	return w
}

// Nominate queues writes; it never waits on the apiserver.
func (w *Writer) Nominate(ns []gang.Nomination) {
	w.mu.Lock()
	defer w.mu.Unlock()
	for _, n := range ns {
		key := types.NamespacedName{Namespace: n.Namespace, Name: n.Name}
		w.want[key] = n
		w.queue.Add(key)
	}
}

// Run writes until ctx ends.
func (w *Writer) Run(ctx context.Context) {
	var wg sync.WaitGroup
	for range w.workers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for w.next(ctx) {
			}
		}()
	}
	<-ctx.Done()
	w.queue.ShutDown()
	wg.Wait()
}

// next makes one queued write; false once the queue shuts down.
func (w *Writer) next(ctx context.Context) bool {
	key, shutdown := w.queue.Get()
	if shutdown {
		return false
	}
	defer w.queue.Done(key)
	w.mu.Lock()
	n, ok := w.want[key]
	delete(w.want, key)
	w.mu.Unlock()
	if !ok {
		return true
	}
	write, result, err := w.write(ctx, n)
	if err != nil && w.queue.NumRequeues(key) < attempts-1 && retryable(err) {
		w.mu.Lock()
		if _, newer := w.want[key]; !newer {
			w.want[key] = n
		}
		w.mu.Unlock()
		w.queue.AddRateLimited(key)
		return true
	}
	w.queue.Forget(key)
	if err != nil {
		klog.V(2).InfoS("Could not write a nominated node", "pod", key, "nomination", n.Node, "withdrawing", n.Was, "err", err)
	}
	w.results.WithLabelValues(write, result).Inc()
	return true
}

// write patches the pod's status: a nomination sets the field; a withdrawal removes it only if it
// still names the node lockstep nominated (a JSON patch test), so the scheduler's own later
// nomination stays.
func (w *Writer) write(ctx context.Context, n gang.Nomination) (write, result string, err error) {
	ctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	write, patchType := "nominated", types.MergePatchType
	var patch []byte
	if n.Node != "" {
		patch, err = json.Marshal(map[string]any{"status": map[string]any{"nominatedNodeName": n.Node}})
	} else {
		write, patchType = "withdrawn", types.JSONPatchType
		patch, err = json.Marshal([]map[string]any{
			{"op": "test", "path": "/status/nominatedNodeName", "value": n.Was},
			{"op": "remove", "path": "/status/nominatedNodeName"},
		})
	}
	if err != nil {
		return write, "failed", err
	}
	_, err = w.client.CoreV1().Pods(n.Namespace).Patch(ctx, n.Name, patchType, patch, metav1.PatchOptions{}, "status")
	switch {
	case err == nil:
		return write, "written", nil
	case apierrors.IsNotFound(err), n.Node == "" && apierrors.IsInvalid(err):
		// Gone, or (a failed test) no longer nominated where lockstep put it.
		return write, "skipped", nil
	default:
		return write, "failed", fmt.Errorf("patching status.nominatedNodeName: %w", err)
	}
}

func retryable(err error) bool {
	return apierrors.IsTooManyRequests(err) || apierrors.IsServerTimeout(err) || apierrors.IsTimeout(err) ||
		apierrors.IsServiceUnavailable(err) || apierrors.IsInternalError(err) || apierrors.IsUnexpectedServerError(err)
}
