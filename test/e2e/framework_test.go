package e2e

import (
	"context"
	"encoding/json"
	"fmt"
	"path/filepath"
	"sort"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/lockstep-sched/lockstep/dialect"
	"github.com/lockstep-sched/lockstep/views"

	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/rand"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/tools/cache"

	"github.com/lockstep-sched/lockstep/test/lib/builders"
	"github.com/lockstep-sched/lockstep/test/lib/cluster"
	"github.com/lockstep-sched/lockstep/test/lib/harness"
	"github.com/lockstep-sched/lockstep/wellknown"
)

// scenario is one test's namespace and nodes, removed when the test ends.
type scenario struct {
	t     *testing.T
	ctx   context.Context
	ns    string
	nodes []string
	binds *bindLog
}

// newScenario creates a namespace and n nodes with gpus GPUs each, named after the test.
func newScenario(t *testing.T, n, gpus int) *scenario {
	t.Helper()
	specs := make([]cluster.NodeSpec, n)
	for i := range specs {
		specs[i] = cluster.NodeSpec{Name: fmt.Sprintf("gpu-%d", i), GPUs: gpus}
	}
	return newScenarioWithNodes(t, specs...)
}

// newScenarioWithNodes creates a namespace and the nodes, their names prefixed with the
// scenario's id so that tests never share a node.
func newScenarioWithNodes(t *testing.T, nodes ...cluster.NodeSpec) *scenario {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	id := strings.ToLower(rand.String(5))
	s := &scenario{t: t, ctx: ctx, ns: "e2e-" + id}
	_, err := env.client.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: s.ns}}, metav1.CreateOptions{})
	require.NoError(t, err)
	for _, spec := range nodes {
		spec.Name = id + "-" + spec.Name
		_, err := env.cluster.CreateNode(ctx, spec)
		require.NoError(t, err)
		s.nodes = append(s.nodes, spec.Name)
	}
	s.binds = watchBinds(t, ctx, s.ns)
	t.Cleanup(func() {
		if t.Failed() {
			t.Logf("pods:\n%s", s.describePods())
			t.Logf("/debug/gangs:\n%s", s.rawGangs())
			t.Logf("lockstep log tail:\n%s", env.lockstep.Tail(6000))
		}
		s.deleteAllPods()
		s.assertNothingLeftBehind()
		s.removeNodesAndNamespace()
		cancel()
	})
	return s
}

// removeNodesAndNamespace deletes what the scenario created around its pods, without waiting.
func (s *scenario) removeNodesAndNamespace() {
	bg := context.Background()
	for _, name := range s.nodes {
		_ = env.client.CoreV1().Nodes().Delete(bg, name, metav1.DeleteOptions{})
	}
	_ = env.client.CoreV1().Namespaces().Delete(bg, s.ns, metav1.DeleteOptions{})
}

// createExample creates the pods a controller would make from an examples/ file.
func (s *scenario) createExample(file string) []*corev1.Pod {
	s.t.Helper()
	pods, err := harness.PodsOf(filepath.Join(env.root, "examples", file), s.ns)
	require.NoError(s.t, err)
	for _, p := range pods {
		s.create(p)
	}
	return pods
}

func (s *scenario) create(p *corev1.Pod) *corev1.Pod {
	s.t.Helper()
	p.Namespace = s.ns
	out, err := env.client.CoreV1().Pods(s.ns).Create(s.ctx, p, metav1.CreateOptions{})
	require.NoError(s.t, err, "creating pod %s", p.Name)
	return out
}

// podSpec builds a pod asking for gpus GPUs, optionally in a gang.
type podSpec struct {
	name         string
	gpus         int
	gang         string
	minAvailable int
	waitingTime  string
	nodeName     string
	nodeSelector map[string]string
	affinity     *corev1.Affinity
	annotations  map[string]string
}

