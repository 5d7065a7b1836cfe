package gang

import (
	"github.com/lockstep-sched/lockstep/gangspec"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/tools/cache"
)

// Watch feeds pod and node changes from the factory's informers to the manager. A restarted
// lockstep rebuilds what is bound from these alone: reservations are deliberately not persisted,
// the scheduler's retries of unbound members rebuild them.
//
// The returned function reports when the manager itself has taken in the initial lists. That is
// later than the informers' own sync (their stores fill before the handlers have run), and
// answering before it could offer GPUs that pods not yet processed already hold.
func (m *Manager) Watch(factory informers.SharedInformerFactory) (synced func() bool, err error) {
	pods := factory.Core().V1().Pods().Informer()
	if err := pods.SetTransform(podRecorder(m.cfg.Reader)); err != nil {
		return nil, err
	}
	upsert := func(obj any) {
		if rec, ok := obj.(*podRecord); ok {
			if p := m.upsertInfo(rec.info); p.Gang != "" && m.cfg.OnGangChange != nil {
				m.cfg.OnGangChange(p.Gang)
			}
		}
	}
	podHandler, err := pods.AddEventHandler(cache.ResourceEventHandlerFuncs{
		AddFunc:    upsert,
		UpdateFunc: func(_, obj any) { upsert(obj) },
		DeleteFunc: func(obj any) {
			if rec, ok := unwrapTombstone(obj).(*podRecord); ok {
				m.DeletePod(rec.UID)
			}
		},
	})
	if err != nil {
		return nil, err
	}
	nodes := factory.Core().V1().Nodes().Informer()
	if err := nodes.SetTransform(stripManagedFields); err != nil {
		return nil, err
	}
	nodeHandler, err := nodes.AddEventHandler(cache.ResourceEventHandlerFuncs{
		AddFunc:    func(obj any) { m.UpsertNode(obj.(*corev1.Node)) },
		UpdateFunc: func(_, obj any) { m.UpsertNode(obj.(*corev1.Node)) },
		DeleteFunc: func(obj any) {
			if node, ok := unwrapTombstone(obj).(*corev1.Node); ok {
				m.DeleteNode(node.Name)
			}
		},
	})
	if err != nil {
		return nil, err
	}
	return func() bool { return podHandler.HasSynced() && nodeHandler.HasSynced() }, nil
}

func unwrapTombstone(obj any) any {
	if tomb, ok := obj.(cache.DeletedFinalStateUnknown); ok {
		return tomb.Obj
	}
	return obj
}

// podRecord is what the pod informer keeps per pod: its identity and lockstep's own summary of
// it, computed once as the pod arrives. A cluster's pods are most of lockstep's memory, and even an
// empty corev1.Pod with one container is 1.6 KB of structs before any data; the record is a few
// hundred bytes. lockstep never reads pods back from the informer's store, only from its events.
type podRecord struct {
	metav1.ObjectMeta
	// info is handed to the manager as it is, not copied: the informer never reads it again.
	info *podInfo
}

// podRecorder is the pod informer's transform: pods in, podRecords out, read by read.
func podRecorder(read gangspec.Reader) cache.TransformFunc {
	return func(obj any) (any, error) {
		p, ok := obj.(*corev1.Pod)
		if !ok {
			return obj, nil
		}
		return &podRecord{
			ObjectMeta: metav1.ObjectMeta{Name: p.Name, Namespace: p.Namespace, UID: p.UID, ResourceVersion: p.ResourceVersion},
			info:       newPodInfo(p, read),
		}, nil
	}
}

// stripManagedFields drops managed fields, which lockstep never reads, before nodes enter the
// informer cache.
func stripManagedFields(obj any) (any, error) {
	if acc, ok := obj.(metav1.ObjectMetaAccessor); ok {
		acc.GetObjectMeta().SetManagedFields(nil)
	}
	return obj, nil
}
