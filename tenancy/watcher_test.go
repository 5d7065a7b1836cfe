package tenancy

import (
	"context"
	"sort"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	fakediscovery "k8s.io/client-go/discovery/fake"
	dynamicfake "k8s.io/client-go/dynamic/fake"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes/fake"
	"k8s.io/client-go/tools/cache"
	"k8s.io/client-go/tools/record"

	"github.com/lockstep-sched/lockstep/dialect"
	"github.com/lockstep-sched/lockstep/gang"
	"github.com/lockstep-sched/lockstep/quota"
	"github.com/lockstep-sched/lockstep/wellknown"
)

// fakeManager records what it is told, as "set <key>", "set <key> !" for a queue with an
// error, "delete <key>" and "default <namespace>=<queue>".
type fakeManager struct {
	mu     sync.Mutex
	calls  []string
	queues map[string]quota.Queue
	views  []gang.QueueView
}

func newFakeManager() *fakeManager { return &fakeManager{queues: map[string]quota.Queue{}} }

func (m *fakeManager) SetQueue(q quota.Queue) {
	m.mu.Lock()
	defer m.mu.Unlock()
	call := "set " + q.Key()
	if q.Err != nil {
		call += " !"
	}
	m.calls = append(m.calls, call)
	m.queues[q.Key()] = q
}

func (m *fakeManager) DeleteQueue(key string) {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.calls = append(m.calls, "delete "+key)
	delete(m.queues, key)
}

func (m *fakeManager) SetNamespaceDefault(namespace, kind, name string) {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.calls = append(m.calls, "default "+kind+" "+namespace+"="+name)
}

func (m *fakeManager) Queues() []gang.QueueView {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.views
}

// takeCalls returns the calls since the last take.
func (m *fakeManager) takeCalls() []string {
	m.mu.Lock()
	defer m.mu.Unlock()
	calls := m.calls
	m.calls = nil
	return calls
}

func (m *fakeManager) queue(key string) quota.Queue {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.queues[key]
}

// queueObj builds a queue object of api as a dynamic informer hands it over.
func queueObj(api dialect.QueueAPI, namespace, name string, spec map[string]any) *unstructured.Unstructured {
	obj := &unstructured.Unstructured{Object: map[string]any{"spec": spec}}
	obj.SetAPIVersion(api.Resource.GroupVersion().String())
	obj.SetKind(map[bool]string{false: "Queue", true: "ElasticQuota"}[api.Namespaced])
	obj.SetNamespace(namespace)
	obj.SetName(name)
	obj.SetResourceVersion("1")
	return obj
}

func withStatus(obj *unstructured.Unstructured, status map[string]any) *unstructured.Unstructured {
	obj = obj.DeepCopy()
	obj.Object["status"] = status
	return obj
}

// step is one informer event: an object observed (add or update) or forgotten (delete); lead
// sets the write gate first, resync calls Resync.
type step struct {
	api    dialect.QueueAPI
	obj    *unstructured.Unstructured
	delete bool
	lead   *bool
	resync bool
	// want are the manager calls and Events the step makes.
	wantCalls  []string
	wantEvents []string
}

