package tenancy

import (
	corev1 "k8s.io/api/core/v1"
	"k8s.io/client-go/tools/cache"

	"github.com/lockstep-sched/lockstep/dialect"
	"github.com/lockstep-sched/lockstep/wellknown"
)

// A Namespace's annotations name or define queues of two kinds. YuniKorn's namespace.quota and
// namespace.guaranteed define the queue its applications go to (yunikorn.go).
//
// A Namespace's annotation scheduling.volcano.sh/queue-name names the Volcano Queue of its
// PodGroups that name none. Volcano's admission webhook copies it into spec.queue when a PodGroup
// is created; lockstep, which has no webhook, resolves it whenever a gang is planned, so a changed
// annotation moves such gangs that still wait. An empty annotation names no queue.

// namespaceAdded tells the manager of a namespace that names a queue; one that names none has
// nothing to forget yet.
func (w *Watcher) namespaceAdded(obj any) {
	ns, ok := obj.(*corev1.Namespace)
	if !ok {
		return
	}
	if volcanoDefault(ns) != "" {
		w.setDefault(ns.Name, volcanoDefault(ns))
	}
	w.yunikornNamespace(ns.Name, ns)
}

func (w *Watcher) namespaceUpdated(oldObj, newObj any) {
	old, okOld := oldObj.(*corev1.Namespace)
	ns, ok := newObj.(*corev1.Namespace)
	if ok && (!okOld || volcanoDefault(old) != volcanoDefault(ns)) {
		w.setDefault(ns.Name, volcanoDefault(ns))
	}
	if ok {
		w.yunikornNamespace(ns.Name, ns)
	}
}

func (w *Watcher) namespaceDeleted(obj any) {
	if tomb, ok := obj.(cache.DeletedFinalStateUnknown); ok {
		obj = tomb.Obj
	}
	if ns, ok := obj.(*corev1.Namespace); ok {
		w.setDefault(ns.Name, "")
		w.yunikornNamespace(ns.Name, nil)
	}
}

// yunikornNamespace takes in the YuniKorn queue a Namespace's annotations define, if any (nil
// for a deleted Namespace).
func (w *Watcher) yunikornNamespace(name string, ns *corev1.Namespace) {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.yunikornNamespaceLocked(name, ns)
}

func (w *Watcher) setDefault(namespace, queue string) {
	w.cfg.Manager.SetNamespaceDefault(namespace, dialect.KindVolcanoQueue, queue)
}

func volcanoDefault(ns *corev1.Namespace) string {
	return ns.Annotations[wellknown.AnnotationVolcanoQueueName]
}
