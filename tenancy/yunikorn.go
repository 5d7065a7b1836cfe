package tenancy

import (
	"context"
	"reflect"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/apimachinery/pkg/runtime"
	coreinformers "k8s.io/client-go/informers/core/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/cache"
	"k8s.io/klog/v2"

	"github.com/lockstep-sched/lockstep/dialect"
	"github.com/lockstep-sched/lockstep/quota"
	"github.com/lockstep-sched/lockstep/wellknown"
)

// YuniKorn's queues come from two ConfigMaps of YuniKorn's namespace and from Namespace
// annotations, not from objects of their own (package dialect reads both). This file keeps
// them: it watches the two ConfigMaps by name (so lockstep may read those two and no other),
// and tells the manager the queues of the file read last and those of annotated namespaces that
// the file does not define. A file that cannot be read is reported on its ConfigMap and leaves
// the last one in force, as YuniKorn does.

// yunikornState is what the watcher keeps of YuniKorn's queues; the watcher's mu guards it.
type yunikornState struct {
	// maps are the two ConfigMaps, by name, as last seen.
	maps map[string]*corev1.ConfigMap
	// file are the queues of the queues.yaml read last; fileFrom is its ConfigMap.
	file     []quota.Queue
	fileFrom *corev1.ConfigMap
	// fileErr is why the ConfigMaps' queues.yaml could not be read last, on errFrom; nil when it
	// could.
	fileErr error
	errFrom *corev1.ConfigMap
	// namespaces are the queues annotated Namespaces define, by Namespace name.
	namespaces map[string]namespaceQueue
	// told is what the manager was last told, by key, and origin the object each came from.
	told   map[string]quota.Queue
	origin map[string]runtime.Object
	// synced report when each ConfigMap informer has listed.
	synced []cache.InformerSynced
}

// namespaceQueue is the queue a Namespace's annotations define, and the Namespace, to report on.
type namespaceQueue struct {
	q  quota.Queue
	ns *corev1.Namespace
}

func newYuniKornState() yunikornState {
	return yunikornState{maps: map[string]*corev1.ConfigMap{}, namespaces: map[string]namespaceQueue{},
		told: map[string]quota.Queue{}, origin: map[string]runtime.Object{}}
}

// newYuniKornInformers makes an informer for each of YuniKorn's ConfigMaps in namespace, each
// listing the one name alone.
func (w *Watcher) newYuniKornInformers(client kubernetes.Interface, namespace string) []cache.SharedIndexInformer {
	var out []cache.SharedIndexInformer
	for _, name := range []string{wellknown.ConfigMapYuniKornDefaults, wellknown.ConfigMapYuniKornConfigs} {
		inf := coreinformers.NewFilteredConfigMapInformer(client, namespace, 0, cache.Indexers{}, func(o *metav1.ListOptions) {
			o.FieldSelector = fields.OneTermEqualSelector("metadata.name", name).String()
		})
		reg, _ := inf.AddEventHandler(cache.ResourceEventHandlerFuncs{
			AddFunc:    w.configMapChanged,
			UpdateFunc: func(_, obj any) { w.configMapChanged(obj) },
			DeleteFunc: w.configMapDeleted,
		})
		w.yunikorn.synced = append(w.yunikorn.synced, reg.HasSynced)
		out = append(out, inf)
	}
	return out
}

func runInformers(ctx context.Context, informers []cache.SharedIndexInformer) {
	for _, inf := range informers {
		go inf.Run(ctx.Done())
	}
}

func (w *Watcher) yunikornSynced() bool {
	for _, synced := range w.yunikorn.synced {
		if !synced() {
			return false
		}
	}
	return true
}

func (w *Watcher) configMapChanged(obj any) {
	if cm, ok := obj.(*corev1.ConfigMap); ok {
		w.mu.Lock()
		defer w.mu.Unlock()
		w.yunikorn.maps[cm.Name] = cm
		w.readYuniKornFileLocked()
	}
}

func (w *Watcher) configMapDeleted(obj any) {
	if tomb, ok := obj.(cache.DeletedFinalStateUnknown); ok {
		obj = tomb.Obj
	}
	if cm, ok := obj.(*corev1.ConfigMap); ok {
		w.mu.Lock()
		defer w.mu.Unlock()
		delete(w.yunikorn.maps, cm.Name)
		w.readYuniKornFileLocked()
	}
}

// readYuniKornFileLocked reads queues.yaml again from the ConfigMaps; one that cannot be read is
// reported and changes nothing.
func (w *Watcher) readYuniKornFileLocked() {
	y := &w.yunikorn
	queues, from, err := dialect.YuniKornQueues(y.maps[wellknown.ConfigMapYuniKornDefaults], y.maps[wellknown.ConfigMapYuniKornConfigs])
	y.fileErr, y.errFrom = err, from
	w.reportYuniKornFileLocked()
	if err != nil {
		klog.InfoS("YuniKorn's queues cannot be read; the last ones read stay in force", "err", err)
		return
	}
	y.file, y.fileFrom = queues, from
	w.tellYuniKornLocked()
}

// reportYuniKornFileLocked reports a queues.yaml that cannot be read on its ConfigMap, once per
// error (again by Resync, once this replica leads).
func (w *Watcher) reportYuniKornFileLocked() {
	w.reportLocked("ConfigMap "+wellknown.YuniKornQueuesKey, w.yunikorn.fileErr, w.yunikorn.errFrom)
}

// yunikornNamespaceLocked takes in a Namespace's annotations (nil for a deleted Namespace).
func (w *Watcher) yunikornNamespaceLocked(name string, ns *corev1.Namespace) {
	y := &w.yunikorn
	q, ok := quota.Queue{}, false
	if ns != nil {
		q, ok = dialect.YuniKornNamespaceQueue(ns)
	}
	if old, had := y.namespaces[name]; had == ok && reflect.DeepEqual(old.q, q) {
		return
	}
	if ok {
		y.namespaces[name] = namespaceQueue{q, ns}
	} else {
		delete(y.namespaces, name)
	}
	w.tellYuniKornLocked()
}

// tellYuniKornLocked tells the manager what changed among YuniKorn's queues: the file's, and
// the namespaces' that the file does not define (YuniKorn sets a namespace's quota only on a queue
// it makes itself).
func (w *Watcher) tellYuniKornLocked() {
	y := &w.yunikorn
	want := map[string]quota.Queue{}
	origin := map[string]runtime.Object{}
	for _, q := range y.file {
		want[q.Key()], origin[q.Key()] = q, y.fileFrom
	}
	for _, n := range y.namespaces {
		if _, defined := want[n.q.Key()]; !defined {
			want[n.q.Key()], origin[n.q.Key()] = n.q, n.ns
		}
	}
	changed := false
	for key := range y.told {
		if _, ok := want[key]; !ok {
			delete(y.told, key)
			delete(w.reported, key)
			w.cfg.Manager.DeleteQueue(key)
			changed = true
		}
	}
	for key, q := range want {
		if told, ok := y.told[key]; ok && reflect.DeepEqual(told, q) {
			continue
		}
		y.told[key] = q
		w.cfg.Manager.SetQueue(q)
		changed = true
	}
	y.origin = origin
	if changed {
		w.reportAllLocked()
	}
}