func TestQueueObjects(t *testing.T) {
	leading, standing := true, false
	teamA := queueObj(dialect.VolcanoQueue, "", "team-a", map[string]any{"weight": int64(2)})
	bad := queueObj(dialect.VolcanoQueue, "", "team-a", map[string]any{"weight": int64(-1)})
	badAgain := queueObj(dialect.VolcanoQueue, "", "team-a", map[string]any{"capability": map[string]any{"cpu": "lots"}})
	kbV1 := queueObj(dialect.KubeBatchQueue, "", "default", map[string]any{"weight": int64(1)})
	kbV2 := queueObj(dialect.KubeBatchQueueV1alpha2, "", "default", map[string]any{"weight": int64(3)})
	eqGPU := queueObj(dialect.ElasticQuota, "team-a", "gpu", map[string]any{"max": map[string]any{"nvidia.com/gpu": "4"}})
	eqCPU := queueObj(dialect.ElasticQuota, "team-a", "cpu", map[string]any{"max": map[string]any{"cpu": "8"}})
	eqOther := queueObj(dialect.ElasticQuota, "team-b", "gpu", nil)

	koordTeamA := queueObj(dialect.KoordinatorElasticQuota, "team-a", "team-a", map[string]any{"max": map[string]any{"nvidia.com/gpu": "2"}})
	koordListing := queueObj(dialect.KoordinatorElasticQuota, "pool", "shared", nil)
	koordListing.SetAnnotations(map[string]string{wellknown.AnnotationKoordinatorQuotaNamespaces: `["team-b"]`})
	koordListingMore := koordListing.DeepCopy()
	koordListingMore.SetAnnotations(map[string]string{wellknown.AnnotationKoordinatorQuotaNamespaces: `["team-a","team-b"]`})
	koordElsewhere := queueObj(dialect.KoordinatorElasticQuota, "team-a", "other", nil)

	childOfB := queueObj(dialect.VolcanoQueue, "", "a", map[string]any{"parent": "b"})
	childOfA := queueObj(dialect.VolcanoQueue, "", "b", map[string]any{"parent": "a"})
	topB := queueObj(dialect.VolcanoQueue, "", "b", nil)

	const badWeight = `Warning QueueInvalid Volcano Queue team-a: spec.weight="-1": must be positive; the queue's gangs wait until it is fixed`
	tests := []struct {
		name  string
		steps []step
	}{
		{name: "a queue is set, a usage update tells nothing new, a state change does, and it is deleted", steps: []step{
			{api: dialect.VolcanoQueue, obj: teamA, wantCalls: []string{"set Volcano Queue team-a"}},
			{api: dialect.VolcanoQueue, obj: withStatus(teamA, map[string]any{"allocated": map[string]any{"cpu": "2"}})},
			{api: dialect.VolcanoQueue, obj: withStatus(teamA, map[string]any{"state": "Closed"}), wantCalls: []string{"set Volcano Queue team-a"}},
			{api: dialect.VolcanoQueue, obj: teamA, delete: true, wantCalls: []string{"delete Volcano Queue team-a"}},
		}},
		{name: "an unusable queue: set with its error and one Event; fixed, then broken again, another", steps: []step{
			{api: dialect.VolcanoQueue, obj: bad, wantCalls: []string{"set Volcano Queue team-a !"}, wantEvents: []string{badWeight}},
			{api: dialect.VolcanoQueue, obj: withStatus(bad, map[string]any{"pending": int64(1)})},
			{api: dialect.VolcanoQueue, obj: teamA, wantCalls: []string{"set Volcano Queue team-a"}},
			{api: dialect.VolcanoQueue, obj: bad, wantCalls: []string{"set Volcano Queue team-a !"}, wantEvents: []string{badWeight}},
		}},
		{name: "a tree: a missing parent, then a cycle, each reported on the queues it breaks; mended, nothing more", steps: []step{
			{api: dialect.VolcanoQueue, obj: childOfB, wantCalls: []string{"set Volcano Queue a"},
				wantEvents: []string{`Warning QueueInvalid Volcano Queue a: spec.parent names parent b, which does not exist; the queue's gangs wait until it is fixed`}},
			{api: dialect.VolcanoQueue, obj: childOfA, wantCalls: []string{"set Volcano Queue b"},
				wantEvents: []string{
					`Warning QueueInvalid Volcano Queue a: spec.parent: the queues form a cycle, a → b → a; the queue's gangs wait until it is fixed`,
					`Warning QueueInvalid Volcano Queue b: spec.parent: the queues form a cycle, b → a → b; the queue's gangs wait until it is fixed`}},
			{api: dialect.VolcanoQueue, obj: topB, wantCalls: []string{"set Volcano Queue b"}},
			{resync: true},
		}},
		{name: "a standby writes no Event; it does once it leads and resyncs, and not twice", steps: []step{
			{lead: &standing},
			{api: dialect.VolcanoQueue, obj: badAgain, wantCalls: []string{"set Volcano Queue team-a !"}},
			{lead: &leading},
			{resync: true, wantEvents: []string{`Warning QueueInvalid Volcano Queue team-a: spec.capability.cpu="lots": must be a quantity such as 4, 500m or 16Gi; the queue's gangs wait until it is fixed`}},
			{resync: true},
		}},
		{name: "kube-batch's two versions name one queue: refused while both exist, the survivor set again", steps: []step{
			{api: dialect.KubeBatchQueue, obj: kbV1, wantCalls: []string{"set kube-batch Queue default"}},
			{api: dialect.KubeBatchQueueV1alpha2, obj: kbV2, wantCalls: []string{"set kube-batch Queue default !"},
				wantEvents: []string{`Warning QueueInvalid kube-batch Queue default: metadata.name="default": exists in scheduling.incubator.k8s.io/v1alpha1 and scheduling.sigs.dev/v1alpha2, which name the same queue: delete all but one; the queue's gangs wait until it is fixed`}},
			{api: dialect.KubeBatchQueue, obj: kbV1, delete: true, wantCalls: []string{"set kube-batch Queue default"}},
			{api: dialect.KubeBatchQueueV1alpha2, obj: kbV2, delete: true, wantCalls: []string{"delete kube-batch Queue default"}},
		}},
		{name: "two ElasticQuotas in a namespace: both refused; deleting one sets the other after the delete", steps: []step{
			{api: dialect.ElasticQuota, obj: eqGPU, wantCalls: []string{"set ElasticQuota team-a/gpu"}},
			{api: dialect.ElasticQuota, obj: eqOther, wantCalls: []string{"set ElasticQuota team-b/gpu"}},
			{api: dialect.ElasticQuota, obj: eqCPU, wantCalls: []string{"set ElasticQuota team-a/cpu !", "set ElasticQuota team-a/gpu !"},
				wantEvents: []string{
					`Warning QueueInvalid ElasticQuota team-a/cpu: metadata.namespace="team-a": namespace team-a also has ElasticQuota team-a/gpu; one applies to a namespace: delete all but one; the queue's gangs wait until it is fixed`,
					`Warning QueueInvalid ElasticQuota team-a/gpu: metadata.namespace="team-a": namespace team-a also has ElasticQuota team-a/cpu; one applies to a namespace: delete all but one; the queue's gangs wait until it is fixed`}},
			{api: dialect.ElasticQuota, obj: eqCPU, delete: true, wantCalls: []string{"delete ElasticQuota team-a/cpu", "set ElasticQuota team-a/gpu"}},
		}},
		{name: "Koordinator quotas crowd the namespaces they cover, with quotas of any kind", steps: []step{
			{api: dialect.KoordinatorElasticQuota, obj: koordTeamA, wantCalls: []string{"set Koordinator ElasticQuota team-a"}},
			{api: dialect.KoordinatorElasticQuota, obj: koordElsewhere, wantCalls: []string{"set Koordinator ElasticQuota other"}},
			{api: dialect.KoordinatorElasticQuota, obj: koordListing, wantCalls: []string{"set Koordinator ElasticQuota shared"}},
			{api: dialect.ElasticQuota, obj: eqOther, wantCalls: []string{"set ElasticQuota team-b/gpu !", "set Koordinator ElasticQuota shared !"},
				wantEvents: []string{
					`Warning QueueInvalid ElasticQuota team-b/gpu: metadata.namespace="team-b": namespace team-b also has Koordinator ElasticQuota shared; one applies to a namespace: delete all but one; the queue's gangs wait until it is fixed`,
					`Warning QueueInvalid Koordinator ElasticQuota shared: metadata.annotations.quota.scheduling.koordinator.sh/namespaces="team-b": namespace team-b also has ElasticQuota team-b/gpu; one applies to a namespace: delete all but one; the queue's gangs wait until it is fixed`}},
			{api: dialect.ElasticQuota, obj: eqOther, delete: true, wantCalls: []string{"delete ElasticQuota team-b/gpu", "set Koordinator ElasticQuota shared"}},
			{api: dialect.KoordinatorElasticQuota, obj: koordListingMore, wantCalls: []string{"set Koordinator ElasticQuota shared !", "set Koordinator ElasticQuota team-a !"},
				wantEvents: []string{
					`Warning QueueInvalid Koordinator ElasticQuota shared: metadata.annotations.quota.scheduling.koordinator.sh/namespaces="team-a": namespace team-a also has Koordinator ElasticQuota team-a; one applies to a namespace: delete all but one; the queue's gangs wait until it is fixed`,
					`Warning QueueInvalid Koordinator ElasticQuota team-a: metadata.name="team-a": namespace team-a also has Koordinator ElasticQuota shared; one applies to a namespace: delete all but one; the queue's gangs wait until it is fixed`}},
			{api: dialect.KoordinatorElasticQuota, obj: koordListing, wantCalls: []string{"set Koordinator ElasticQuota shared", "set Koordinator ElasticQuota team-a"}},
		}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			m := newFakeManager()
			rec := record.NewFakeRecorder(10)
			w := newBareWatcher(t, m, rec)
			lead := true
			w.SetWriteGate(func() bool { return lead })
			for i, s := range tc.steps {
				switch {
				case s.lead != nil:
					lead = *s.lead
				case s.resync:
					w.Resync()
				case s.delete:
					w.forget(s.api, s.obj)
				default:
					w.observe(s.api, s.obj)
				}
				require.Equal(t, s.wantCalls, m.takeCalls(), "step %d: manager calls", i)
				require.Equal(t, s.wantEvents, drain(rec), "step %d: Events", i)
			}
		})
	}
}

