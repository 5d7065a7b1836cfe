package gang

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/lockstep-sched/lockstep/decide"
	"github.com/lockstep-sched/lockstep/dialect"

	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/tools/record"

	"github.com/lockstep-sched/lockstep/test/lib/builders"
	"github.com/lockstep-sched/lockstep/test/lib/schedsim"

	"github.com/lockstep-sched/lockstep/views"
)

// t0 is the creation time test pods count from; members are ordered by it.
var t0 = time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC)

// Every test's decisions are checked against a snapshot made afresh (snapshot.go).
func init() { verifySnapshots = true }

// queueView is one queue's view; ok is false for a queue lockstep does not know.
func queueView(m *Manager, key string) (QueueView, bool) {
	for _, v := range m.Queues() {
		if v.Key == key {
			return v, true
		}
	}
	return QueueView{}, false
}

// testConfig keeps every wait short so that the tests run in well under a second each.
func testConfig() Config {
	return Config{
		DefaultWaitingTime:  30 * time.Second,
		BindWait:            200 * time.Millisecond,
		CommitTimeout:       5 * time.Second,
		ExpiryCheckInterval: 20 * time.Millisecond,
		Reader:              dialect.Pods{},
	}
}

// bindCall is one binding the manager asked for; fakeBinder records them (package schedsim).
type bindCall = schedsim.Binding

type fakeBinder = schedsim.Binder

func newFakeBinder() *fakeBinder { return &schedsim.Binder{} }

// env is a manager fed with nodes and pods the way its informers would, plus a fake binder and
// an event recorder.
type env struct {
	t      *testing.T
	m      *Manager
	binder *fakeBinder
	rec    *record.FakeRecorder
	nodes  []string

	mu   sync.Mutex
	pods map[string]*corev1.Pod // ns/name -> latest object, for the PodGetter
}

func newEnv(t *testing.T, cfg Config, nodes ...*corev1.Node) *env {
	t.Helper()
	e := &env{t: t, binder: newFakeBinder(), rec: record.NewFakeRecorder(10000), pods: map[string]*corev1.Pod{}}
	e.m = NewManager(cfg, e.binder, e.getPod, e.rec, nil)
	t.Cleanup(e.m.Stop)
	for _, n := range nodes {
		e.m.UpsertNode(n)
		e.nodes = append(e.nodes, n.Name)
	}
	return e
}

func (e *env) getPod(_ context.Context, namespace, name string) (*corev1.Pod, error) {
	e.mu.Lock()
	defer e.mu.Unlock()
	if p, ok := e.pods[namespace+"/"+name]; ok {
		return p.DeepCopy(), nil
	}
	return nil, apierrors.NewNotFound(schema.GroupResource{Resource: "pods"}, name)
}

// add delivers pods as informer events.
func (e *env) add(pods ...*corev1.Pod) {
	for _, p := range pods {
		e.mu.Lock()
		e.pods[p.Namespace+"/"+p.Name] = p
		e.mu.Unlock()
		e.m.UpsertPod(p)
	}
}

// filter asks about every node of the cluster.
func (e *env) filter(p *corev1.Pod) FilterResult {
	return e.filterNodes(p, e.nodes)
}

// filterNodes calls Filter and spells its answer out as a list of passing nodes, checking on the
// way that Filter passes only nodes it was offered, that an answer of "all pass" names none, and
// that only failed nodes are called resolvable.
func (e *env) filterNodes(p *corev1.Pod, nodes []string) FilterResult {
	r := e.m.Filter(p, nodes)
	if r.AllPass && (r.Feasible != nil || r.Failed != nil) {
		e.t.Errorf("pod %s/%s: all nodes pass, yet feasible %v and failed %v", p.Namespace, p.Name, r.Feasible, r.Failed)
	}
	offered := decide.NodeSet(nodes)
	for _, n := range r.Feasible {
		if !offered[n] {
			e.t.Errorf("pod %s/%s: feasible node %q was not offered", p.Namespace, p.Name, n)
		}
	}
	for n := range r.Resolvable {
		if _, failed := r.Failed[n]; !failed {
			e.t.Errorf("pod %s/%s: node %q is called resolvable but did not fail", p.Namespace, p.Name, n)
		}
	}
	return FilterResult{Feasible: slices.Clone(r.Passing(nodes)), Failed: r.Failed, Resolvable: r.Resolvable}
}

// managerVerbs is the manager as schedsim drives it.
type managerVerbs struct{ *Manager }

func (v managerVerbs) Filter(pod *corev1.Pod, nodes []string) ([]string, map[string]string) {
	r := v.Manager.Filter(pod, nodes)
	return r.Passing(nodes), r.Failed
}

