package apidiscovery

import (
	"context"
	"sync"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/discovery"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/dynamic/dynamicinformer"
	"k8s.io/client-go/tools/cache"
	"k8s.io/klog/v2"
)

// Config is what a Watcher is made of.
type Config[T any] struct {
	Client    dynamic.Interface
	Discovery discovery.DiscoveryInterface
	// APIs are the APIs to watch wherever the apiserver serves them, in the order Find asks.
	APIs []T
	// Resource says which resource an API is; Dialect names its project in log lines.
	Resource func(T) schema.GroupVersionResource
	Dialect  func(T) string
	// Noun names the objects in log lines, as in "Watching <Noun> objects".
	Noun string
	// Interval is how often Run asks discovery again, so that a CRD installed later is picked up.
	Interval time.Duration
	// Resync is the informers' resync period; 0 for none.
	Resync time.Duration
	// Observe takes in an object's latest version, Forget a deleted object (also one whose delete
	// the informer missed and learnt of at its next list). They are called from the informers'
	// goroutines, so two APIs' calls may overlap: the caller orders them under its own lock.
	Observe, Forget func(api T, obj *unstructured.Unstructured)
}

// Watcher runs one dynamic informer per API of its Config the apiserver serves. Create it with
// NewWatcher, then Run it.
type Watcher[T any] struct {
	cfg Config[T]

	mu sync.Mutex
	// watched are the APIs with a running informer, in the order they were started.
	watched []watchedAPI[T]
	// discovered is set once the first discovery ran, so that HasSynced waits for it.
	discovered bool
}

// Watched is a served API with a running informer; Store holds its objects as last listed or
// watched.
type Watched[T any] struct {
	Served[T]
	Store cache.Store
}

type watchedAPI[T any] struct {
	Watched[T]
	resource schema.GroupVersionResource
	// handedOver reports when Observe has taken in the informer's initial list.
	handedOver cache.InformerSynced
}

// NewWatcher makes a watcher; it watches nothing before Discover or Run.
func NewWatcher[T any](cfg Config[T]) *Watcher[T] {
	return &Watcher[T]{cfg: cfg}
}

// Run discovers the APIs every Interval, and at once, until ctx ends; the informers run as long.
func (w *Watcher[T]) Run(ctx context.Context) {
	tick := time.NewTicker(w.cfg.Interval)
	defer tick.Stop()
	for {
		w.Discover(ctx)
		select {
		case <-ctx.Done():
			return
		case <-tick.C:
		}
	}
}

// Discover starts an informer, which runs until ctx ends, for every API the apiserver serves and
// none runs for yet. Informers are never stopped: a CRD deleted makes its informer's list fail
// quietly until it is installed again.
func (w *Watcher[T]) Discover(ctx context.Context) {
	served, err := Find(w.cfg.Discovery, w.cfg.APIs, w.cfg.Resource)
	if err != nil {
		// Partial answers (an aggregated API down) still list what is served.
		klog.V(2).InfoS("Discovery of "+w.cfg.Noun+" APIs incomplete", "err", err)
	}
	for _, api := range served {
		if _, running := w.Lookup(w.cfg.Resource(api.API)); !running {
			w.watch(ctx, api)
		}
	}
	w.mu.Lock()
	w.discovered = true
	w.mu.Unlock()
}

func (w *Watcher[T]) watch(ctx context.Context, api Served[T]) {
	gvr := w.cfg.Resource(api.API)
	inf := dynamicinformer.NewFilteredDynamicInformer(w.cfg.Client, gvr, metav1.NamespaceAll, w.cfg.Resync, cache.Indexers{}, nil).Informer()
	reg, err := inf.AddEventHandler(w.handler(api.API))
	if err != nil {
		klog.ErrorS(err, "Cannot watch "+w.cfg.Noun+" objects", "resource", gvr)
		return
	}
	w.mu.Lock()
	w.watched = append(w.watched, watchedAPI[T]{Watched: Watched[T]{Served: api, Store: inf.GetStore()}, resource: gvr, handedOver: reg.HasSynced})
	w.mu.Unlock()
	klog.InfoS("Watching "+w.cfg.Noun+" objects", "dialect", w.cfg.Dialect(api.API), "resource", gvr.GroupResource().String()+"/"+gvr.Version)
	go inf.Run(ctx.Done())
}

// handler hands api's objects to Observe and Forget; anything but an object, which a dynamic
// informer does not deliver, is dropped.
func (w *Watcher[T]) handler(api T) cache.ResourceEventHandlerFuncs {
	observe := func(obj any) {
		if u, ok := obj.(*unstructured.Unstructured); ok {
			w.cfg.Observe(api, u)
		}
	}
	return cache.ResourceEventHandlerFuncs{
		AddFunc:    observe,
		UpdateFunc: func(_, obj any) { observe(obj) },
		DeleteFunc: func(obj any) {
			if tomb, ok := obj.(cache.DeletedFinalStateUnknown); ok {
				obj = tomb.Obj
			}
			if u, ok := obj.(*unstructured.Unstructured); ok {
				w.cfg.Forget(api, u)
			}
		},
	}
}

// HasSynced reports whether the first discovery ran and Observe has taken in the initial list of
// every API watched.
func (w *Watcher[T]) HasSynced() bool {
	w.mu.Lock()
	defer w.mu.Unlock()
	if !w.discovered {
		return false
	}
	for _, a := range w.watched {
		if !a.handedOver() {
			return false
		}
	}
	return true
}

// Watching lists the APIs with a running informer, in the order they were started.
func (w *Watcher[T]) Watching() []Watched[T] {
	w.mu.Lock()
	defer w.mu.Unlock()
	out := make([]Watched[T], len(w.watched))
	for i, a := range w.watched {
		out[i] = a.Watched
	}
	return out
}

// Lookup finds the watched API that is resource.
func (w *Watcher[T]) Lookup(resource schema.GroupVersionResource) (Watched[T], bool) {
	w.mu.Lock()
	defer w.mu.Unlock()
	for _, a := range w.watched {
		if a.resource == resource {
			return a.Watched, true
		}
	}
	return Watched[T]{}, false
}
