package e2e

import (
	"context"
	"fmt"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/dynamic"

	"github.com/lockstep-sched/lockstep/test/lib/cluster"
	"github.com/lockstep-sched/lockstep/test/lib/harness"
	"github.com/lockstep-sched/lockstep/test/lib/thirdparty"
	"github.com/lockstep-sched/lockstep/views"
)

// Kueue v0.17.1, built from its module, admits by quota: it lets a pod group or a Job start once
// its ClusterQueue has quota for all of it, and never looks at nodes. lockstep places what Kueue
// admitted, whole or not at all: a group within quota binds whole where the nodes hold it, and
// binds nothing, holding nothing, where the free GPUs are scattered in pieces too small.

// Kueue's keys, as its documentation tells users to write them and as it writes them itself.
const (
	kueueQueueLabel      = "kueue.x-k8s.io/queue-name"
	kueueGroupLabel      = "kueue.x-k8s.io/pod-group-name"
	kueueTotalCount      = "kueue.x-k8s.io/pod-group-total-count"
	kueueManagedLabel    = "kueue.x-k8s.io/managed"
	kueueWorkloadKey     = "kueue.x-k8s.io/workload"
	kueuePodSetLabel     = "kueue.x-k8s.io/podset"
	kueueAdmissionGate   = "kueue.x-k8s.io/admission"
	kueueTopologyGate    = "kueue.x-k8s.io/topology"
	kueueLocalQueue      = "user-queue" // examples/kueue/queues.yaml
	kueueGPU             = corev1.ResourceName("nvidia.com/gpu")
	kueueAdmittedTimeout = 60 * time.Second
)

var (
	kueueWorkloads       = kueueResource("workloads")
	kueueClusterQueues   = kueueResource("clusterqueues")
	kueueLocalQueues     = kueueResource("localqueues")
	kueueResourceFlavors = kueueResource("resourceflavors")
)

func kueueResource(plural string) schema.GroupVersionResource {
	return schema.GroupVersionResource{Group: "kueue.x-k8s.io", Version: "v1beta2", Resource: plural}
}

// The documented plain pod group (examples/kueue/pod-group.yaml, 4 x 2 GPUs), created without
// its gates: Kueue's own webhook gates it, Kueue admits it and lifts the gates, lockstep binds it
// whole. 3 nodes x 4 GPUs and 8 GPUs of quota, so that quota, not nodes, is what then keeps a
// second group of 2 GPUs gated.
func TestKueuePodGroupAdmittedAndBoundWhole(t *testing.T) {
	s := newKueueScenario(t, 8, kueueNodes(3, 4)...)
	pods, _, err := harness.SplitExample(filepath.Join(env.root, "examples", "kueue/pod-group.yaml"), s.ns)
	require.NoError(t, err)
	for _, p := range pods {
		p.Spec.SchedulingGates = nil // the webhook's to add
		s.createGatedByKueue(p)
	}
	wl := s.admittedWorkload("Pod", pods[0].Name)
	s.eventually(90*time.Second, "the group's 4 pods bound", func() bool { return s.boundIn("kueue-group-") == 4 })
	s.binds.assertNeverPartial(t, "kueue-group", 4)
	g := s.gangs()["kueue-group"]
	require.Equal(t, 4, g.MinAvailable, "every pod of a Kueue group must be placed")
	require.Contains(t, g.Source, "Kueue pod group")
	for _, p := range s.podsPrefixed("kueue-group-") {
		require.Empty(t, p.Spec.SchedulingGates, "Kueue lifts both of its gates on admission")
		s.logMarkers(&p)
	}
	t.Logf("Workload %s: admitted; lockstep bound its 4 pods as gang %q (%s)", wl.GetName(), g.Name, g.Source)

	// The quota is spent; 4 GPUs are free on the nodes.
	over := kueueGroupPod("over-quota-0", "over-quota", 1, 2)
	s.createGatedByKueue(over)
	var pending *unstructured.Unstructured
	s.eventually(kueueAdmittedTimeout, "Kueue to keep the over-quota group pending for quota", func() bool {
		pending = s.workloadOwnedBy("Pod", over.Name)
		return conditionStatus(pending, "QuotaReserved") == "False" &&
			strings.Contains(conditionMessage(pending, "QuotaReserved"), "insufficient unused quota for nvidia.com/gpu")
	})
	p, err := env.client.CoreV1().Pods(s.ns).Get(s.ctx, over.Name, metav1.GetOptions{})
	require.NoError(t, err)
	require.True(t, hasGate(p, kueueAdmissionGate), "a group Kueue has not admitted keeps its gate")
	require.Empty(t, p.Spec.NodeName)
	t.Logf("Workload %s pending: %s", pending.GetName(), conditionMessage(pending, "QuotaReserved"))
}

