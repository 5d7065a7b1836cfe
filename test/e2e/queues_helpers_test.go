package e2e

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/dynamic"

	"github.com/lockstep-sched/lockstep/test/lib/builders"
	"github.com/lockstep-sched/lockstep/test/lib/harness"
	"github.com/lockstep-sched/lockstep/wellknown"
)

// The team queues' objects, at the versions the suite installs (test/lib/thirdparty). Written out
// here rather than taken from package dialect: the tests say what users write, not what lockstep
// happens to read.
var (
	volcanoQueueGVR = schema.GroupVersionResource{Group: "scheduling.volcano.sh", Version: "v1beta1", Resource: "queues"}
	elasticQuotaGVR = schema.GroupVersionResource{Group: "scheduling.x-k8s.io", Version: "v1alpha1", Resource: "elasticquotas"}
	volcanoGroupGVR = schema.GroupVersionResource{Group: "scheduling.volcano.sh", Version: "v1beta1", Resource: "podgroups"}
	coschedGroupGVR = schema.GroupVersionResource{Group: "scheduling.x-k8s.io", Version: "v1alpha1", Resource: "podgroups"}
	vcjobGVR        = schema.GroupVersionResource{Group: "batch.volcano.sh", Version: "v1alpha1", Resource: "jobs"}
)

const gpuRes = string(wellknown.ResourceGPU)

// volcanoKey and elasticKey are the keys /debug/queues and the reasons name queues by.
func volcanoKey(name string) string            { return "Volcano Queue " + name }
func elasticKey(namespace, name string) string { return "ElasticQuota " + namespace + "/" + name }

// queueView is one queue of lockstep's /debug/queues (extender/queues.go), quantities as strings.
type queueView struct {
	Key         string            `json:"key"`
	Kind        string            `json:"kind"`
	Name        string            `json:"name"`
	Namespace   string            `json:"namespace"`
	Source      string            `json:"source"`
	Defined     bool              `json:"defined"`
	State       string            `json:"state"`
	Weight      int64             `json:"weight"`
	Priority    int32             `json:"priority"`
	Reclaimable bool              `json:"reclaimable"`
	Error       string            `json:"error"`
	Capability  map[string]string `json:"capability"`
	Guarantee   map[string]string `json:"guarantee"`
	Min         map[string]string `json:"min"`
	Deserved    map[string]string `json:"deserved"`
	Used        map[string]string `json:"used"`
	Held        map[string]string `json:"held"`
	Allocated   map[string]string `json:"allocated"`
	Waiting     []struct {
		Gang   string            `json:"gang"`
		Asks   map[string]string `json:"asks"`
		Reason string            `json:"reason"`
	} `json:"waiting"`
	Parent   string   `json:"parent"`
	Children []string `json:"children"`
}

// gpus is the GPU amount of a resource list as /debug/queues writes it: zero amounts are left out.
func gpus(list map[string]string) string {
	if v, ok := list[gpuRes]; ok {
		return v
	}
	return "0"
}

func (q queueView) String() string {
	b, _ := json.Marshal(q)
	return string(b)
}

// rawQueues is lockstep's /debug/queues, or why it could not be read.
func rawQueues(ctx context.Context) (string, error) { return rawQueuesAt(ctx, env.lockstep) }

// debugQueues reads /debug/queues by key; nil when lockstep does not answer (it may be
// restarting).
func debugQueues(ctx context.Context) map[string]queueView {
	raw, err := rawQueues(ctx)
	if err != nil {
		return nil
	}
	var out struct {
		Queues []queueView `json:"queues"`
	}
	if json.Unmarshal([]byte(raw), &out) != nil {
		return nil
	}
	byKey := make(map[string]queueView, len(out.Queues))
	for _, q := range out.Queues {
		byKey[q.Key] = q
	}
	return byKey
}

// queueScenario is a scenario with the team queues it made: every queue object is removed when
// the test ends, after its pods, and lockstep must forget it.
type queueScenario struct {
	*scenario
	dyn dynamic.Interface
	// made are the queue objects created, to delete at the end.
	made []madeObject
}

type madeObject struct {
	gvr             schema.GroupVersionResource
	namespace, name string
	key             string
}

