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
	if err := pods.SetTransform(stripManagedFields); err != nil {
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

// stripManagedFields drops what lockstep never reads before objects enter the informer cache:
// with 50,000 pods, managed fields alone would be most of the process's memory.
func stripManagedFields(obj any) (any, error) {
	if acc, ok := obj.(metav1.ObjectMetaAccessor); ok {
		acc.GetObjectMeta().SetManagedFields(nil)
	}
	return obj, nil
}