// A group Kueue's quota admits (2 x 4 GPUs, 8 of 8) on nodes that cannot hold it: 2 nodes x 4
// GPUs, 2 GPUs of one taken by an ordinary pod. Each member alone would fit; the group does not.
// It binds nothing, holds nothing, and its pods say why.
func TestKueuePodGroupAdmittedButFragmentedBindsNothing(t *testing.T) {
	s := newKueueScenario(t, 8, kueueNodes(2, 4)...)
	s.fragment(s.nodes[0], 2)
	for i := range 2 {
		s.createGatedByKueue(kueueGroupPod(fmt.Sprintf("frag-%d", i), "frag", 2, 4))
	}
	wl := s.admittedWorkload("Pod", "frag-0")
	s.eventually(30*time.Second, "Kueue to lift the gates of both pods", func() bool {
		return len(s.ungated("frag-")) == 2
	})
	s.assertBindsAndHoldsNothing("frag", "frag-", "need 8 nvidia.com/gpu, 6 free")
	for _, p := range s.podsPrefixed("frag-") {
		s.logMarkers(&p)
	}
	t.Logf("Workload %s admitted by quota; lockstep: %s", wl.GetName(), s.gangs()["frag"].Reason)
}

// examples/kueue/job.yaml (4 x 2 GPUs, suspended, in the LocalQueue): Kueue admits it and
// unsuspends it, kube-controller-manager's Job controller makes the pods, and lockstep binds them
// as the one gang Kueue's Workload names on them.
func TestKueueJobAdmittedAndBoundWhole(t *testing.T) {
	s := newKueueScenario(t, 8, kueueNodes(2, 4)...)
	job := s.createKueueJob("train", 4, 2)
	wl := s.admittedWorkload("Job", job.Name)
	s.eventually(30*time.Second, "Kueue to unsuspend the Job", func() bool { return !s.jobSuspended(job.Name) })
	s.eventually(90*time.Second, "the Job's 4 pods bound", func() bool { return s.boundIn(job.Name+"-") == 4 })
	s.binds.assertBoundTogether(t, s.podNames(job.Name+"-"), 4)
	s.binds.assertNeverPartial(t, wl.GetName(), 4)
	for _, p := range s.podsPrefixed(job.Name + "-") {
		s.requireWorkloadMarkers(&p, wl)
	}
	g := s.gangs()[wl.GetName()]
	require.Equal(t, 4, g.MinAvailable, "the Workload's admitted pod count")
	require.Contains(t, g.Source, "Workload")
	t.Logf("lockstep bound Job %s's 4 pods as gang %q (%s)", job.Name, g.Name, g.Source)
}