func (ps podSpec) pod() *corev1.Pod {
	b := builders.Pod("", ps.name).CPU("100m").Memory("64Mi").Node(ps.nodeName)
	if ps.gpus > 0 {
		b.GPU(int64(ps.gpus))
	}
	if ps.gang != "" {
		b.Gang(ps.gang, ps.minAvailable)
	}
	if ps.waitingTime != "" {
		b.WaitingTime(ps.waitingTime)
	}
	for k, v := range ps.nodeSelector {
		b.NodeSelector(k, v)
	}
	if ps.affinity != nil {
		b.Affinity(ps.affinity)
	}
	for k, v := range ps.annotations {
		b.Annotation(k, v)
	}
	return b.Obj()
}

// behindBeacon keeps a pod off every node until a pod labelled key=value runs there (openNodes):
// a rule of the scheduler's own that lockstep does not model, so lockstep plans the pod's gang as
// if it could go. A nodeSelector would not do: lockstep plans members only on nodes their own
// node rules allow.
func behindBeacon(key, value string) *corev1.Affinity {
	return &corev1.Affinity{PodAffinity: &corev1.PodAffinity{RequiredDuringSchedulingIgnoredDuringExecution: []corev1.PodAffinityTerm{{
		LabelSelector: &metav1.LabelSelector{MatchLabels: map[string]string{key: value}},
		TopologyKey:   corev1.LabelHostname,
	}}}}
}

// openNodes runs a beacon pod labelled key=value on each of the scenario's nodes, bound directly
// as a static pod is: pods behindBeacon(key, value) may go there from then on.
func (s *scenario) openNodes(key, value string) {
	s.t.Helper()
	for i, node := range s.nodes {
		p := podSpec{name: fmt.Sprintf("beacon-%s-%d", value, i), nodeName: node}.pod()
		p.Labels = map[string]string{key: value}
		s.create(p)
	}
}

// unplaceable keeps a pod out of every node for good (no beacon is ever opened), so its gang
// holds a reservation that cannot complete: the way to observe a gang mid-flight.
var unplaceable = behindBeacon("lockstep.e2e/never", "true")

func (s *scenario) pods() []corev1.Pod {
	s.t.Helper()
	list, err := env.client.CoreV1().Pods(s.ns).List(s.ctx, metav1.ListOptions{})
	require.NoError(s.t, err)
	sort.Slice(list.Items, func(i, j int) bool { return list.Items[i].Name < list.Items[j].Name })
	return list.Items
}

// boundIn counts bound pods whose name starts with prefix.
func (s *scenario) boundIn(prefix string) int {
	n := 0
	for _, p := range s.pods() {
		if strings.HasPrefix(p.Name, prefix) && p.Spec.NodeName != "" {
			n++
		}
	}
	return n
}

// eventually polls cond every 250ms until it holds or the deadline passes.
func (s *scenario) eventually(timeout time.Duration, what string, cond func() bool) {
	s.t.Helper()
	err := wait.PollUntilContextTimeout(s.ctx, 250*time.Millisecond, timeout, true, func(context.Context) (bool, error) {
		return cond(), nil
	})
	if err != nil {
		s.t.Fatalf("timed out after %s waiting for %s", timeout, what)
	}
}

// gangs reads lockstep's /debug/gangs for the scenario's namespace.
func (s *scenario) gangs() map[string]views.GangStatus {
	s.t.Helper()
	var list []views.GangStatus
	require.NoError(s.t, json.Unmarshal([]byte(s.rawGangs()), &list))
	out := map[string]views.GangStatus{}
	for _, g := range list {
		require.Equal(s.t, s.ns, g.Namespace, "/debug/gangs?namespace= must narrow to one namespace")
		out[g.Name] = g
	}
	return out
}

// waitsFor reports whether the gang waits for capacity, its reason containing why. A gang past
// the suite's short --starvation-threshold waits Holding rather than Waiting; its reason still
// says what it lacks, and a loaded machine can take that long to get there.
func (s *scenario) waitsFor(name, why string) bool {
	g, ok := s.gangs()[name]
	return ok && (g.Phase == views.PhaseWaiting || g.Phase == views.PhaseHolding) && strings.Contains(g.Reason, why)
}