// newBareWatcher is a watcher whose informers the test plays by hand.
func newBareWatcher(t *testing.T, m Manager, rec record.EventRecorder) *Watcher {
	factory := informers.NewSharedInformerFactory(fake.NewClientset(), 0)
	w, err := New(Config{Namespaces: factory.Core().V1().Namespaces(), Manager: m, Recorder: rec,
		DiscoveryInterval: time.Hour, UsageInterval: time.Hour})
	require.NoError(t, err)
	return w
}

func drain(rec *record.FakeRecorder) []string {
	var out []string
	for {
		select {
		case e := <-rec.Events:
			out = append(out, e)
		default:
			sort.Strings(out)
			return out
		}
	}
}

func TestQueueReachesManagerAsRead(t *testing.T) {
	m := newFakeManager()
	w := newBareWatcher(t, m, record.NewFakeRecorder(10))
	spec := map[string]any{"min": map[string]any{"cpu": "4"}, "max": map[string]any{"nvidia.com/gpu": "4"}}
	obj := queueObj(dialect.ElasticQuota, "team-a", "gpu", spec)
	w.observe(dialect.ElasticQuota, obj)
	require.Equal(t, dialect.ElasticQuota.Parse(obj), m.queue("ElasticQuota team-a/gpu"))
}

func TestNamespaceDefaults(t *testing.T) {
	ns := func(annotations map[string]string) *corev1.Namespace {
		return &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "team-a", Annotations: annotations}}
	}
	named := ns(map[string]string{wellknown.AnnotationVolcanoQueueName: "research"})
	other := ns(map[string]string{wellknown.AnnotationVolcanoQueueName: "research", "owner": "ml"})
	tests := []struct {
		name  string
		event func(w *Watcher)
		want  []string
	}{
		{name: "a namespace naming a queue", event: func(w *Watcher) { w.namespaceAdded(named) },
			want: []string{"default Volcano Queue team-a=research"}},
		{name: "a namespace naming none has nothing to tell", event: func(w *Watcher) { w.namespaceAdded(ns(nil)) }},
		{name: "another annotation changed", event: func(w *Watcher) { w.namespaceUpdated(named, other) }},
		{name: "the queue changed", event: func(w *Watcher) { w.namespaceUpdated(ns(nil), named) },
			want: []string{"default Volcano Queue team-a=research"}},
		{name: "the annotation removed", event: func(w *Watcher) { w.namespaceUpdated(named, ns(nil)) },
			want: []string{"default Volcano Queue team-a="}},
		{name: "the namespace deleted, seen late", event: func(w *Watcher) {
			w.namespaceDeleted(cache.DeletedFinalStateUnknown{Key: "team-a", Obj: named})
		}, want: []string{"default Volcano Queue team-a="}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			m := newFakeManager()
			tc.event(newBareWatcher(t, m, record.NewFakeRecorder(1)))
			require.Equal(t, tc.want, m.takeCalls())
		})
	}
}