// A Job Kueue's quota admits (2 x 4 GPUs, 8 of 8) on 2 nodes x 4 GPUs with 2 GPUs of one taken:
// Kueue unsuspends it and the Job controller makes both pods, each of which alone would fit. Not
// one binds, nothing is held, and the pods say why.
func TestKueueJobAdmittedButFragmentedBindsNothing(t *testing.T) {
	s := newKueueScenario(t, 8, kueueNodes(2, 4)...)
	s.fragment(s.nodes[0], 2)
	job := s.createKueueJob("frag", 2, 4)
	wl := s.admittedWorkload("Job", job.Name)
	s.eventually(60*time.Second, "the Job controller to make both pods", func() bool {
		return len(s.podsPrefixed(job.Name+"-")) == 2
	})
	for _, p := range s.podsPrefixed(job.Name + "-") {
		s.requireWorkloadMarkers(&p, wl)
	}
	s.assertBindsAndHoldsNothing(wl.GetName(), job.Name+"-", "need 8 nvidia.com/gpu, 6 free")
	t.Logf("Workload %s admitted by quota; lockstep: %s", wl.GetName(), s.gangs()[wl.GetName()].Reason)
}

// kueueScenario is a scenario whose namespace Kueue manages, with the queues of
// examples/kueue/queues.yaml of its own.
type kueueScenario struct {
	*scenario
	dyn dynamic.Interface
}

func kueueNodes(n, gpus int) []cluster.NodeSpec {
	specs := make([]cluster.NodeSpec, n)
	for i := range specs {
		specs[i] = cluster.NodeSpec{Name: fmt.Sprintf("gpu-%d", i), GPUs: gpus}
	}
	return specs
}

// newKueueScenario starts Kueue, then the scenario, and gives the namespace a LocalQueue whose
// ClusterQueue has gpuQuota GPUs. Kueue starts first so that it stops last: it takes its
// finalizers off the pods and the queues as the cleanup deletes them.
func newKueueScenario(t *testing.T, gpuQuota int, nodes ...cluster.NodeSpec) *kueueScenario {
	t.Helper()
	k := startKueue(t)
	s := &kueueScenario{scenario: newScenarioWithNodes(t, nodes...)}
	var err error
	s.dyn, err = dynamic.NewForConfig(env.cluster.RESTConfig)
	require.NoError(t, err)
	t.Cleanup(s.cleanup)
	require.NoError(t, k.WaitManaged(s.ctx, s.ns))
	s.createQueues(gpuQuota)
	return s
}

// startKueue runs Kueue for the rest of the test.
func startKueue(t *testing.T) *harness.Kueue {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 4*time.Minute)
	defer cancel()
	k, err := harness.StartKueue(ctx, env.cluster, t.Logf)
	require.NoError(t, err)
	t.Cleanup(func() {
		if t.Failed() {
			t.Logf("kueue log tail:\n%s", k.Tail(60))
		}
		k.Stop()
	})
	return k
}

// createQueues creates examples/kueue/queues.yaml for this scenario alone: its ResourceFlavor
// and ClusterQueue (cluster-wide) renamed after the namespace and open to it only, with gpuQuota
// GPUs, and its LocalQueue in the namespace. It returns once Kueue says both queues are active.
func (s *kueueScenario) createQueues(gpuQuota int) {
	s.t.Helper()
	objs, err := thirdparty.ReadObjects(filepath.Join(env.root, "examples", "kueue/queues.yaml"))
	require.NoError(s.t, err)
	require.Len(s.t, objs, 3, "queues.yaml: a ResourceFlavor, a ClusterQueue and a LocalQueue")
	for _, o := range objs {
		switch o.GetKind() {
		case "ResourceFlavor":
			o.SetName(s.ns)
			s.createKueueObject(kueueResourceFlavors, o)
		case "ClusterQueue":
			o.SetName(s.ns)
			require.NoError(s.t, s.ownClusterQueue(o, gpuQuota))
			s.createKueueObject(kueueClusterQueues, o)
		case "LocalQueue":
			o.SetNamespace(s.ns)
			require.NoError(s.t, unstructured.SetNestedField(o.Object, s.ns, "spec", "clusterQueue"))
			s.createKueueObject(kueueLocalQueues, o)
		default:
			s.t.Fatalf("queues.yaml: unexpected %s", o.GetKind())
		}
	}
	s.eventually(kueueAdmittedTimeout, "Kueue to make the queues active", func() bool {
		return conditionStatus(s.getKueue(kueueClusterQueues, "", s.ns), "Active") == "True" &&
			conditionStatus(s.getKueue(kueueLocalQueues, s.ns, kueueLocalQueue), "Active") == "True"
	})
}

