// Package tenancy keeps lockstep in step with the team queues and quotas users of other gang
// schedulers already write: Volcano's and kube-batch's Queues, scheduler-plugins' and Koordinator's
// ElasticQuotas, KAI's Queues, YuniKorn's queues.yaml (two ConfigMaps, read by name) and namespace
// quotas, and the Namespace annotation that names a Volcano namespace's default queue. It finds which of
// the queue APIs the apiserver serves (a CRD installed later is picked up without a restart; an
// absent one is no error), watches those and the Namespaces, hands each queue to the gang manager
// as package dialect reads it, reports an object it cannot use with a Warning Event, and writes
// back the usage the projects' own schedulers write (Volcano's status.allocated, the ElasticQuotas'
// status.used), so that their tools show what each queue holds. One quota, of any kind, covers a
// namespace: quotas that claim the same one are all refused.
//
// Reading the objects is package dialect's job; what a queue admits is package quota's, which
// package gang asks. This package owns only the API traffic between them: it decides nothing
// about gangs and never writes a queue's spec.
package tenancy

import (
	"context"
	"reflect"
	"slices"
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/discovery"
	"k8s.io/client-go/dynamic"
	coreinformers "k8s.io/client-go/informers/core/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/cache"
	"k8s.io/client-go/tools/record"
	"k8s.io/klog/v2"

	"github.com/lockstep-sched/lockstep/apidiscovery"
	"github.com/lockstep-sched/lockstep/dialect"
	"github.com/lockstep-sched/lockstep/gang"
	"github.com/lockstep-sched/lockstep/quota"
	"github.com/lockstep-sched/lockstep/wellknown"
)

// Manager is what the watcher needs of the gang manager.
type Manager interface {
	SetQueue(quota.Queue)
	DeleteQueue(key string)
	SetNamespaceDefault(namespace, kind, name string)
	Queues() []gang.QueueView
}

// Config is what a Watcher is made of.
type Config struct {
	Client    dynamic.Interface
	Discovery discovery.DiscoveryInterface
	// Namespaces is an informer of a factory its owner starts.
	Namespaces coreinformers.NamespaceInformer
	Manager    Manager
	// Recorder writes the QueueInvalid Events.
	Recorder record.EventRecorder
	// DiscoveryInterval is how often the apiserver is asked which queue APIs it serves.
	DiscoveryInterval time.Duration
	// UsageInterval is how often changed usage is written back: a queue's usage moves with every
	// reservation, and its readers need the gist, not every step.
	UsageInterval time.Duration
	// Ready, when set, holds usage writes back until it is true: a manager that has not yet
	// taken in the cluster's pods would write that every queue holds nothing.
	Ready func() bool
	// YuniKorn, when set, reads YuniKorn's queue ConfigMaps in YuniKornNamespace.
	YuniKorn          kubernetes.Interface
	YuniKornNamespace string
}

// Watcher watches the queue objects and Namespaces and writes back usage. Create it with New
// (before its Namespaces informer's factory starts), then Run it.
type Watcher struct {
	cfg Config
	// nsSynced reports when the Namespace handler has taken in the initial list.
	nsSynced cache.InformerSynced
	// queues runs an informer per queue API served; whether one has a status subresource of its
	// own is said per API (Volcano's Queue and scheduler-plugins' ElasticQuota CRDs have one).
	queues *apidiscovery.Watcher[dialect.QueueAPI]
	// resync asks the usage writer for a pass now.
	resync chan struct{}

	// mu is held while the manager is told, so that two informers' news about one queue reach it
	// in the order they were read (kube-batch's two versions share keys).
	mu sync.Mutex
	// objects are the queue objects seen, by quota key; kube-batch's two versions share keys, so
	// each key holds one object per API.
	objects map[string]map[schema.GroupVersionResource]*unstructured.Unstructured
	// crowds index namespaced quotas by the namespaces they cover (of any kind), then key: one
	// quota applies to a namespace. covers are the namespaces each key's object covers.
	crowds map[string]map[string]bool
	covers map[string][]string
	// told is what the manager was last told of each queue, so that an object's status update
	// (lockstep's own usage write, say) does not wake the queue's gangs for nothing.
	told map[string]quota.Queue
	// reported are the errors a QueueInvalid Event was written for, by key: each once.
	reported map[string]string
	// mayWrite, when set, says whether this replica may write now (package leadership): Events
	// and usage it refuses are caught up by Resync.
	mayWrite func() bool
	// yunikorn keeps YuniKorn's queues, read from ConfigMaps and Namespaces (yunikorn.go) by
	// yunikornInformers.
	yunikorn          yunikornState
	yunikornInformers []cache.SharedIndexInformer
}

