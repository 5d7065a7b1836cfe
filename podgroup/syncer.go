// Package podgroup keeps lockstep in step with other gang schedulers' group objects: the
// PodGroups of scheduler-plugins, Koordinator, Volcano, kube-batch and Kubernetes itself, and
// Kueue's Workloads (read only). It finds which of their
// APIs the apiserver serves (a CRD installed later is picked up without a restart; an absent one
// is no error), watches those, hands each object's rules to the gang manager, and writes back the
// status those projects' own controllers would, so that `kubectl get podgroups` says where a
// gang stands and Volcano's job controller and the training-operator, which create no pods
// before a Volcano PodGroup is Inqueue, go ahead.
//
// Reading the objects is package dialect's job; deciding about gangs is package gang's. This
// package owns only the API traffic between them.
package podgroup

import (
	"context"
	"strings"
	"sync"
	"time"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/discovery"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/util/workqueue"

	"github.com/lockstep-sched/lockstep/apidiscovery"
	"github.com/lockstep-sched/lockstep/dialect"
	"github.com/lockstep-sched/lockstep/gang"
	"github.com/lockstep-sched/lockstep/placement"
	"github.com/lockstep-sched/lockstep/quota"
)

// Manager is what the syncer needs of the gang manager.
type Manager interface {
	SetGroup(gang.GroupRules)
	DeleteGroup(key, namespace, name string)
	Standing(gang string) (gang.Standing, bool)
	FitsInTotal(req placement.Resources) (bool, string)
	QueueTakes(namespace, name string, ref quota.Ref, req placement.Resources) (bool, string)
}

// Syncer watches the group objects and keeps their status. Create it with New, then Run it.
type Syncer struct {
	client  dynamic.Interface
	manager Manager
	// groups runs an informer per group API served; whether one has a status subresource of its
	// own is said per API (scheduler-plugins' CRD has one; Volcano's and Koordinator's keep status
	// in the object).
	groups *apidiscovery.Watcher[dialect.API]
	// queue holds the objects whose status may need a write.
	queue workqueue.TypedRateLimitingInterface[ref]

	mu sync.Mutex
	// objects are the group objects seen, by the key pods name them with; several APIs share a
	// key (Volcano's and kube-batch's PodGroups), so each key holds one object per API.
	objects map[string]map[schema.GroupVersionResource]*unstructured.Unstructured
	// mayWrite, when set, says whether this replica may write statuses now (package leadership):
	// a write it refuses is dropped, and Resync catches up when it may again.
	mayWrite func() bool
	// deferred are the objects whose status another scheduler writes (see otherStatusWriter).
	deferred map[ref]bool
}

// ref is one group object.
type ref struct {
	api             schema.GroupVersionResource
	namespace, name string
}

// New makes a syncer that looks for the group APIs every interval.
func New(client dynamic.Interface, disc discovery.DiscoveryInterface, manager Manager, interval time.Duration) *Syncer {
	s := &Syncer{
		client: client, manager: manager,
		queue:   workqueue.NewTypedRateLimitingQueue(workqueue.DefaultTypedControllerRateLimiter[ref]()),
		objects: map[string]map[schema.GroupVersionResource]*unstructured.Unstructured{},
	}
	s.groups = apidiscovery.NewWatcher(apidiscovery.Config[dialect.API]{
		Client: client, Discovery: disc, APIs: dialect.APIs(),
		Resource: func(a dialect.API) schema.GroupVersionResource { return a.Resource },
		Dialect:  func(a dialect.API) string { return a.Dialect },
		Noun:     "group", Interval: interval, Resync: 5 * time.Minute,
		Observe: s.observe, Forget: s.forget,
	})
	return s
}

// SetWriteGate makes status writes wait for mayWrite; call before Run.
func (s *Syncer) SetWriteGate(mayWrite func() bool) { s.mayWrite = mayWrite }

// Resync asks for every watched object's status to be brought up to date: what a standby
// replica left unwritten, once it leads.
func (s *Syncer) Resync() {
	for _, w := range s.groups.Watching() {
		for _, item := range w.Store.List() {
			if obj, ok := item.(*unstructured.Unstructured); ok {
				s.queue.Add(ref{api: w.API.Resource, namespace: obj.GetNamespace(), name: obj.GetName()})
			}
		}
	}
}

// GangChanged asks for the status of gang's group objects to be brought up to date; it never
// blocks, so the gang manager may call it (gang.Config.OnGangChange).
func (s *Syncer) GangChanged(gangKey string) {
	namespace, name, ok := splitKey(gangKey)
	if !ok {
		return
	}
	for _, w := range s.groups.Watching() {
		s.queue.Add(ref{api: w.API.Resource, namespace: namespace, name: name})
	}
}

// Run discovers and watches the group APIs and writes status until ctx ends.
func (s *Syncer) Run(ctx context.Context) {
	defer s.queue.ShutDown()
	go s.writeStatuses(ctx)
	s.groups.Run(ctx)
}

// HasSynced reports whether the APIs served at the first discovery are watched, and their
// objects as first listed handed to the manager.
func (s *Syncer) HasSynced() bool { return s.groups.HasSynced() }

// observe takes in a group object's latest version.
func (s *Syncer) observe(api dialect.API, u *unstructured.Unstructured) {
	key := api.Key(u.GetNamespace(), u.GetName())
	s.mu.Lock()
	if s.objects[key] == nil {
		s.objects[key] = map[schema.GroupVersionResource]*unstructured.Unstructured{}
	}
	s.objects[key][api.Resource] = u
	rules := s.rulesLocked(key, u.GetNamespace(), u.GetName())
	s.mu.Unlock()
	s.manager.SetGroup(rules)
	s.queue.Add(ref{api: api.Resource, namespace: u.GetNamespace(), name: u.GetName()})
}

// forget drops a deleted group object.
func (s *Syncer) forget(api dialect.API, u *unstructured.Unstructured) {
	key := api.Key(u.GetNamespace(), u.GetName())
	s.mu.Lock()
	delete(s.deferred, ref{api: api.Resource, namespace: u.GetNamespace(), name: u.GetName()})
	delete(s.objects[key], api.Resource)
	left := len(s.objects[key])
	if left == 0 {
		delete(s.objects, key)
	}
	rules := s.rulesLocked(key, u.GetNamespace(), u.GetName())
	s.mu.Unlock()
	if left == 0 {
		s.manager.DeleteGroup(key, u.GetNamespace(), u.GetName())
		return
	}
	s.manager.SetGroup(rules)
}

// rulesLocked reads the rules of the objects that share key, in the order of dialect.APIs.
func (s *Syncer) rulesLocked(key, namespace, name string) gang.GroupRules {
	var found []dialect.Found
	for _, api := range dialect.APIs() {
		if u, ok := s.objects[key][api.Resource]; ok {
			spec, err := api.Parse(u)
			found = append(found, dialect.Found{API: api, Namespace: namespace, Name: name, Spec: spec, Err: err})
		}
	}
	spec, err := dialect.Choose(found)
	return gang.GroupRules{Key: key, Namespace: namespace, Name: name, Spec: spec, Err: err}
}

func splitKey(key string) (namespace, name string, ok bool) { return strings.Cut(key, "/") }