// ownClusterQueue points the ClusterQueue at the scenario's ResourceFlavor, sets its GPU quota,
// and opens it to the scenario's namespace only.
func (s *kueueScenario) ownClusterQueue(cq *unstructured.Unstructured, gpuQuota int) error {
	groups, _, err := unstructured.NestedSlice(cq.Object, "spec", "resourceGroups")
	if err != nil || len(groups) != 1 {
		return fmt.Errorf("queues.yaml: want one resource group (%v)", err)
	}
	flavors, _ := groups[0].(map[string]any)["flavors"].([]any)
	if len(flavors) != 1 {
		return fmt.Errorf("queues.yaml: want one flavor, got %d", len(flavors))
	}
	flavor := flavors[0].(map[string]any)
	flavor["name"] = s.ns
	resources, _ := flavor["resources"].([]any)
	i := slices.IndexFunc(resources, func(r any) bool { return r.(map[string]any)["name"] == "nvidia.com/gpu" })
	if i < 0 {
		return fmt.Errorf("queues.yaml: the flavor has no nvidia.com/gpu quota")
	}
	resources[i].(map[string]any)["nominalQuota"] = fmt.Sprint(gpuQuota)
	if err := unstructured.SetNestedSlice(cq.Object, groups, "spec", "resourceGroups"); err != nil {
		return err
	}
	own := map[string]any{"matchLabels": map[string]any{"kubernetes.io/metadata.name": s.ns}}
	return unstructured.SetNestedMap(cq.Object, own, "spec", "namespaceSelector")
}

func (s *kueueScenario) createKueueObject(gvr schema.GroupVersionResource, o *unstructured.Unstructured) {
	s.t.Helper()
	_, err := s.dyn.Resource(gvr).Namespace(o.GetNamespace()).Create(s.ctx, o, metav1.CreateOptions{FieldValidation: "Strict"})
	require.NoError(s.t, err, "creating %s %s", o.GetKind(), o.GetName())
}

// getKueue reads one Kueue object; nil when it cannot.
func (s *kueueScenario) getKueue(gvr schema.GroupVersionResource, ns, name string) *unstructured.Unstructured {
	o, err := s.dyn.Resource(gvr).Namespace(ns).Get(s.ctx, name, metav1.GetOptions{})
	if err != nil {
		return nil
	}
	return o
}

// cleanup removes the Jobs, the Workloads and the pods, then the queues, while Kueue and the Job
// controller still run to take their finalizers off. It runs before the scenario's own cleanup,
// which then finds nothing left.
func (s *kueueScenario) cleanup() {
	if s.t.Failed() {
		s.t.Logf("Kueue Workloads:\n%s", s.describeWorkloads())
	}
	s.deleteWorkloads()
	s.deleteQueues()
}