// New makes a watcher and registers its Namespace handler.
func New(cfg Config) (*Watcher, error) {
	w := &Watcher{
		cfg:     cfg,
		resync:  make(chan struct{}, 1),
		objects: map[string]map[schema.GroupVersionResource]*unstructured.Unstructured{},
		crowds:  map[string]map[string]bool{}, covers: map[string][]string{}, told: map[string]quota.Queue{}, reported: map[string]string{},
		yunikorn: newYuniKornState(),
	}
	if cfg.YuniKorn != nil && cfg.YuniKornNamespace != "" {
		w.yunikornInformers = w.newYuniKornInformers(cfg.YuniKorn, cfg.YuniKornNamespace)
	}
	w.queues = apidiscovery.NewWatcher(apidiscovery.Config[dialect.QueueAPI]{
		Client: cfg.Client, Discovery: cfg.Discovery, APIs: dialect.QueueAPIs(),
		Resource: func(a dialect.QueueAPI) schema.GroupVersionResource { return a.Resource },
		Dialect:  func(a dialect.QueueAPI) string { return a.Dialect },
		Noun:     "queue", Interval: cfg.DiscoveryInterval,
		// No periodic resync: a queue changes when its object does, and a resync would tell the
		// manager nothing new.
		Resync:  0,
		Observe: w.observe, Forget: w.forget,
	})
	reg, err := cfg.Namespaces.Informer().AddEventHandler(cache.ResourceEventHandlerFuncs{
		AddFunc:    w.namespaceAdded,
		UpdateFunc: w.namespaceUpdated,
		DeleteFunc: w.namespaceDeleted,
	})
	if err != nil {
		return nil, err
	}
	w.nsSynced = reg.HasSynced
	return w, nil
}

// SetWriteGate makes Events and usage writes wait for mayWrite; call before Run.
func (w *Watcher) SetWriteGate(mayWrite func() bool) { w.mayWrite = mayWrite }

func (w *Watcher) mayWriteNow() bool { return w.mayWrite == nil || w.mayWrite() }

// Resync writes what a standby replica left unwritten, once it leads: the Events of unusable
// queues and, at once, every queue's usage.
func (w *Watcher) Resync() {
	w.mu.Lock()
	w.reportAllLocked()
	w.mu.Unlock()
	select {
	case w.resync <- struct{}{}:
	default: // a pass is due already
	}
}

// Run discovers and watches the queue APIs and writes usage until ctx ends.
func (w *Watcher) Run(ctx context.Context) {
	go w.writeUsage(ctx)
	runInformers(ctx, w.yunikornInformers)
	w.queues.Run(ctx)
}

// HasSynced reports whether the Namespaces and the queue APIs served at the first discovery
// are listed and handed to the manager.
func (w *Watcher) HasSynced() bool {
	return w.nsSynced() && w.queues.HasSynced() && w.yunikornSynced()
}

// observe takes in a queue object's latest version.
func (w *Watcher) observe(api dialect.QueueAPI, u *unstructured.Unstructured) {
	key := api.Key(u.GetNamespace(), u.GetName())
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.objects[key] == nil {
		w.objects[key] = map[schema.GroupVersionResource]*unstructured.Unstructured{}
	}
	w.objects[key][api.Resource] = u
	old := w.covers[key]
	now := coveredBy(api, u)
	w.crowdLocked(key, old, now)
	w.tellLocked(w.affectedLocked(key, old, now))
}

// forget drops a deleted queue object.
func (w *Watcher) forget(api dialect.QueueAPI, u *unstructured.Unstructured) {
	key := api.Key(u.GetNamespace(), u.GetName())
	w.mu.Lock()
	defer w.mu.Unlock()
	if delete(w.objects[key], api.Resource); len(w.objects[key]) == 0 {
		delete(w.objects, key)
	}
	old := w.covers[key]
	if api.Namespaced {
		w.crowdLocked(key, old, nil)
	}
	w.tellLocked(w.affectedLocked(key, old, nil))
}

// coveredBy lists the namespaces a namespaced quota object covers, in which no other quota may
// (quota.Queue.Covers, less quota.AllNamespaces: one key alone can name it).
func coveredBy(api dialect.QueueAPI, u *unstructured.Unstructured) []string {
	if !api.Namespaced {
		return nil
	}
	q := api.Parse(u)
	return slices.DeleteFunc(q.Covers(), func(ns string) bool { return ns == quota.AllNamespaces })
}