// place is one scheduling step of a pod over every node, as kube-scheduler takes it.
func (e *env) place(p *corev1.Pod) string {
	e.t.Helper()
	node, failed := schedsim.Place(managerVerbs{e.m}, p, e.nodes)
	require.NotEmpty(e.t, node, "pod %s/%s: failed nodes: %v", p.Namespace, p.Name, failed)
	return node
}

// filterOne filters and requires exactly one feasible node, the way a gang member before quorum
// is answered, and returns it.
func (e *env) filterOne(p *corev1.Pod) string {
	e.t.Helper()
	r := e.filter(p)
	require.Len(e.t, r.Feasible, 1, "pod %s/%s: failed nodes: %v", p.Namespace, p.Name, r.Failed)
	return r.Feasible[0]
}

func (e *env) bind(p *corev1.Pod, node string) error {
	return e.m.Bind(context.Background(), p.Namespace, p.Name, p.UID, node)
}

// bindAsync starts a Bind and returns the channel its result arrives on.
func (e *env) bindAsync(p *corev1.Pod, node string) <-chan error {
	ch := make(chan error, 1)
	go func() { ch <- e.bind(p, node) }()
	return ch
}

// status returns one gang's status; the gang must exist.
func (e *env) status(namespace, name string) views.GangStatus {
	e.t.Helper()
	for _, g := range e.m.Status(namespace) {
		if g.Name == name {
			return g
		}
	}
	e.t.Fatalf("gang %s/%s not in Status", namespace, name)
	return views.GangStatus{}
}

// memberStates maps pod ns/name to its state in the gang's status.
func (e *env) memberStates(namespace, name string) map[string]string {
	out := map[string]string{}
	for _, mb := range e.status(namespace, name).Members {
		out[mb.Pod] = mb.State
	}
	return out
}

// events drains the recorder.
func (e *env) events() []string {
	var out []string
	for {
		select {
		case ev := <-e.rec.Events:
			out = append(out, ev)
		default:
			return out
		}
	}
}

// waitEvent waits for an event of the given type and reason whose text contains every part,
// discarding the events before it.
func (e *env) waitEvent(eventType, reason string, parts ...string) string {
	e.t.Helper()
	deadline := time.After(5 * time.Second)
	prefix := eventType + " " + reason + " "
	for {
		select {
		case ev := <-e.rec.Events:
			if !strings.HasPrefix(ev, prefix) {
				continue
			}
			ok := true
			for _, part := range parts {
				ok = ok && strings.Contains(ev, part)
			}
			if ok {
				return ev
			}
		case <-deadline:
			e.t.Fatalf("no %s event containing %q within 5s", prefix, parts)
			return ""
		}
	}
}

// recv waits for one result with a deadline.
func recv[T any](t *testing.T, ch <-chan T, what string) T {
	t.Helper()
	select {
	case v := <-ch:
		return v
	case <-time.After(10 * time.Second):
		t.Fatalf("%s: nothing within 10s", what)
		var zero T
		return zero
	}
}

// requireNoValue checks that nothing has arrived on ch yet.
func requireNoValue[T any](t *testing.T, ch <-chan T, what string) {
	t.Helper()
	select {
	case v := <-ch:
		t.Fatalf("%s: got %v, want nothing yet", what, v)
	default:
	}
}

// gpuNodes is count nodes named prefix-i with gpus GPUs each and room for everything else.
func gpuNodes(prefix string, count int, gpus int64) []*corev1.Node {
	return builders.GPUNodes(prefix, count, gpus)
}

// members makes count gang members named prefix-i, i seconds after t0, each asking for gpus GPUs.
func members(namespace, gangName, prefix string, count, minAvailable int, gpus int64, opts ...func(*builders.PodBuilder)) []*corev1.Pod {
	out := make([]*corev1.Pod, count)
	for i := range out {
		b := builders.Pod(namespace, fmt.Sprintf("%s-%d", prefix, i)).GPU(gpus).CPU("1").Memory("1Gi").
			Gang(gangName, minAvailable).Created(t0.Add(time.Duration(i) * time.Second))
		for _, o := range opts {
			o(b)
		}
		out[i] = b.Obj()
	}
	return out
}

func keyOf(p *corev1.Pod) string { return p.Namespace + "/" + p.Name }

func timeSecond(i int) time.Duration { return time.Duration(i) * time.Second }

// waitStates waits until the named members of a gang are in the given states.
func (e *env) waitStates(namespace, name string, want map[string]string) {
	e.t.Helper()
	require.Eventually(e.t, func() bool {
		got := e.memberStates(namespace, name)
		for pod, state := range want {
			if got[pod] != state {
				return false
			}
		}
		return true
	}, 5*time.Second, 2*time.Millisecond, "gang %s/%s: want member states %v", namespace, name, want)
}