// deleteWorkloads deletes the Jobs, then the Workloads, then the pods, and waits for the pods to
// go. Deleting a pod group's Workload is how Kueue's users end a group (KEP 976, "Retrying Failed
// Pods"): Kueue would otherwise keep its finalizer on the deleted pods, waiting for replacements.
func (s *kueueScenario) deleteWorkloads() {
	bg := context.Background()
	background := metav1.DeletePropagationBackground
	_ = env.client.BatchV1().Jobs(s.ns).DeleteCollection(bg, metav1.DeleteOptions{PropagationPolicy: &background}, metav1.ListOptions{})
	_ = s.dyn.Resource(kueueWorkloads).Namespace(s.ns).DeleteCollection(bg, metav1.DeleteOptions{}, metav1.ListOptions{})
	zero := int64(0)
	_ = env.client.CoreV1().Pods(s.ns).DeleteCollection(bg, metav1.DeleteOptions{GracePeriodSeconds: &zero}, metav1.ListOptions{})
	var left []corev1.Pod
	err := wait.PollUntilContextTimeout(bg, 250*time.Millisecond, 30*time.Second, true, func(ctx context.Context) (bool, error) {
		list, err := env.client.CoreV1().Pods(s.ns).List(ctx, metav1.ListOptions{})
		if err == nil {
			left = list.Items
		}
		return err == nil && len(left) == 0, nil
	})
	if err != nil {
		for _, p := range left {
			s.t.Errorf("pod %s not gone 30s after its deletion: finalizers %v", p.Name, p.Finalizers)
		}
	}
}

// deleteQueues deletes the scenario's queues and waits for them to go: Kueue keeps a ClusterQueue
// and its flavor while a Workload still counts against them.
func (s *kueueScenario) deleteQueues() {
	bg := context.Background()
	objects := []struct {
		gvr      schema.GroupVersionResource
		ns, name string
	}{{kueueLocalQueues, s.ns, kueueLocalQueue}, {kueueClusterQueues, "", s.ns}, {kueueResourceFlavors, "", s.ns}}
	for _, o := range objects {
		_ = s.dyn.Resource(o.gvr).Namespace(o.ns).Delete(bg, o.name, metav1.DeleteOptions{})
	}
	for _, o := range objects {
		err := wait.PollUntilContextTimeout(bg, 250*time.Millisecond, 30*time.Second, true, func(ctx context.Context) (bool, error) {
			_, err := s.dyn.Resource(o.gvr).Namespace(o.ns).Get(ctx, o.name, metav1.GetOptions{})
			return apierrors.IsNotFound(err), nil
		})
		if err != nil {
			s.t.Errorf("%s %s not gone 30s after its deletion", o.gvr.Resource, o.name)
		}
	}
}

// kueueGroupPod is a member of a Kueue plain pod group of total pods x gpus, in the LocalQueue,
// written as Kueue's documentation has users write it: no gates, which its webhook adds.
func kueueGroupPod(name, group string, total, gpus int) *corev1.Pod {
	p := podSpec{name: name, gpus: gpus, annotations: map[string]string{kueueTotalCount: fmt.Sprint(total)}}.pod()
	p.Labels = map[string]string{kueueQueueLabel: kueueLocalQueue, kueueGroupLabel: group}
	return p
}

// createGatedByKueue creates the pod and checks that Kueue's webhook took it over: its admission
// gate, its managed label and its finalizer.
func (s *kueueScenario) createGatedByKueue(p *corev1.Pod) {
	s.t.Helper()
	require.Empty(s.t, p.Spec.SchedulingGates, "the pod is to be gated by Kueue's webhook, not by its author")
	out := s.create(p)
	require.True(s.t, hasGate(out, kueueAdmissionGate), "Kueue's webhook gates pod %s (gates %v)", p.Name, out.Spec.SchedulingGates)
	require.Equal(s.t, "true", out.Labels[kueueManagedLabel], "Kueue's webhook marks pod %s managed", p.Name)
	require.Contains(s.t, out.Finalizers, kueueManagedLabel, "Kueue's webhook puts its finalizer on pod %s", p.Name)
	s.t.Logf("pod %s created; Kueue's webhook gated it: gates %v, finalizers %v", p.Name, gateNames(out), out.Finalizers)
}

