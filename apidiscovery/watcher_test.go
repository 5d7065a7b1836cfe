package apidiscovery

import (
	"context"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/watch"
	fakediscovery "k8s.io/client-go/discovery/fake"
	dynamicfake "k8s.io/client-go/dynamic/fake"
	"k8s.io/client-go/kubernetes/fake"
	clienttesting "k8s.io/client-go/testing"
	"k8s.io/client-go/tools/cache"
)

// widgetAPI is an API of the test's own: one resource a project serves.
type widgetAPI struct {
	project string
	// kind is the objects' kind, which the fake client takes the resource from.
	kind string
	gvr  schema.GroupVersionResource
}

var (
	gadgets = widgetAPI{project: "acme", kind: "Gadget", gvr: schema.GroupVersionResource{Group: "acme.example", Version: "v1", Resource: "gadgets"}}
	gizmos  = widgetAPI{project: "initech", kind: "Gizmo", gvr: schema.GroupVersionResource{Group: "initech.example", Version: "v1beta1", Resource: "gizmos"}}
)

// recorder keeps what the watcher handed over, as "observe <resource> <name>" and
// "forget <resource> <name>".
type recorder struct {
	mu     sync.Mutex
	events []string
}

func (r *recorder) record(verb string) func(widgetAPI, *unstructured.Unstructured) {
	return func(api widgetAPI, obj *unstructured.Unstructured) {
		r.mu.Lock()
		defer r.mu.Unlock()
		r.events = append(r.events, verb+" "+api.gvr.Resource+" "+obj.GetName())
	}
}

// saw reports whether event was handed over, for require.Eventually.
func (r *recorder) saw(event string) func() bool {
	return func() bool {
		r.mu.Lock()
		defer r.mu.Unlock()
		for _, e := range r.events {
			if e == event {
				return true
			}
		}
		return false
	}
}

func widget(api widgetAPI, name, color string) *unstructured.Unstructured {
	obj := &unstructured.Unstructured{Object: map[string]any{"spec": map[string]any{"color": color}}}
	obj.SetAPIVersion(api.gvr.GroupVersion().String())
	obj.SetKind(api.kind)
	obj.SetNamespace("default")
	obj.SetName(name)
	return obj
}

// apiserver is a fake dynamic client that has every widget API and fake discovery that serves
// those served.
type apiserver struct {
	dynamic   *dynamicfake.FakeDynamicClient
	discovery *fakediscovery.FakeDiscovery
}

func newAPIServer(objects ...runtime.Object) *apiserver {
	listKinds := map[schema.GroupVersionResource]string{gadgets.gvr: "GadgetList", gizmos.gvr: "GizmoList"}
	return &apiserver{
		dynamic:   dynamicfake.NewSimpleDynamicClientWithCustomListKinds(runtime.NewScheme(), listKinds, objects...),
		discovery: fake.NewClientset().Discovery().(*fakediscovery.FakeDiscovery),
	}
}

// serve makes discovery list api, with a status subresource.
func (s *apiserver) serve(api widgetAPI) {
	s.discovery.Resources = append(s.discovery.Resources, &metav1.APIResourceList{
		GroupVersion: api.gvr.GroupVersion().String(),
		APIResources: []metav1.APIResource{{Name: api.gvr.Resource, Namespaced: true}, {Name: api.gvr.Resource + "/status"}},
	})
}

// watching is closed once an informer watches api: the fake client does not replay what was
// created between its list and its watch. The fake holds its lock until the tracker behind this
// reactor has registered the watch, so nothing created after the close is missed.
func (s *apiserver) watching(api widgetAPI) <-chan struct{} {
	started := make(chan struct{})
	var once sync.Once
	s.dynamic.PrependWatchReactor(api.gvr.Resource, func(clienttesting.Action) (bool, watch.Interface, error) {
		once.Do(func() { close(started) })
		return false, nil, nil // the tracker answers
	})
	return started
}

func (s *apiserver) watcher(r *recorder) *Watcher[widgetAPI] {
	return NewWatcher(Config[widgetAPI]{
		Client: s.dynamic, Discovery: s.discovery, APIs: []widgetAPI{gadgets, gizmos},
		Resource: func(a widgetAPI) schema.GroupVersionResource { return a.gvr },
		Dialect:  func(a widgetAPI) string { return a.project },
		Noun:     "widget", Interval: time.Hour,
		Observe: r.record("observe"), Forget: r.record("forget"),
	})
}

func watchedResources(w *Watcher[widgetAPI]) []string {
	var out []string
	for _, a := range w.Watching() {
		out = append(out, fmt.Sprintf("%s status=%t", a.API.gvr.Resource, a.HasStatus))
	}
	return out
}