// cluster is a fake apiserver: a dynamic client serving every queue API, discovery that serves
// those listed, and a typed client with the namespaces.
type cluster struct {
	dynamic   *dynamicfake.FakeDynamicClient
	discovery *fakediscovery.FakeDiscovery
	factory   informers.SharedInformerFactory
}

func newCluster(objects []runtime.Object, namespaces ...*corev1.Namespace) *cluster {
	listKinds := map[schema.GroupVersionResource]string{}
	for _, api := range dialect.QueueAPIs() {
		listKinds[api.Resource] = map[bool]string{false: "QueueList", true: "ElasticQuotaList"}[api.Namespaced]
	}
	typed := fake.NewClientset()
	for _, ns := range namespaces {
		_, _ = typed.CoreV1().Namespaces().Create(context.Background(), ns, metav1.CreateOptions{})
	}
	return &cluster{
		dynamic:   dynamicfake.NewSimpleDynamicClientWithCustomListKinds(runtime.NewScheme(), listKinds, objects...),
		discovery: typed.Discovery().(*fakediscovery.FakeDiscovery),
		factory:   informers.NewSharedInformerFactory(typed, 0),
	}
}

// serve makes discovery list api, with a status subresource when status is set.
func (c *cluster) serve(api dialect.QueueAPI, status bool) {
	list := &metav1.APIResourceList{GroupVersion: api.Resource.GroupVersion().String(),
		APIResources: []metav1.APIResource{{Name: api.Resource.Resource, Namespaced: api.Namespaced}}}
	if status {
		list.APIResources = append(list.APIResources, metav1.APIResource{Name: api.Resource.Resource + "/status"})
	}
	c.discovery.Resources = append(c.discovery.Resources, list)
}