func (s *scenario) rawGangs() string { return s.rawGangsAt(env.lockstep) }

// rawGangsAt is one lockstep's /debug/gangs for the scenario's namespace, "[]" when unread.
func (s *scenario) rawGangsAt(ls *harness.Lockstep) string {
	raw, err := ls.GangsJSON(s.ctx, s.ns)
	if err != nil {
		return "[]"
	}
	return string(raw)
}

// gangAttempts is how often lockstep turned a gang away; 0 when lockstep does not know it (yet).
func (s *scenario) gangAttempts(name string) int {
	return s.gangs()[name].Attempts
}

// schedulingMessage returns the scheduler's latest word on why a pod is not scheduled: the
// PodScheduled=False condition. (FailedScheduling events are no substitute: the events.k8s.io
// recorder folds every later FailedScheduling of a pod into the first event's series and keeps
// that event's message, whatever the later ones said.)
func (s *scenario) schedulingMessage(pod string) string {
	p, err := env.client.CoreV1().Pods(s.ns).Get(s.ctx, pod, metav1.GetOptions{})
	if err != nil {
		return ""
	}
	for _, c := range p.Status.Conditions {
		if c.Type == corev1.PodScheduled && c.Status == corev1.ConditionFalse {
			return c.Message
		}
	}
	return ""
}

// hasEvent reports whether lockstep wrote an event with reason on the pod.
func (s *scenario) hasEvent(pod, reason, contains string) bool {
	list, err := env.client.CoreV1().Events(s.ns).List(s.ctx, metav1.ListOptions{
		FieldSelector: "involvedObject.name=" + pod + ",reason=" + reason,
	})
	if err != nil {
		return false
	}
	for _, e := range list.Items {
		if strings.Contains(e.Message, contains) {
			return true
		}
	}
	return false
}

// hasCondition reports whether the pod carries lockstep's GangScheduled=False condition with reason.
func (s *scenario) hasCondition(pod, reason string) bool {
	p, err := env.client.CoreV1().Pods(s.ns).Get(s.ctx, pod, metav1.GetOptions{})
	if err != nil {
		return false
	}
	for _, c := range p.Status.Conditions {
		if c.Type == wellknown.ConditionGangScheduled && c.Status == corev1.ConditionFalse && c.Reason == reason {
			return true
		}
	}
	return false
}

func (s *scenario) deletePod(name string) {
	s.t.Helper()
	zero := int64(0)
	require.NoError(s.t, env.client.CoreV1().Pods(s.ns).Delete(s.ctx, name, metav1.DeleteOptions{GracePeriodSeconds: &zero}))
}

// deleteAllPods removes the namespace's pods (no kubelet: grace period 0) and waits until they are gone.
func (s *scenario) deleteAllPods() {
	bg := context.Background()
	zero := int64(0)
	_ = env.client.CoreV1().Pods(s.ns).DeleteCollection(bg, metav1.DeleteOptions{GracePeriodSeconds: &zero}, metav1.ListOptions{})
	_ = wait.PollUntilContextTimeout(bg, 200*time.Millisecond, 30*time.Second, true, func(ctx context.Context) (bool, error) {
		list, err := env.client.CoreV1().Pods(s.ns).List(ctx, metav1.ListOptions{})
		return err == nil && len(list.Items) == 0, nil
	})
}

