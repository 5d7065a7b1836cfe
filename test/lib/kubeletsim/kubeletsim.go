// Package kubeletsim stands in for the kubelets the test control plane does not run. A bound
// pod whose deletion began (an eviction, a graceful delete) stays Terminating until its node's
// kubelet confirms the containers stopped; without one it would hold its node's capacity for
// ever, and a preemption or an eviction lockstep makes would never finish. Stand-in finishes
// them as a node would, at once.
//
// It owns nothing but those final deletes: it never binds, evicts or changes a pod that is not
// already going.
package kubeletsim

import (
	"context"
	"fmt"
	"sync"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/cache"
)

// Standin finishes the deletions of one namespace's bound pods.
type Standin struct {
	client kubernetes.Interface
	ctx    context.Context

	mu       sync.Mutex
	finished []string // pod names, in the order they went
	done     map[types.UID]bool
	errs     []error
}

// Start watches namespace's pods until ctx ends.
func Start(ctx context.Context, client kubernetes.Interface, namespace string) (*Standin, error) {
	s := &Standin{client: client, ctx: ctx, done: map[types.UID]bool{}}
	factory := informers.NewSharedInformerFactoryWithOptions(client, 0, informers.WithNamespace(namespace))
	inf := factory.Core().V1().Pods().Informer()
	if _, err := inf.AddEventHandler(cache.ResourceEventHandlerFuncs{
		AddFunc:    func(obj any) { s.look(obj) },
		UpdateFunc: func(_, obj any) { s.look(obj) },
	}); err != nil {
		return nil, err
	}
	factory.Start(ctx.Done())
	if !cache.WaitForCacheSync(ctx.Done(), inf.HasSynced) {
		return nil, fmt.Errorf("kubelet stand-in: the pod informer of namespace %s did not sync", namespace)
	}
	return s, nil
}

// look finishes a bound pod whose deletion began. Only that pod goes (a UID precondition): one
// recreated under its name by a controller is a new pod, left alone.
func (s *Standin) look(obj any) {
	pod, ok := obj.(*corev1.Pod)
	if !ok || pod.DeletionTimestamp == nil || pod.Spec.NodeName == "" {
		return
	}
	uid := pod.UID
	s.mu.Lock()
	seen := s.done[uid]
	s.mu.Unlock()
	if seen {
		return // its final delete is an update too
	}
	zero := int64(0)
	err := s.client.CoreV1().Pods(pod.Namespace).Delete(s.ctx, pod.Name, metav1.DeleteOptions{
		GracePeriodSeconds: &zero, Preconditions: &metav1.Preconditions{UID: &uid}})
	s.mu.Lock()
	defer s.mu.Unlock()
	switch {
	case err == nil || apierrors.IsNotFound(err) || apierrors.IsConflict(err):
		s.finished = append(s.finished, pod.Name)
		s.done[uid] = true
	case s.ctx.Err() == nil:
		s.errs = append(s.errs, fmt.Errorf("kubelet stand-in: finishing pod %s/%s: %w", pod.Namespace, pod.Name, err))
	}
}

// Finished names the pods whose deletion the stand-in finished (or found finished already).
func (s *Standin) Finished() []string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]string(nil), s.finished...)
}

// Err is the first deletion the apiserver refused, nil when none was.
func (s *Standin) Err() error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if len(s.errs) == 0 {
		return nil
	}
	return s.errs[0]
}
