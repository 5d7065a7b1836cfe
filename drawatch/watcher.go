// Package drawatch keeps lockstep in step with what Dynamic Resource Allocation publishes: the
// DeviceClasses, ResourceSlices, ResourceClaims and ResourceClaimTemplates of resource.k8s.io/v1,
// watched only where the apiserver serves that API (from Kubernetes 1.34; a cluster that starts
// serving it later is picked up without a restart). Each object reaches the gang manager's
// inventory as the typed object the informer holds (package dra reads it).
//
// It owns only that traffic: it decides nothing, writes nothing (giving back a waiting gang's
// devices is package gang's, through gang.APIClaimReleaser), and reads no other API.
package drawatch

import (
	"context"
	"sync"
	"time"

	resourceapi "k8s.io/api/resource/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/discovery"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/cache"
	"k8s.io/klog/v2"

	"github.com/lockstep-sched/lockstep/dra"
)

// Manager is what the watcher needs of the gang manager.
type Manager interface {
	UpdateDevices(namespace string, change func(*dra.Inventory) []string)
}

// Watcher runs the four informers once the apiserver serves resource.k8s.io/v1. Create it with
// New, then Run it.
type Watcher struct {
	client   kubernetes.Interface
	disc     discovery.DiscoveryInterface
	manager  Manager
	interval time.Duration

	mu sync.Mutex
	// asked is set once discovery answered; synced are the handlers' initial lists, once the
	// informers run.
	asked  bool
	synced []cache.InformerSynced
}

// New makes a watcher that asks discovery every interval whether resource.k8s.io/v1 is served,
// until it is.
func New(client kubernetes.Interface, disc discovery.DiscoveryInterface, m Manager, interval time.Duration) *Watcher {
	return &Watcher{client: client, disc: disc, manager: m, interval: interval}
}

// Run discovers, starts the informers once the API is served, and runs them until ctx ends.
func (w *Watcher) Run(ctx context.Context) {
	tick := time.NewTicker(w.interval)
	defer tick.Stop()
	for {
		served, err := w.served()
		if err != nil {
			klog.V(2).InfoS("Discovery of Dynamic Resource Allocation failed; asking again", "err", err)
		}
		if served {
			w.start(ctx) // before asked: HasSynced then waits for the informers
		}
		w.mu.Lock()
		w.asked = w.asked || err == nil
		w.mu.Unlock()
		if served {
			return
		}
		select {
		case <-ctx.Done():
			return
		case <-tick.C:
		}
	}
}

func (w *Watcher) served() (bool, error) {
	list, err := w.disc.ServerResourcesForGroupVersion(resourceapi.SchemeGroupVersion.String())
	switch {
	case apierrors.IsNotFound(err):
		return false, nil
	case err != nil:
		return false, err
	}
	for _, r := range list.APIResources {
		if r.Name == "resourceslices" {
			return true, nil
		}
	}
	return false, nil
}

// start runs the informers. Their objects drop managedFields, which lockstep never reads: at
// 5,000 nodes the slices alone would otherwise carry megabytes of them.
func (w *Watcher) start(ctx context.Context) {
	f := informers.NewSharedInformerFactoryWithOptions(w.client, 0, informers.WithTransform(dropManagedFields))
	r := f.Resource().V1()
	w.watch(r.DeviceClasses().Informer(), func(inv *dra.Inventory, obj any) []string {
		return inv.SetClass(obj.(*resourceapi.DeviceClass))
	}, func(inv *dra.Inventory, _, name string) []string { return inv.DeleteClass(name) })
	w.watch(r.ResourceSlices().Informer(), func(inv *dra.Inventory, obj any) []string {
		return inv.SetSlice(obj.(*resourceapi.ResourceSlice))
	}, func(inv *dra.Inventory, _, name string) []string { return inv.DeleteSlice(name) })
	w.watch(r.ResourceClaims().Informer(), func(inv *dra.Inventory, obj any) []string {
		return inv.SetClaim(obj.(*resourceapi.ResourceClaim))
	}, (*dra.Inventory).DeleteClaim)
	w.watch(r.ResourceClaimTemplates().Informer(), func(inv *dra.Inventory, obj any) []string {
		inv.SetTemplate(obj.(*resourceapi.ResourceClaimTemplate))
		return nil
	}, func(inv *dra.Inventory, namespace, name string) []string {
		inv.DeleteTemplate(namespace, name)
		return nil
	})
	klog.InfoS("Watching Dynamic Resource Allocation", "resources", "deviceclasses, resourceslices, resourceclaims, resourceclaimtemplates.resource.k8s.io/v1")
	f.Start(ctx.Done())
}

// watch hands one informer's objects to the inventory: set takes an object's latest version,
// forget a deleted one.
func (w *Watcher) watch(inf cache.SharedIndexInformer, set func(*dra.Inventory, any) []string, forget func(inv *dra.Inventory, namespace, name string) []string) {
	observe := func(obj any) {
		m, ok := obj.(metav1.Object)
		if !ok {
			return
		}
		w.manager.UpdateDevices(m.GetNamespace(), func(inv *dra.Inventory) []string { return set(inv, obj) })
	}
	reg, err := inf.AddEventHandler(cache.ResourceEventHandlerFuncs{
		AddFunc:    observe,
		UpdateFunc: func(_, obj any) { observe(obj) },
		DeleteFunc: func(obj any) {
			if tomb, ok := obj.(cache.DeletedFinalStateUnknown); ok {
				obj = tomb.Obj
			}
			if m, ok := obj.(metav1.Object); ok {
				w.manager.UpdateDevices(m.GetNamespace(), func(inv *dra.Inventory) []string {
					return forget(inv, m.GetNamespace(), m.GetName())
				})
			}
		},
	})
	if err != nil {
		klog.ErrorS(err, "Cannot watch a Dynamic Resource Allocation resource")
		return
	}
	w.mu.Lock()
	w.synced = append(w.synced, reg.HasSynced)
	w.mu.Unlock()
}

func dropManagedFields(obj any) (any, error) {
	if m, ok := obj.(metav1.Object); ok {
		m.SetManagedFields(nil)
	}
	return obj, nil
}

// HasSynced reports whether discovery answered and, where the API is served, every informer's
// initial list reached the manager.
func (w *Watcher) HasSynced() bool {
	w.mu.Lock()
	defer w.mu.Unlock()
	if !w.asked {
		return false
	}
	for _, s := range w.synced {
		if !s() {
			return false
		}
	}
	return true
}