func (c *cluster) watcher(t *testing.T, m Manager) *Watcher {
	w, err := New(Config{Client: c.dynamic, Discovery: c.discovery, Namespaces: c.factory.Core().V1().Namespaces(),
		Manager: m, Recorder: record.NewFakeRecorder(10), DiscoveryInterval: time.Hour, UsageInterval: time.Hour})
	require.NoError(t, err)
	return w
}

// Only served APIs are watched, absent ones are no error, and a CRD installed later is picked up
// by the next discovery.
func TestDiscovery(t *testing.T) {
	volcano := queueObj(dialect.VolcanoQueue, "", "team-a", map[string]any{"weight": int64(2)})
	quotaObj := queueObj(dialect.ElasticQuota, "team-b", "gpu", nil)
	ns := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "team-b", Annotations: map[string]string{wellknown.AnnotationVolcanoQueueName: "research"}}}
	c := newCluster([]runtime.Object{volcano, quotaObj}, ns)
	c.serve(dialect.VolcanoQueue, true)
	m := newFakeManager()
	w := c.watcher(t, m)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	c.factory.Start(ctx.Done())

	w.queues.Discover(ctx)
	require.Eventually(t, w.HasSynced, 5*time.Second, 10*time.Millisecond)
	require.ElementsMatch(t, []string{"set Volcano Queue team-a", "default Volcano Queue team-b=research"}, m.takeCalls(),
		"HasSynced means the manager has the queues and namespaces")

	c.serve(dialect.ElasticQuota, true)
	w.queues.Discover(ctx)
	require.Eventually(t, func() bool { return m.queue("ElasticQuota team-b/gpu").Kind != "" }, 5*time.Second, 10*time.Millisecond)
	require.True(t, w.HasSynced())
}