// createKueueJob creates examples/kueue/job.yaml under name with pods pods of gpus GPUs each.
func (s *kueueScenario) createKueueJob(name string, pods, gpus int) *batchv1.Job {
	s.t.Helper()
	objs, err := thirdparty.ReadObjects(filepath.Join(env.root, "examples", "kueue/job.yaml"))
	require.NoError(s.t, err)
	require.Len(s.t, objs, 1)
	var job batchv1.Job
	require.NoError(s.t, runtime.DefaultUnstructuredConverter.FromUnstructured(objs[0].Object, &job))
	require.True(s.t, job.Spec.Suspend != nil && *job.Spec.Suspend, "job.yaml: Kueue's Jobs are created suspended")
	require.Equal(s.t, kueueLocalQueue, job.Labels[kueueQueueLabel])
	job.Name, job.Namespace = name, s.ns
	n := int32(pods)
	job.Spec.Parallelism, job.Spec.Completions = &n, &n
	res := job.Spec.Template.Spec.Containers[0].Resources
	res.Requests[kueueGPU], res.Limits[kueueGPU] = resource.MustParse(fmt.Sprint(gpus)), resource.MustParse(fmt.Sprint(gpus))
	out, err := env.client.BatchV1().Jobs(s.ns).Create(s.ctx, &job, metav1.CreateOptions{})
	require.NoError(s.t, err, "creating Job %s", name)
	return out
}

// admittedWorkload waits for the Workload Kueue made for an owner to be admitted, logs what
// Kueue decided, and returns it.
func (s *kueueScenario) admittedWorkload(ownerKind, ownerName string) *unstructured.Unstructured {
	s.t.Helper()
	var wl *unstructured.Unstructured
	s.eventually(kueueAdmittedTimeout, fmt.Sprintf("Kueue to admit the Workload of %s %s", ownerKind, ownerName), func() bool {
		wl = s.workloadOwnedBy(ownerKind, ownerName)
		return wl != nil && conditionStatus(wl, "Admitted") == "True"
	})
	s.t.Logf("Kueue made Workload %s for %s %s: %s", wl.GetName(), ownerKind, ownerName, describeAdmission(wl))
	return wl
}

// workloadOwnedBy is the namespace's Workload with that owner, nil if none (yet).
func (s *kueueScenario) workloadOwnedBy(kind, name string) *unstructured.Unstructured {
	list, err := s.dyn.Resource(kueueWorkloads).Namespace(s.ns).List(s.ctx, metav1.ListOptions{})
	if err != nil {
		return nil
	}
	for i := range list.Items {
		for _, o := range list.Items[i].GetOwnerReferences() {
			if o.Kind == kind && o.Name == name {
				return &list.Items[i]
			}
		}
	}
	return nil
}

func (s *kueueScenario) describeWorkloads() string {
	list, err := s.dyn.Resource(kueueWorkloads).Namespace(s.ns).List(context.Background(), metav1.ListOptions{})
	if err != nil {
		return err.Error()
	}
	var b strings.Builder
	for i := range list.Items {
		wl := &list.Items[i]
		fmt.Fprintf(&b, "  %s: %s; QuotaReserved=%s %q\n", wl.GetName(), describeAdmission(wl),
			conditionStatus(wl, "QuotaReserved"), conditionMessage(wl, "QuotaReserved"))
	}
	return b.String()
}

// describeAdmission says where Kueue admitted a Workload and how many pods of each pod set.
func describeAdmission(wl *unstructured.Unstructured) string {
	cq, ok, _ := unstructured.NestedString(wl.Object, "status", "admission", "clusterQueue")
	if !ok {
		return "not admitted"
	}
	sets, _, _ := unstructured.NestedSlice(wl.Object, "status", "admission", "podSetAssignments")
	var parts []string
	for _, a := range sets {
		m, _ := a.(map[string]any)
		parts = append(parts, fmt.Sprintf("pod set %v: %v pods, flavors %v", m["name"], m["count"], m["flavors"]))
	}
	return fmt.Sprintf("admitted to ClusterQueue %s (%s)", cq, strings.Join(parts, "; "))
}

func (s *kueueScenario) jobSuspended(name string) bool {
	j, err := env.client.BatchV1().Jobs(s.ns).Get(s.ctx, name, metav1.GetOptions{})
	return err != nil || (j.Spec.Suspend != nil && *j.Spec.Suspend)
}