// assertNothingLeftBehind fails the test when lockstep still counts a gang of the scenario once
// its pods are all gone: such a gang would wait, and past the starvation threshold hold capacity,
// for as long as lockstep runs, and the tests after this one would pay for it.
func (s *scenario) assertNothingLeftBehind() {
	var left []string
	err := wait.PollUntilContextTimeout(s.ctx, 200*time.Millisecond, 15*time.Second, true, func(ctx context.Context) (bool, error) {
		gangs, err := env.lockstep.Gangs(ctx, s.ns)
		left = left[:0]
		for _, g := range gangs {
			left = append(left, fmt.Sprintf("%s (%s, %d members)", g.Name, g.Phase, len(g.Members)))
		}
		return err == nil && len(gangs) == 0, nil
	})
	if err != nil {
		s.t.Errorf("lockstep still counts gangs of namespace %s, whose pods are all deleted: %s", s.ns, strings.Join(left, ", "))
	}
}

func (s *scenario) describePods() string {
	var b strings.Builder
	for _, p := range s.pods() {
		fmt.Fprintf(&b, "  %-28s node=%-14q %s\n", p.Name, p.Spec.NodeName, s.schedulingMessage(p.Name))
	}
	return b.String()
}

// bindLog records, from a watch, when each pod of a namespace was first seen bound.
type bindLog struct {
	mu    sync.Mutex
	at    map[string]time.Time
	gangs map[string]string // pod -> gang name
}

func watchBinds(t *testing.T, ctx context.Context, ns string) *bindLog {
	l := &bindLog{at: map[string]time.Time{}, gangs: map[string]string{}}
	record := func(obj any) {
		p, ok := obj.(*corev1.Pod)
		if !ok || p.Spec.NodeName == "" {
			return
		}
		l.mu.Lock()
		defer l.mu.Unlock()
		if _, seen := l.at[p.Name]; !seen {
			l.at[p.Name] = time.Now()
			l.gangs[p.Name] = dialect.Pods{}.Read(p).Gang
		}
	}
	watchPods(t, ctx, ns, cache.ResourceEventHandlerFuncs{AddFunc: record, UpdateFunc: func(_, o any) { record(o) }})
	return l
}

// watchPods hands the namespace's pod events to handler until ctx ends, from an informer that has
// synced when it returns.
func watchPods(t *testing.T, ctx context.Context, ns string, handler cache.ResourceEventHandler) {
	f := informers.NewSharedInformerFactoryWithOptions(env.client, 0, informers.WithNamespace(ns))
	inf := f.Core().V1().Pods().Informer()
	_, _ = inf.AddEventHandler(handler)
	f.Start(ctx.Done())
	require.True(t, cache.WaitForCacheSync(ctx.Done(), inf.HasSynced))
}

// assertNeverPartial checks that a gang was either never bound, or that its first minAvailable
// members were bound within one commit of each other: no partial gang persisted. Callers usually
// come here once a list from the API showed the gang bound; the watch behind the log may still be
// a moment behind that list, so it is given a few seconds to catch up first.
func (l *bindLog) assertNeverPartial(t *testing.T, gangName string, minAvailable int) {
	t.Helper()
	_ = wait.PollUntilContextTimeout(context.Background(), 50*time.Millisecond, 10*time.Second, true, func(context.Context) (bool, error) {
		n := len(l.bindTimes(gangName))
		return n == 0 || n >= minAvailable, nil
	})
	times := l.bindTimes(gangName)
	if len(times) == 0 {
		return
	}
	require.GreaterOrEqual(t, len(times), minAvailable, "gang %s ended partial: %d of min-available %d bound", gangName, len(times), minAvailable)
	spread := times[minAvailable-1].Sub(times[0])
	require.Less(t, spread, 5*time.Second, "gang %s: its first %d members were bound %s apart; a commit binds them together", gangName, minAvailable, spread)
}

// bindTimes is when each member of a gang was first seen bound, earliest first.
func (l *bindLog) bindTimes(gangName string) []time.Time {
	l.mu.Lock()
	defer l.mu.Unlock()
	var times []time.Time
	for pod, g := range l.gangs {
		if g == gangName {
			times = append(times, l.at[pod])
		}
	}
	sort.Slice(times, func(i, j int) bool { return times[i].Before(times[j]) })
	return times
}