const wait, poll = 5 * time.Second, 5 * time.Millisecond

// An API not served is not watched, and one served later is picked up by the next discovery.
func TestDiscoverWatchesServedAPIsOnly(t *testing.T) {
	s := newAPIServer(widget(gadgets, "a", "red"), widget(gizmos, "b", "blue"))
	s.serve(gadgets)
	r := &recorder{}
	w := s.watcher(r)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()

	w.Discover(ctx)
	require.Equal(t, []string{"gadgets status=true"}, watchedResources(w))
	require.Eventually(t, w.HasSynced, wait, poll)
	require.True(t, r.saw("observe gadgets a")())
	require.False(t, r.saw("observe gizmos b")(), "gizmos are not served")
	_, watched := w.Lookup(gizmos.gvr)
	require.False(t, watched)

	s.serve(gizmos)
	w.Discover(ctx)
	require.Equal(t, []string{"gadgets status=true", "gizmos status=true"}, watchedResources(w))
	require.Eventually(t, r.saw("observe gizmos b"), wait, poll)
	got, watched := w.Lookup(gizmos.gvr)
	require.True(t, watched)
	require.Equal(t, gizmos, got.API)
	require.Eventually(t, func() bool { _, exists, _ := got.Store.GetByKey("default/b"); return exists }, wait, poll)

	w.Discover(ctx)
	require.Len(t, w.Watching(), 2, "a running informer is not started twice")
}

// Adds and updates reach Observe, deletes Forget.
func TestEventsReachHandler(t *testing.T) {
	s := newAPIServer()
	s.serve(gadgets)
	watching := s.watching(gadgets)
	r := &recorder{}
	w := s.watcher(r)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	w.Discover(ctx)
	select {
	case <-watching:
	case <-time.After(wait):
		t.Fatal("the informer never watched")
	}

	gadgetClient := s.dynamic.Resource(gadgets.gvr).Namespace("default")
	_, err := gadgetClient.Create(ctx, widget(gadgets, "a", "red"), metav1.CreateOptions{})
	require.NoError(t, err)
	require.Eventually(t, r.saw("observe gadgets a"), wait, poll)

	_, err = gadgetClient.Update(ctx, widget(gadgets, "a", "green"), metav1.UpdateOptions{})
	require.NoError(t, err)
	require.Eventually(t, func() bool {
		r.mu.Lock()
		defer r.mu.Unlock()
		return len(r.events) == 2 && r.events[1] == "observe gadgets a"
	}, wait, poll, "the update is observed")

	require.NoError(t, gadgetClient.Delete(ctx, "a", metav1.DeleteOptions{}))
	require.Eventually(t, r.saw("forget gadgets a"), wait, poll)
}

// A delete the informer learnt of only at a relist reaches Forget as the object last known;
// anything but an object is dropped.
func TestTombstoneReachesForget(t *testing.T) {
	r := &recorder{}
	w := newAPIServer().watcher(r)
	h := w.handler(gadgets)
	h.OnDelete(cache.DeletedFinalStateUnknown{Key: "default/a", Obj: widget(gadgets, "a", "red")})
	h.OnDelete(cache.DeletedFinalStateUnknown{Key: "default/b", Obj: "not an object"})
	h.OnAdd("not an object", false)
	require.Equal(t, []string{"forget gadgets a"}, r.events)
}

// HasSynced waits for the first discovery, then for every informer's initial list to be handed
// over.
func TestHasSynced(t *testing.T) {
	s := newAPIServer(widget(gadgets, "a", "red"))
	s.serve(gadgets)
	listed := make(chan struct{})
	s.dynamic.PrependReactor("list", gadgets.gvr.Resource, func(clienttesting.Action) (bool, runtime.Object, error) {
		<-listed
		return false, nil, nil // the tracker answers
	})
	r := &recorder{}
	w := s.watcher(r)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	require.False(t, w.HasSynced(), "before the first discovery")

	w.Discover(ctx)
	require.False(t, w.HasSynced(), "while the list is under way")
	close(listed)
	require.Eventually(t, w.HasSynced, wait, poll)
	require.True(t, r.saw("observe gadgets a")(), "synced means handed over")
}

// With nothing served, the first discovery is all HasSynced waits for.
func TestHasSyncedWithNothingServed(t *testing.T) {
	w := newAPIServer().watcher(&recorder{})
	require.False(t, w.HasSynced())
	w.Discover(context.Background())
	require.True(t, w.HasSynced())
	require.Empty(t, w.Watching())
}
