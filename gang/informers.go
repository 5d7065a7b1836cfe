package gang

import (
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/tools/cache"
)

// Watch feeds pod and node changes from the factory's informers to the manager. A restarted
// lockstep rebuilds what is bound from these alone: reservations are deliberately not persisted,
// the scheduler's retries of unbound members rebuild them.
func (m *Manager) Watch(factory informers.SharedInformerFactory) error {
	pods := factory.Core().V1().Pods().Informer()
	if err := pods.SetTransform(slimPod); err != nil {
		return err
	}
	if _, err := pods.AddEventHandler(cache.ResourceEventHandlerFuncs{
		AddFunc:    func(obj any) { m.UpsertPod(obj.(*corev1.Pod)) },
		UpdateFunc: func(_, obj any) { m.UpsertPod(obj.(*corev1.Pod)) },
		DeleteFunc: func(obj any) {
			if pod, ok := unwrapTombstone(obj).(*corev1.Pod); ok {
				m.DeletePod(pod.UID)
			}
		},
	}); err != nil {
		return err
	}
	nodes := factory.Core().V1().Nodes().Informer()
	if err := nodes.SetTransform(stripManagedFields); err != nil {
		return err
	}
	_, err := nodes.AddEventHandler(cache.ResourceEventHandlerFuncs{
		AddFunc:    func(obj any) { m.UpsertNode(obj.(*corev1.Node)) },
		UpdateFunc: func(_, obj any) { m.UpsertNode(obj.(*corev1.Node)) },
		DeleteFunc: func(obj any) {
			if node, ok := unwrapTombstone(obj).(*corev1.Node); ok {
				m.DeleteNode(node.Name)
			}
		},
	})
	return err
}

func unwrapTombstone(obj any) any {
	if tomb, ok := obj.(cache.DeletedFinalStateUnknown); ok {
		return tomb.Obj
	}
	return obj
}

// slimPod keeps, of a pod, only what lockstep reads: identity, its own annotations, what the pod
// requests (computed as kube-scheduler does), where it is bound, whether it is gated or finished,
// and why it is not scheduled. A cluster's pods are most of lockstep's memory, and the full
// objects (env, volumes, statuses, managed fields) are several times larger than this.
func slimPod(obj any) (any, error) {
	p, ok := obj.(*corev1.Pod)
	if !ok {
		return obj, nil
	}
	out := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{
		Name: p.Name, Namespace: p.Namespace, UID: p.UID,
		ResourceVersion: p.ResourceVersion, CreationTimestamp: p.CreationTimestamp,
	}}
	for _, key := range []string{AnnotationName, AnnotationMinAvailable, AnnotationWaitingTime, AnnotationTotalNumber, AnnotationGPUIDs} {
		if v, ok := p.Annotations[key]; ok {
			if out.Annotations == nil {
				out.Annotations = map[string]string{}
			}
			out.Annotations[key] = v
		}
	}
	out.Spec = corev1.PodSpec{
		NodeName:        p.Spec.NodeName,
		Priority:        p.Spec.Priority,
		SchedulingGates: p.Spec.SchedulingGates,
		Overhead:        p.Spec.Overhead,
		Resources:       p.Spec.Resources,
		Containers:      make([]corev1.Container, len(p.Spec.Containers)),
		InitContainers:  make([]corev1.Container, len(p.Spec.InitContainers)),
	}
	for i, c := range p.Spec.Containers {
		out.Spec.Containers[i] = corev1.Container{Name: c.Name, Resources: c.Resources}
	}
	for i, c := range p.Spec.InitContainers {
		out.Spec.InitContainers[i] = corev1.Container{Name: c.Name, Resources: c.Resources, RestartPolicy: c.RestartPolicy}
	}
	out.Status.Phase = p.Status.Phase
	for _, c := range p.Status.Conditions {
		if c.Type == corev1.PodScheduled {
			out.Status.Conditions = []corev1.PodCondition{c}
		}
	}
	return out, nil
}

// stripManagedFields drops managed fields, which lockstep never reads, before nodes enter the
// informer cache.
func stripManagedFields(obj any) (any, error) {
	if acc, ok := obj.(metav1.ObjectMetaAccessor); ok {
		acc.GetObjectMeta().SetManagedFields(nil)
	}
	return obj, nil
}