// fragment binds an ordinary pod of gpus GPUs to the node, of a priority above the groups': were
// it of theirs, lockstep's starvation rule would, past its threshold, claim the node's GPUs for a
// waiting group as they free, and these tests are about a group that holds nothing.
func (s *kueueScenario) fragment(node string, gpus int) {
	s.t.Helper()
	s.create(s.withPriority(podSpec{name: "fragment", gpus: gpus, nodeName: node}.pod(), "e2e-high"))
}

// assertBindsAndHoldsNothing checks a group Kueue admitted on nodes that cannot hold it: lockstep
// gives the reason, on the pods too; past the starvation threshold still no pod is bound and no
// capacity is reserved or held; and an ordinary pod takes the GPUs the group could not use.
func (s *kueueScenario) assertBindsAndHoldsNothing(gangName, podPrefix, reason string) {
	s.t.Helper()
	s.eventually(60*time.Second, "lockstep to say why gang "+gangName+" waits", func() bool {
		return s.waitsFor(gangName, reason)
	})
	// A member the scheduler tried before the others existed (a Job controller makes them one by
	// one) keeps that attempt's words until the scheduler retries it; each names the gang.
	s.requireReasonOnPods(s.podNames(podPrefix), fmt.Sprintf("gang %s/%s", s.ns, gangName), reason)
	require.Never(s.t, func() bool {
		return s.boundIn(podPrefix) > 0 || s.gangs()[gangName].Phase != views.PhaseWaiting
	}, starvationThreshold+2*time.Second, 250*time.Millisecond, "gang %s must bind nothing and hold nothing", gangName)
	s.create(podSpec{name: "ordinary", gpus: 4}.pod())
	s.eventually(60*time.Second, "an ordinary 4-GPU pod to take the free node", func() bool { return s.boundIn("ordinary") == 1 })
	require.Zero(s.t, s.boundIn(podPrefix))
}

// requireReasonOnPods waits until the scheduler's word on every pod names the gang and on at least
// one gives the reason, and logs what each says.
func (s *kueueScenario) requireReasonOnPods(pods []string, gangWords, reason string) {
	s.t.Helper()
	said := map[string]string{}
	err := wait.PollUntilContextTimeout(s.ctx, 250*time.Millisecond, 60*time.Second, true, func(context.Context) (bool, error) {
		withReason := 0
		for _, p := range pods {
			said[p] = s.schedulingMessage(p)
			if !strings.Contains(said[p], gangWords) {
				return false, nil
			}
			if strings.Contains(said[p], reason) {
				withReason++
			}
		}
		return withReason > 0, nil
	})
	for _, p := range pods {
		s.t.Logf("pod %s: %s", p, said[p])
	}
	require.NoError(s.t, err, "the scheduler's word on the pods must name %q, and on one at least say %q", gangWords, reason)
}

// requireWorkloadMarkers checks that a Job's pod carries what Kueue puts on the pod template as it
// admits the Job: the Workload's name, and the admitted pod set's.
func (s *kueueScenario) requireWorkloadMarkers(p *corev1.Pod, wl *unstructured.Unstructured) {
	s.t.Helper()
	s.logMarkers(p)
	require.Equal(s.t, wl.GetName(), p.Annotations[kueueWorkloadKey], "pod %s: annotation %s", p.Name, kueueWorkloadKey)
	require.Contains(s.t, admittedPodSets(wl), p.Labels[kueuePodSetLabel], "pod %s: label %s", p.Name, kueuePodSetLabel)
}

// admittedPodSets names the pod sets of a Workload's admission.
func admittedPodSets(wl *unstructured.Unstructured) []string {
	sets, _, _ := unstructured.NestedSlice(wl.Object, "status", "admission", "podSetAssignments")
	var out []string
	for _, a := range sets {
		if m, ok := a.(map[string]any); ok {
			out = append(out, fmt.Sprint(m["name"]))
		}
	}
	return out
}