// crowdLocked moves key from the crowds of the namespaces it covered to those it covers now.
func (w *Watcher) crowdLocked(key string, old, now []string) {
	for _, ns := range old {
		if delete(w.crowds[ns], key); len(w.crowds[ns]) == 0 {
			delete(w.crowds, ns)
		}
	}
	for _, ns := range now {
		if w.crowds[ns] == nil {
			w.crowds[ns] = map[string]bool{}
		}
		w.crowds[ns][key] = true
	}
	if len(now) > 0 {
		w.covers[key] = now
	} else {
		delete(w.covers, key)
	}
}

// affectedLocked lists the keys whose reading a change to key may change: key, and every other
// quota of the namespaces it covered or covers.
func (w *Watcher) affectedLocked(key string, namespaces ...[]string) []string {
	keys := []string{key}
	for _, list := range namespaces {
		for _, ns := range list {
			for k := range w.crowds[ns] {
				keys = append(keys, k)
			}
		}
	}
	slices.Sort(keys)
	return slices.Compact(keys)
}

// tellLocked brings the manager's queues of keys up to date. Deletions go first: deleting one
// of a namespace's two quotas forgets which quota applies to the namespace, and the other,
// told next, takes it back.
func (w *Watcher) tellLocked(keys []string) {
	type reading struct {
		key string
		q   quota.Queue
		obj *unstructured.Unstructured
	}
	var defined []reading
	changed := false
	for _, key := range keys {
		q, obj, ok := w.resolveLocked(key)
		if ok {
			defined = append(defined, reading{key, q, obj})
			continue
		}
		delete(w.reported, key)
		if _, known := w.told[key]; known {
			delete(w.told, key)
			w.cfg.Manager.DeleteQueue(key)
			changed = true
		}
	}
	for _, r := range defined {
		if told, known := w.told[r.key]; known && reflect.DeepEqual(told, r.q) {
			continue
		}
		if r.q.Err != nil {
			klog.InfoS("Queue cannot be used; its gangs wait", "queue", r.key, "err", r.q.Err)
		}
		w.told[r.key] = r.q
		w.cfg.Manager.SetQueue(r.q)
		changed = true
	}
	// What can be reported changes only with the queues told: a status write lockstep made
	// itself, seen back through the watch, changes none, and reading every queue again for it
	// would cost each write the whole tree.
	if changed {
		w.reportAllLocked()
	}
}

// reportAllLocked reports every queue that cannot be used, for its own object or for its place
// among the others: one queue's change can break or mend the tree for the queues under it.
func (w *Watcher) reportAllLocked() {
	told := make([]quota.Queue, 0, len(w.told)+len(w.yunikorn.told))
	for _, q := range w.told {
		told = append(told, q)
	}
	for _, q := range w.yunikorn.told {
		told = append(told, q)
	}
	problems := quota.TreeProblems(told)
	for key, q := range w.told {
		if _, obj, ok := w.resolveLocked(key); ok {
			w.reportLocked(key, orProblem(q.Err, problems[key]), obj)
		}
	}
	for key, q := range w.yunikorn.told {
		w.reportLocked(key, orProblem(q.Err, problems[key]), w.yunikorn.origin[key])
	}
	w.reportYuniKornFileLocked()
}

// orProblem is a queue's own error, else the problem of its place in the tree.
func orProblem(own, place error) error {
	if own != nil {
		return own
	}
	return place
}

// resolveLocked reads the queue key's objects define, and the object that speaks for it; ok is
// false when no object defines it.
func (w *Watcher) resolveLocked(key string) (q quota.Queue, obj *unstructured.Unstructured, ok bool) {
	var found []dialect.FoundQueue
	for _, api := range dialect.QueueAPIs() {
		if u := w.objects[key][api.Resource]; u != nil {
			found = append(found, dialect.FoundQueue{API: api, Object: u})
		}
	}
	if q, ok = dialect.ChooseQueue(found); !ok {
		return q, nil, false
	}
	if found[0].API.Namespaced {
		for _, ns := range w.covers[key] {
			var others []string
			for k := range w.crowds[ns] {
				if k != key {
					others = append(others, k)
				}
			}
			if len(others) > 0 {
				q = dialect.AloneInNamespace(q, ns, others)
				break
			}
		}
	}
	return q, found[0].Object, true
}

// reportLocked writes a Warning Event on the object of a queue that cannot be used, once per
// error; one that can be used again is reported again when it breaks again.
func (w *Watcher) reportLocked(key string, err error, obj runtime.Object) {
	if err == nil {
		delete(w.reported, key)
		return
	}
	msg := err.Error()
	if w.reported[key] == msg || !w.mayWriteNow() {
		return
	}
	w.cfg.Recorder.Event(obj, corev1.EventTypeWarning, wellknown.ReasonQueueInvalid, msg+"; the queue's gangs wait until it is fixed")
	w.reported[key] = msg
}
