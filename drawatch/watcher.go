// Package drawatch keeps lockstep in step with what Dynamic Resource Allocation publishes: the
// DeviceClasses, ResourceSlices, ResourceClaims and ResourceClaimTemplates of resource.k8s.io/v1,
// watched only where the apiserver serves that API (from Kubernetes 1.34; a cluster that serves
// it later is picked up without a restart). Each object reaches the gang manager's inventory as
// a typed value (package dra reads it).
//
// It owns only that traffic: it decides nothing, writes nothing (giving back a waiting gang's
// devices is package gang's, through gang.APIClaimReleaser), and reads no other API.
package drawatch

import (
	"context"
	"time"

	resourceapi "k8s.io/api/resource/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/discovery"
	"k8s.io/client-go/dynamic"
	"k8s.io/klog/v2"

	"github.com/lockstep-sched/lockstep/apidiscovery"
	"github.com/lockstep-sched/lockstep/dra"
)

// Manager is what the watcher needs of the gang manager.
type Manager interface {
	UpdateDevices(namespace string, change func(*dra.Inventory) []string)
}

// kind is one of the four resources, and what a change of it does to the inventory.
type kind struct {
	resource string
	set      func(inv *dra.Inventory, obj *unstructured.Unstructured) ([]string, error)
	forget   func(inv *dra.Inventory, namespace, name string) []string
}

var kinds = []kind{
	{resource: "deviceclasses", set: setTyped((*dra.Inventory).SetClass),
		forget: func(inv *dra.Inventory, _, name string) []string { return inv.DeleteClass(name) }},
	{resource: "resourceslices", set: setTyped((*dra.Inventory).SetSlice),
		forget: func(inv *dra.Inventory, _, name string) []string { return inv.DeleteSlice(name) }},
	{resource: "resourceclaims", set: setTyped((*dra.Inventory).SetClaim),
		forget: (*dra.Inventory).DeleteClaim},
	{resource: "resourceclaimtemplates",
		set: setTyped(func(inv *dra.Inventory, t *resourceapi.ResourceClaimTemplate) []string {
			inv.SetTemplate(t)
			return nil
		}),
		forget: func(inv *dra.Inventory, namespace, name string) []string {
			inv.DeleteTemplate(namespace, name)
			return nil
		}},
}

// setTyped converts an informer's object to its typed form and hands it to set.
func setTyped[T any](set func(*dra.Inventory, *T) []string) func(*dra.Inventory, *unstructured.Unstructured) ([]string, error) {
	return func(inv *dra.Inventory, u *unstructured.Unstructured) ([]string, error) {
		obj := new(T)
		if err := runtime.DefaultUnstructuredConverter.FromUnstructured(u.Object, obj); err != nil {
			return nil, err
		}
		return set(inv, obj), nil
	}
}

func (k kind) gvr() schema.GroupVersionResource {
	return resourceapi.SchemeGroupVersion.WithResource(k.resource)
}

// Watcher runs one informer per DRA resource the apiserver serves. Create it with New, then Run it.
type Watcher struct {
	manager Manager
	apis    *apidiscovery.Watcher[kind]
}

// New makes a watcher that asks discovery every interval whether resource.k8s.io/v1 is served.
func New(client dynamic.Interface, disc discovery.DiscoveryInterface, m Manager, interval time.Duration) *Watcher {
	w := &Watcher{manager: m}
	w.apis = apidiscovery.NewWatcher(apidiscovery.Config[kind]{
		Client: client, Discovery: disc, APIs: kinds, Interval: interval, Noun: "DRA",
		Resource: kind.gvr,
		Dialect:  func(kind) string { return "Dynamic Resource Allocation" },
		Observe:  w.observe,
		Forget:   w.forget,
	})
	return w
}

func (w *Watcher) observe(k kind, obj *unstructured.Unstructured) {
	var err error
	w.manager.UpdateDevices(obj.GetNamespace(), func(inv *dra.Inventory) []string {
		var nodes []string
		nodes, err = k.set(inv, obj)
		return nodes
	})
	if err != nil {
		// The apiserver validated the object; only a client older than the server's schema
		// fails to read it.
		klog.ErrorS(err, "Cannot read a DRA object; it is left out of lockstep's count of devices",
			"resource", k.resource, "object", obj.GetNamespace()+"/"+obj.GetName())
	}
}

func (w *Watcher) forget(k kind, obj *unstructured.Unstructured) {
	w.manager.UpdateDevices(obj.GetNamespace(), func(inv *dra.Inventory) []string {
		return k.forget(inv, obj.GetNamespace(), obj.GetName())
	})
}

// Run discovers and watches until ctx ends.
func (w *Watcher) Run(ctx context.Context) { w.apis.Run(ctx) }

// HasSynced reports whether the first discovery ran and every served resource's initial list
// reached the manager.
func (w *Watcher) HasSynced() bool { return w.apis.HasSynced() }