// newQueueScenario installs the projects' CRDs and makes a scenario of n nodes with gpus GPUs.
func newQueueScenario(t *testing.T, n, gpus int) *queueScenario {
	t.Helper()
	installCRDs(t)
	s := newScenario(t, n, gpus)
	dyn, err := dynamic.NewForConfig(env.cluster.RESTConfig)
	require.NoError(t, err)
	qs := &queueScenario{scenario: s, dyn: dyn}
	// Registered after the scenario's own cleanup, so it runs first: what failed is logged before
	// anything is removed, then the pods go (so that no queue is deleted under running gangs),
	// then the queues, which lockstep must then forget.
	t.Cleanup(qs.cleanup)
	return qs
}

func (s *queueScenario) cleanup() {
	if s.t.Failed() {
		raw, err := rawQueues(context.Background())
		if err != nil {
			raw = err.Error()
		}
		s.t.Logf("/debug/queues when the test failed:\n%s", raw)
		s.t.Logf("pods when the test failed:\n%s", s.describePods())
		s.t.Logf("/debug/gangs when the test failed:\n%s", s.rawGangs())
		s.t.Logf("Volcano PodGroups when the test failed:\n%s", s.describeVolcanoGroups())
	}
	s.deleteAllPods()
	bg := context.Background()
	for _, m := range s.made {
		err := s.dyn.Resource(m.gvr).Namespace(m.namespace).Delete(bg, m.name, metav1.DeleteOptions{})
		if err != nil && !apierrors.IsNotFound(err) {
			s.t.Errorf("deleting %s: %v", m.key, err)
		}
	}
	// A queue neither defined nor holding nor waited on must leave /debug/queues: one that stays
	// would count its gangs' quorums for as long as lockstep runs.
	var left []string
	err := wait.PollUntilContextTimeout(bg, 200*time.Millisecond, 20*time.Second, true, func(ctx context.Context) (bool, error) {
		qs := debugQueues(ctx)
		if qs == nil {
			return false, nil
		}
		left = left[:0]
		for _, m := range s.made {
			if q, ok := qs[m.key]; ok {
				left = append(left, q.String())
			}
		}
		return len(left) == 0, nil
	})
	if err != nil {
		s.t.Errorf("lockstep still shows queues whose objects and pods are all deleted: %s", strings.Join(left, "; "))
	}
}

// describeVolcanoGroups lists the namespace's Volcano PodGroups with their phase and the message
// of their Unschedulable condition, for failure logs.
func (s *queueScenario) describeVolcanoGroups() string {
	list, err := s.dyn.Resource(volcanoGroupGVR).Namespace(s.ns).List(context.Background(), metav1.ListOptions{})
	if err != nil {
		return err.Error()
	}
	var b strings.Builder
	for _, pg := range list.Items {
		queue, _, _ := unstructured.NestedString(pg.Object, "spec", "queue")
		fmt.Fprintf(&b, "  %-24s queue=%-24q phase=%-9s %s\n", pg.GetName(), queue, statusField(&pg, "phase"), unschedulableMessage(&pg))
	}
	return b.String()
}

// queueName is a cluster-wide unique name for a queue of the test: Queues are cluster-scoped and
// shared by every test of the run.
func (s *queueScenario) queueName(name string) string { return s.ns + "-" + name }

// createVolcanoQueue creates a Volcano Queue and waits until lockstep shows it; it returns its
// name.
func (s *queueScenario) createVolcanoQueue(b *builders.ObjectBuilder) string {
	s.t.Helper()
	obj := b.Obj()
	s.createQueueObject(volcanoQueueGVR, obj, volcanoKey(obj.GetName()))
	return obj.GetName()
}

// createElasticQuota creates an ElasticQuota in the scenario's namespace and waits until lockstep
// shows it; it returns its key.
func (s *queueScenario) createElasticQuota(b *builders.ObjectBuilder) string {
	s.t.Helper()
	obj := b.Obj()
	obj.SetNamespace(s.ns)
	key := elasticKey(s.ns, obj.GetName())
	s.createQueueObject(elasticQuotaGVR, obj, key)
	return key
}

