package tenancy

import (
	corev1 "k8s.io/api/core/v1"
	"k8s.io/client-go/tools/cache"

	"github.com/lockstep-sched/lockstep/dialect"
	"github.com/lockstep-sched/lockstep/wellknown"
)

// A Namespace's annotation scheduling.volcano.sh/queue-name names the Volcano Queue of its
// PodGroups that name none. Volcano's admission webhook copies it into spec.queue when a PodGroup
// is created; lockstep, which has no webhook, resolves it whenever a gang is planned, so a changed
// annotation moves such gangs that still wait. An empty annotation names no queue.

// namespaceAdded tells the manager of a namespace that names a queue; one that names none has
// nothing to forget yet.
func (w *Watcher) namespaceAdded(obj any) {
	if ns, ok := obj.(*corev1.Namespace); ok && volcanoDefault(ns) != "" {
		w.setDefault(ns.Name, volcanoDefault(ns))
	}
}

func (w *Watcher) namespaceUpdated(oldObj, newObj any) {
	old, okOld := oldObj.(*corev1.Namespace)
	ns, ok := newObj.(*corev1.Namespace)
	if ok && (!okOld || volcanoDefault(old) != volcanoDefault(ns)) {
		w.setDefault(ns.Name, volcanoDefault(ns))
	}
}

func (w *Watcher) namespaceDeleted(obj any) {
	if tomb, ok := obj.(cache.DeletedFinalStateUnknown); ok {
		obj = tomb.Obj
	}
	if ns, ok := obj.(*corev1.Namespace); ok {
		w.setDefault(ns.Name, "")
	}
}

func (w *Watcher) setDefault(namespace, queue string) {
	w.cfg.Manager.SetNamespaceDefault(namespace, dialect.KindVolcanoQueue, queue)
}

func volcanoDefault(ns *corev1.Namespace) string {
	return ns.Annotations[wellknown.AnnotationVolcanoQueueName]
}