// logMarkers logs the pod's Kueue labels and annotations and its gates.
func (s *kueueScenario) logMarkers(p *corev1.Pod) {
	s.t.Logf("pod %s: labels %v annotations %v gates %v node %q", p.Name, kueueKeys(p.Labels), kueueKeys(p.Annotations), gateNames(p), p.Spec.NodeName)
}

func kueueKeys(m map[string]string) map[string]string {
	out := map[string]string{}
	for k, v := range m {
		if strings.HasPrefix(k, "kueue.x-k8s.io/") {
			out[k] = v
		}
	}
	return out
}

func (s *kueueScenario) podsPrefixed(prefix string) []corev1.Pod {
	var out []corev1.Pod
	for _, p := range s.pods() {
		if strings.HasPrefix(p.Name, prefix) {
			out = append(out, p)
		}
	}
	return out
}

func (s *kueueScenario) podNames(prefix string) []string {
	var out []string
	for _, p := range s.podsPrefixed(prefix) {
		out = append(out, p.Name)
	}
	return out
}

// ungated lists the pods with the prefix that carry neither of Kueue's gates.
func (s *kueueScenario) ungated(prefix string) []string {
	var out []string
	for _, p := range s.podsPrefixed(prefix) {
		if !hasGate(&p, kueueAdmissionGate) && !hasGate(&p, kueueTopologyGate) {
			out = append(out, p.Name)
		}
	}
	return out
}

func hasGate(p *corev1.Pod, name string) bool {
	return slices.ContainsFunc(p.Spec.SchedulingGates, func(g corev1.PodSchedulingGate) bool { return g.Name == name })
}

func gateNames(p *corev1.Pod) []string {
	var out []string
	for _, g := range p.Spec.SchedulingGates {
		out = append(out, g.Name)
	}
	return out
}

// assertBoundTogether checks that all of the pods were bound, the first want of them within one
// commit of each other: the same check as assertNeverPartial, by pod rather than by the gang
// name the suite's own reading of the markers gives.
func (l *bindLog) assertBoundTogether(t *testing.T, pods []string, want int) {
	t.Helper()
	var times []time.Time
	_ = wait.PollUntilContextTimeout(context.Background(), 50*time.Millisecond, 10*time.Second, true, func(context.Context) (bool, error) {
		times = l.timesOf(pods)
		return len(times) >= want, nil
	})
	require.GreaterOrEqual(t, len(times), want, "%d of %d pods seen bound", len(times), want)
	spread := times[want-1].Sub(times[0])
	require.Less(t, spread, 5*time.Second, "the first %d pods were bound %s apart; a commit binds them together", want, spread)
}

// timesOf is when each of the pods was first seen bound, earliest first.
func (l *bindLog) timesOf(pods []string) []time.Time {
	l.mu.Lock()
	defer l.mu.Unlock()
	var times []time.Time
	for _, p := range pods {
		if at, ok := l.at[p]; ok {
			times = append(times, at)
		}
	}
	slices.SortFunc(times, func(a, b time.Time) int { return a.Compare(b) })
	return times
}

// conditionStatus and conditionMessage read a metav1.Condition of a Kueue object ("" if absent).
func conditionStatus(obj *unstructured.Unstructured, typ string) string {
	return conditionField(obj, typ, "status")
}

func conditionMessage(obj *unstructured.Unstructured, typ string) string {
	return conditionField(obj, typ, "message")
}

func conditionField(obj *unstructured.Unstructured, typ, field string) string {
	if obj == nil {
		return ""
	}
	list, _, _ := unstructured.NestedSlice(obj.Object, "status", "conditions")
	for _, c := range list {
		if m, ok := c.(map[string]any); ok && m["type"] == typ {
			v, _ := m[field].(string)
			return v
		}
	}
	return ""
}