func (s *queueScenario) createQueueObject(gvr schema.GroupVersionResource, obj *unstructured.Unstructured, key string) {
	s.t.Helper()
	_, err := s.dyn.Resource(gvr).Namespace(obj.GetNamespace()).Create(s.ctx, obj, metav1.CreateOptions{FieldValidation: "Strict"})
	require.NoError(s.t, err, "creating %s", key)
	s.made = append(s.made, madeObject{gvr: gvr, namespace: obj.GetNamespace(), name: obj.GetName(), key: key})
	s.eventually(30*time.Second, "lockstep to show "+key+" in /debug/queues", func() bool {
		return s.queue(key).Defined
	})
}

// queue is one queue of /debug/queues; the zero view while lockstep does not show it.
func (s *queueScenario) queue(key string) queueView { return debugQueues(s.ctx)[key] }

// patchQueue merge-patches a Volcano Queue's spec or, with subresource "status", its status.
func (s *queueScenario) patchQueue(name, patch string, subresource ...string) {
	s.t.Helper()
	_, err := s.dyn.Resource(volcanoQueueGVR).Patch(s.ctx, name, types.MergePatchType, []byte(patch), metav1.PatchOptions{}, subresource...)
	require.NoError(s.t, err, "patching Volcano Queue %s with %s", name, patch)
}

// setQueueState writes a Volcano Queue's status.state as Volcano's queue controller does:
// through the status subresource its CRD has. The CRD requires status.allocated, which lockstep
// may not have written yet: an empty one merges into whatever is there.
func (s *queueScenario) setQueueState(name, state string) {
	s.t.Helper()
	s.patchQueue(name, fmt.Sprintf(`{"status":{"state":%q,"allocated":{}}}`, state), "status")
	s.eventually(30*time.Second, fmt.Sprintf("lockstep to show Volcano Queue %s %s", name, state), func() bool {
		return s.queue(volcanoKey(name)).State == state
	})
}

// volcanoQueueObject reads a Volcano Queue as the apiserver has it.
func (s *queueScenario) volcanoQueueObject(name string) *unstructured.Unstructured {
	s.t.Helper()
	obj, err := s.dyn.Resource(volcanoQueueGVR).Get(s.ctx, name, metav1.GetOptions{})
	require.NoError(s.t, err)
	return obj
}

// volcanoGang creates a Volcano PodGroup of minMember members in queue ("" names none) and
// members pods of one GPU each named <group>-<i>, as Volcano's job controller writes them.
func (s *queueScenario) volcanoGang(group, queue string, minMember, members int) {
	s.t.Helper()
	pg := builders.VolcanoPodGroup(s.ns, group).MinMember(int64(minMember))
	if queue != "" {
		pg.Queue(queue)
	}
	_, err := s.dyn.Resource(volcanoGroupGVR).Namespace(s.ns).Create(s.ctx, pg.Obj(), metav1.CreateOptions{FieldValidation: "Strict"})
	require.NoError(s.t, err, "creating Volcano PodGroup %s", group)
	for i := range members {
		s.create(gpuPod(fmt.Sprintf("%s-%d", group, i)).VolcanoGroup(group).Obj())
	}
}

// coschedulingGang is volcanoGang for a scheduler-plugins PodGroup, which names no queue: the
// namespace's ElasticQuota applies.
func (s *queueScenario) coschedulingGang(group string, minMember, members int) {
	s.t.Helper()
	pg := builders.CoschedulingPodGroup(s.ns, group).MinMember(int64(minMember)).Obj()
	_, err := s.dyn.Resource(coschedGroupGVR).Namespace(s.ns).Create(s.ctx, pg, metav1.CreateOptions{FieldValidation: "Strict"})
	require.NoError(s.t, err, "creating scheduler-plugins PodGroup %s", group)
	for i := range members {
		s.create(gpuPod(fmt.Sprintf("%s-%d", group, i)).CoschedulingGroup(group).Obj())
	}
}

// gpuPod is a pod of one GPU, as every pod of these tests is.
func gpuPod(name string) *builders.PodBuilder {
	return builders.Pod("", name).CPU("100m").Memory("64Mi").GPU(1)
}