func TestUsagePatch(t *testing.T) {
	alloc := quota.Resources{MilliCPU: 1500, Memory: 16 << 30, GPU: 4}
	written := map[string]any{"status": map[string]any{"allocated": map[string]any{"cpu": "1500m", "memory": "16Gi", "nvidia.com/gpu": "4"}}}
	tests := []struct {
		name   string
		status map[string]any
		alloc  quota.Resources
		want   map[string]any
	}{
		{name: "no status yet", alloc: alloc, want: written},
		{name: "the same, written otherwise, and more lockstep does not count", alloc: alloc,
			status: map[string]any{"allocated": map[string]any{"cpu": "1.5", "memory": "17179869184", "nvidia.com/gpu": int64(4), "pods": "3"}}},
		{name: "Volcano's scheduler wrote other numbers", alloc: alloc,
			status: map[string]any{"allocated": map[string]any{"cpu": "1", "memory": "16Gi", "nvidia.com/gpu": "4"}}, want: written},
		{name: "nothing allocated, and a count below zero, is zero", alloc: quota.Resources{MilliCPU: -5},
			status: map[string]any{"allocated": "garbage"},
			want:   map[string]any{"status": map[string]any{"allocated": map[string]any{"cpu": "0", "memory": "0", "nvidia.com/gpu": "0"}}}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			obj := queueObj(dialect.VolcanoQueue, "", "team-a", nil)
			if tc.status != nil {
				obj.Object["status"] = tc.status
			}
			require.Equal(t, tc.want, usagePatch("allocated", obj, tc.alloc))
		})
	}
}

// Usage is written through the status subresource where there is one, only when it changed, and
// only when the manager is ready and the write gate allows; kube-batch's queues have no usage to
// write.
func TestWriteUsage(t *testing.T) {
	volcano := queueObj(dialect.VolcanoQueue, "", "team-a", nil)
	elastic := queueObj(dialect.ElasticQuota, "team-b", "gpu", nil)
	kubeBatch := queueObj(dialect.KubeBatchQueue, "", "default", nil)
	c := newCluster([]runtime.Object{volcano, elastic, kubeBatch})
	c.serve(dialect.VolcanoQueue, true)
	c.serve(dialect.ElasticQuota, false)
	c.serve(dialect.KubeBatchQueue, true)
	m := newFakeManager()
	m.views = []gang.QueueView{
		{Status: quota.Status{Key: "Volcano Queue team-a", Allocated: quota.Resources{GPU: 2, MilliCPU: 4000}}},
		{Status: quota.Status{Key: "ElasticQuota team-b/gpu", Allocated: quota.Resources{GPU: 1}}},
		{Status: quota.Status{Key: "kube-batch Queue default", Allocated: quota.Resources{GPU: 1}}},
	}
	w := c.watcher(t, m)
	lead, ready := true, false
	w.cfg.Ready = func() bool { return ready }
	w.SetWriteGate(func() bool { return lead })
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	c.factory.Start(ctx.Done())
	w.queues.Discover(ctx)
	require.Eventually(t, w.HasSynced, 5*time.Second, 10*time.Millisecond)
	c.dynamic.ClearActions()

	w.writeUsageOnce(ctx)
	require.Empty(t, patches(c), "nothing before the manager has taken in the cluster")

	lead, ready = false, true
	w.writeUsageOnce(ctx)
	require.Empty(t, patches(c), "a standby writes nothing")

	lead = true
	w.writeUsageOnce(ctx)
	require.ElementsMatch(t, []string{
		`queues/status  team-a {"status":{"allocated":{"cpu":"4","memory":"0","nvidia.com/gpu":"2"}}}`,
		`elasticquotas team-b gpu {"status":{"used":{"cpu":"0","memory":"0","nvidia.com/gpu":"1"}}}`,
	}, patches(c))

	require.Eventually(t, func() bool { // the informers see lockstep's own writes
		c.dynamic.ClearActions()
		w.writeUsageOnce(ctx)
		return len(patches(c)) == 0
	}, 5*time.Second, 10*time.Millisecond, "unchanged usage is not written again")
}

// patches lists the merge patches sent, as "<resource>[/<subresource>] <namespace> <name> <body>".
func patches(c *cluster) []string {
	var out []string
	for _, a := range c.dynamic.Actions() {
		p, ok := a.(interface {
			GetName() string
			GetPatch() []byte
		})
		if !ok || a.GetVerb() != "patch" {
			continue
		}
		res := a.GetResource().Resource
		if a.GetSubresource() != "" {
			res += "/" + a.GetSubresource()
		}
		out = append(out, strings.Join([]string{res, a.GetNamespace(), p.GetName(), string(p.GetPatch())}, " "))
	}
	return out
}