// boundInGroup counts the bound pods that name group as their Volcano or scheduler-plugins
// PodGroup.
func (s *queueScenario) boundInGroup(group string) int {
	n := 0
	for _, p := range s.pods() {
		if p.Spec.NodeName != "" && (p.Annotations[wellknown.AnnotationGroupName] == group || p.Labels[wellknown.LabelCoschedulingPodGroup] == group) {
			n++
		}
	}
	return n
}

// boundInGroups sums boundInGroup over groups.
func (s *queueScenario) boundInGroups(groups []string) int {
	n := 0
	for _, g := range groups {
		n += s.boundInGroup(g)
	}
	return n
}

// volcanoGroupPhase and volcanoGroupMessage read a Volcano PodGroup's status.phase and its
// Unschedulable condition's message.
func (s *queueScenario) volcanoGroupPhase(name string) string {
	return statusField(s.volcanoGroup(name), "phase")
}

func (s *queueScenario) volcanoGroupMessage(name string) string {
	return unschedulableMessage(s.volcanoGroup(name))
}

func (s *queueScenario) volcanoGroup(name string) *unstructured.Unstructured {
	obj, err := s.dyn.Resource(volcanoGroupGVR).Namespace(s.ns).Get(s.ctx, name, metav1.GetOptions{})
	if err != nil {
		return &unstructured.Unstructured{Object: map[string]any{}}
	}
	return obj
}

// reasonOf is lockstep's latest reason for a gang, from /debug/gangs.
func (s *queueScenario) reasonOf(gang string) string { return s.gangs()[gang].Reason }

// never fails the test as soon as cond holds, and returns once it has not held for the whole
// window: the way to show something does not happen, without sleeping.
func (s *queueScenario) never(window time.Duration, what string, cond func() bool) {
	s.t.Helper()
	err := wait.PollUntilContextTimeout(s.ctx, 250*time.Millisecond, window, true, func(context.Context) (bool, error) {
		if cond() {
			return false, fmt.Errorf("%s", what)
		}
		return false, nil
	})
	if err != nil && !wait.Interrupted(err) {
		s.t.Fatalf("within %s: %v", window, err)
	}
}

// queueEvent reports whether an event of type and reason names the cluster-scoped object name
// and contains text. Events of cluster-scoped objects live in namespace default; all are listed.
func queueEvent(ctx context.Context, kind, name, eventType, reason, contains string) bool {
	list, err := env.client.CoreV1().Events(metav1.NamespaceAll).List(ctx, metav1.ListOptions{
		FieldSelector: "involvedObject.name=" + name + ",reason=" + reason,
	})
	if err != nil {
		return false
	}
	for _, e := range list.Items {
		if e.InvolvedObject.Kind == kind && e.Type == eventType && strings.Contains(e.Message, contains) {
			return true
		}
	}
	return false
}

// createVcjob creates a Volcano Job of workers one-GPU workers, all needed (minAvailable), in
// queue, and removes it and its pods when the test ends: nothing garbage-collects them here, and
// the next job controller started would adopt them.
func (s *queueScenario) createVcjob(name, queue string, workers int) *unstructured.Unstructured {
	s.t.Helper()
	container := map[string]any{
		"name": "worker", "image": "busybox:1.36", "command": []any{"sleep", "infinity"},
		"resources": map[string]any{
			"requests": map[string]any{"cpu": "100m", "memory": "64Mi", gpuRes: "1"},
			"limits":   map[string]any{"memory": "64Mi", gpuRes: "1"},
		},
	}
	job := &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": "batch.volcano.sh/v1alpha1", "kind": "Job",
		"metadata": map[string]any{"name": name, "namespace": s.ns},
		"spec": map[string]any{
			"schedulerName": "volcano", "queue": queue, "minAvailable": int64(workers),
			"tasks": []any{map[string]any{
				"name": "worker", "replicas": int64(workers),
				"template": map[string]any{"spec": map[string]any{
					"restartPolicy": "Never", "containers": []any{container},
				}},
			}},
		},
	}}
	created, err := s.dyn.Resource(vcjobGVR).Namespace(s.ns).Create(s.ctx, job, metav1.CreateOptions{FieldValidation: "Strict"})
	require.NoError(s.t, err, "creating vcjob %s", name)
	s.t.Cleanup(func() {
		bg := context.Background()
		_ = s.dyn.Resource(vcjobGVR).Namespace(s.ns).Delete(bg, name, metav1.DeleteOptions{})
		selector := jobKinds["Job"].podLabel + "=" + name
		_ = env.client.CoreV1().Pods(s.ns).DeleteCollection(bg, metav1.DeleteOptions{GracePeriodSeconds: new(int64)},
			metav1.ListOptions{LabelSelector: selector})
		_ = wait.PollUntilContextTimeout(bg, 200*time.Millisecond, 30*time.Second, true, func(context.Context) (bool, error) {
			return len(listPods(bg, s.ns, selector)) == 0, nil
		})
	})
	return created
}

// podsOfJob lists the pods Volcano's job controller made for vcjob name.
func (s *queueScenario) podsOfJob(name string) []corev1.Pod {
	return listPods(s.ctx, s.ns, jobKinds["Job"].podLabel+"="+name)
}

// rawQueuesAt is one lockstep's /debug/queues, or why it could not be read: rawQueues for a
// lockstep other than the suite's (a replica's).
func rawQueuesAt(ctx context.Context, ls *harness.Lockstep) (string, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, ls.DebugURL+"/debug/queues", nil)
	if err != nil {
		return "", err
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return "", err
	}
	defer resp.Body.Close()
	var raw json.RawMessage
	if err := json.NewDecoder(resp.Body).Decode(&raw); err != nil {
		return "", fmt.Errorf("/debug/queues: %s: %w", resp.Status, err)
	}
	if resp.StatusCode != http.StatusOK {
		return "", fmt.Errorf("/debug/queues: %s: %s", resp.Status, raw)
	}
	return string(raw), nil
}

// queueAt is one queue of one lockstep's /debug/queues; the zero view while that lockstep does
// not show it or does not answer.
func (s *queueScenario) queueAt(ls *harness.Lockstep, key string) queueView {
	raw, err := rawQueuesAt(s.ctx, ls)
	if err != nil {
		return queueView{}
	}
	var out struct {
		Queues []queueView `json:"queues"`
	}
	if json.Unmarshal([]byte(raw), &out) != nil {
		return queueView{}
	}
	for _, q := range out.Queues {
		if q.Key == key {
			return q
		}
	}
	return queueView{}
}

// volcanoMember creates member i of Volcano PodGroup group, a pod of one GPU named <group>-<i>,
// as volcanoGang makes them: for a gang whose members come one at a time.
func (s *queueScenario) volcanoMember(group string, i int) *corev1.Pod {
	s.t.Helper()
	return s.create(gpuPod(fmt.Sprintf("%s-%d", group, i)).VolcanoGroup(group).Obj())
}

// volcanoGangScheduledBy is volcanoGang for pods another scheduler places (schedulerName), such
// as the replicas of replicas_test.go.
func (s *queueScenario) volcanoGangScheduledBy(group, queue string, minMember, members int, schedulerName string) {
	s.t.Helper()
	pg := builders.VolcanoPodGroup(s.ns, group).MinMember(int64(minMember)).Queue(queue)
	_, err := s.dyn.Resource(volcanoGroupGVR).Namespace(s.ns).Create(s.ctx, pg.Obj(), metav1.CreateOptions{FieldValidation: "Strict"})
	require.NoError(s.t, err, "creating Volcano PodGroup %s", group)
	for i := range members {
		s.create(gpuPod(fmt.Sprintf("%s-%d", group, i)).VolcanoGroup(group).SchedulerName(schedulerName).Obj())
	}
}

// volcanoQueueAllocatedGPUs is a Volcano Queue's status.allocated GPUs as the apiserver has them,
// "" when none is written.
func (s *queueScenario) volcanoQueueAllocatedGPUs(name string) string {
	obj, err := s.dyn.Resource(volcanoQueueGVR).Get(s.ctx, name, metav1.GetOptions{})
	if err != nil {
		return ""
	}
	v, _, _ := unstructured.NestedString(obj.Object, "status", "allocated", gpuRes)
	return v
}
