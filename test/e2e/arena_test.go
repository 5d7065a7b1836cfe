package e2e

import (
	"context"
	"fmt"
	"sort"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/dynamic"

	"github.com/lockstep-sched/lockstep/test/lib/harness"
	"github.com/lockstep-sched/lockstep/views"
	"github.com/lockstep-sched/lockstep/wellknown"
)

// Arena v0.15.5's own command line, built from its module, submits the jobs as a user would:
// `arena submit pytorchjob --gang` (or tfjob) renders Arena's chart (from the same module) into
// a job whose pod templates carry the lightweight coscheduling labels, and creates it with
// kubectl. The real training-operator v1.8.1, started with no gang scheduler, makes no PodGroup:
// its pods carry Arena's labels alone and keep default-scheduler, which the suite's
// kube-scheduler serves with lockstep as its extender. 4 nodes x 2 GPUs, as in operator_test.go.

// arenaImage is the image Arena's PyTorch examples use; no kubelet runs it here.
const arenaImage = "registry.cn-huhehaote.aliyuncs.com/lumo/pytorch-with-tensorboard:1.5.1-cuda10.1-cudnn7-runtime"

// An Arena gang that fits binds whole, one member per node, and lockstep reads it by Arena's
// labels: no PodGroup, no other marker.
func TestArenaPyTorchJobGangBindsWhole(t *testing.T) {
	s := newScenario(t, 4, 2)
	startTrainingOperator(s.ctx, t, "")
	a := newArena(s)

	job := a.submit(pytorchJob("mnist", 4, 2))
	s.eventually(90*time.Second, "the 4 pods of the PyTorchJob to be created and bound", func() bool {
		return s.boundIn("mnist-") == 4
	})
	s.binds.assertNeverPartial(t, job.gang, 4)
	pods := job.checkPods()
	nodes := map[string]bool{}
	for _, p := range pods {
		nodes[p.Spec.NodeName] = true
	}
	require.Len(t, nodes, 4, "4 members x 2 GPUs on 4 nodes x 2 GPUs: one member per node")

	g := s.gangs()[job.gang]
	t.Logf("lockstep's gang %s: phase %s, min-available %d, source %q", job.gang, g.Phase, g.MinAvailable, g.Source)
	require.Equal(t, views.PhaseBound, g.Phase)
	require.Equal(t, 4, g.MinAvailable, "Arena's min-available label: --workers, the master included")
	require.Contains(t, g.Source, "lightweight coscheduling labels (Arena)")
	a.logGet(job)
}

// An Arena gang that can never fit binds nothing and holds nothing: lockstep says why on
// /debug/gangs and on the pods, keeps no capacity for it past the starvation threshold, and a
// job that fits binds whole beside it.
func TestArenaPyTorchJobGangTooBigBindsNothing(t *testing.T) {
	s := newScenario(t, 4, 2)
	startTrainingOperator(s.ctx, t, "")
	a := newArena(s)

	// 1 master + 4 workers x 2 GPUs: 10 GPUs, of 8 in the cluster.
	big := a.submit(pytorchJob("big", 5, 2))
	const reason = "need 10 nvidia.com/gpu, 8 free"
	s.eventually(90*time.Second, "the operator's 5 pods and lockstep's word on why gang "+big.gang+" waits", func() bool {
		return len(listPods(s.ctx, s.ns, kubeflowJobLabel+"=big")) == 5 && s.waitsFor(big.gang, reason)
	})
	big.checkPods()
	g := s.gangs()[big.gang]
	t.Logf("lockstep's gang %s: phase %s, min-available %d, reason %q", big.gang, g.Phase, g.MinAvailable, g.Reason)
	require.Equal(t, 5, g.MinAvailable)
	require.Contains(t, g.Source, "lightweight coscheduling labels (Arena)")
	s.eventually(60*time.Second, "lockstep's reason in a pod's PodScheduled condition", func() bool {
		for _, p := range listPods(s.ctx, s.ns, kubeflowJobLabel+"=big") {
			if strings.Contains(s.schedulingMessage(p.Name), reason) {
				return true
			}
		}
		return false
	})
	for _, p := range listPods(s.ctx, s.ns, kubeflowJobLabel+"=big") {
		t.Logf("pod %s: PodScheduled=False: %s", p.Name, s.schedulingMessage(p.Name))
	}
	// Past the starvation threshold too: no node set could ever hold the quorum, so lockstep
	// neither binds nor holds anything for it.
	require.Never(t, func() bool {
		g := s.gangs()[big.gang]
		return s.boundIn("big-") > 0 || g.Phase != views.PhaseWaiting || g.ReservationExpires != nil
	}, starvationThreshold+2*time.Second, 250*time.Millisecond, "gang %s must bind nothing and hold nothing", big.gang)

	// The GPUs it cannot use stay free: a gang that fits binds whole while it waits.
	fits := a.submit(pytorchJob("fits", 4, 2))
	s.eventually(90*time.Second, "the 4 pods of the fitting PyTorchJob bound", func() bool { return s.boundIn("fits-") == 4 })
	s.binds.assertNeverPartial(t, fits.gang, 4)
	require.Zero(t, s.boundIn("big-"), "the oversized gang still binds nothing")
	require.True(t, s.waitsFor(big.gang, "nvidia.com/gpu"), "the oversized gang still waits for GPUs: %+v", s.gangs()[big.gang])
	big.remove()
	fits.remove()
}

// `arena submit tfjob --gang` counts the parameter server into min-available, and labels it like
// the workers: the GPU-less member binds with the GPU workers, not before them.
func TestArenaTFJobGangWithParameterServer(t *testing.T) {
	s := newScenario(t, 4, 2)
	startTrainingOperator(s.ctx, t, "")
	a := newArena(s)

	job := a.submit(&arenaJob{typ: "tfjob", name: "tf", minAvailable: 5,
		replicas: map[string]int64{"PS": 1, "Worker": 4}, gpus: map[string]int{"Worker": 2},
		flags: []string{"--workers", "4", "--gpus", "2", "--ps", "1"}})
	s.eventually(90*time.Second, "the 5 pods of the TFJob to be created and bound", func() bool { return s.boundIn("tf-") == 5 })
	s.binds.assertNeverPartial(t, job.gang, 5)
	job.checkPods()
	g := s.gangs()[job.gang]
	t.Logf("lockstep's gang %s: phase %s, min-available %d, source %q", job.gang, g.Phase, g.MinAvailable, g.Source)
	require.Equal(t, views.PhaseBound, g.Phase)
	require.Equal(t, 5, g.MinAvailable, "Arena's min-available label: workers + PS")
}

// arena is Arena's command line against the suite's cluster, for one scenario.
type arena struct {
	s   *scenario
	cli *harness.Arena
	dyn dynamic.Interface
}

func newArena(s *scenario) *arena {
	s.t.Helper()
	cli, err := harness.NewArena(s.ctx, env.cluster)
	require.NoError(s.t, err)
	dyn, err := dynamic.NewForConfig(env.cluster.RESTConfig)
	require.NoError(s.t, err)
	return &arena{s: s, cli: cli, dyn: dyn}
}

// arenaJob is a training job submitted with Arena, and what it should come to.
type arenaJob struct {
	// typ is Arena's job type (`arena submit <typ>`), also the training-operator's kind in
	// lower case and the prefix of Arena's gang name.
	typ, name string
	// flags are the submit's own flags (sizes); submit adds the name, namespace, --gang, image
	// and command.
	flags []string
	// minAvailable is what Arena should write into the min-available label; replicas the replica
	// types and counts of the job it renders; gpus each replica type's GPUs (absent: none).
	minAvailable int
	replicas     map[string]int64
	gpus         map[string]int

	a    *arena
	gang string
	// removed makes remove run once.
	removed bool
}

// pytorchJob is a PyTorchJob of workers members, the master included (Arena counts it among
// --workers), with gpus GPUs each.
func pytorchJob(name string, workers, gpus int) *arenaJob {
	return &arenaJob{typ: "pytorchjob", name: name, minAvailable: workers,
		replicas: map[string]int64{"Master": 1, "Worker": int64(workers - 1)},
		gpus:     map[string]int{"Master": gpus, "Worker": gpus},
		flags:    []string{"--workers", strconv.Itoa(workers), "--gpus", strconv.Itoa(gpus)}}
}

func (j *arenaJob) resource() schema.GroupVersionResource {
	return schema.GroupVersionResource{Group: "kubeflow.org", Version: "v1", Resource: j.typ + "s"}
}

// specsField is the job's field holding its replica specs: pytorchReplicaSpecs, tfReplicaSpecs.
func (j *arenaJob) specsField() string {
	return strings.TrimSuffix(j.typ, "job") + "ReplicaSpecs"
}

// submit runs `arena submit <type> --gang ...`, checks and logs what Arena created, and removes
// the job when the test ends.
func (a *arena) submit(j *arenaJob) *arenaJob {
	s := a.s
	s.t.Helper()
	j.a, j.gang = a, j.typ+"-"+j.name
	args := append(append([]string{"submit", j.typ, "--namespace", s.ns, "--name", j.name, "--gang"}, j.flags...),
		"--image", arenaImage, "python /root/code/mnist-pytorch/mnist.py --backend gloo")
	s.t.Logf("$ arena %s", harness.ShellQuote(args))
	// Registered before the submit: whatever part of the job Arena created goes when the test
	// ends, even if the submit failed half way.
	s.t.Cleanup(j.remove)
	out, err := a.cli.Run(s.ctx, args...)
	require.NoError(s.t, err)
	s.t.Logf("arena's output:\n%s", strings.TrimSpace(out))
	j.checkCreated()
	return j
}

// checkCreated reads the job Arena created, logs it and checks the labels lockstep relies on:
// the lightweight coscheduling name and min-available on every replica template, and no
// scheduler named (Arena names one only with --scheduler).
func (j *arenaJob) checkCreated() {
	s := j.a.s
	s.t.Helper()
	obj, err := j.a.dyn.Resource(j.resource()).Namespace(s.ns).Get(s.ctx, j.name, metav1.GetOptions{})
	require.NoError(s.t, err, "the %s arena created", j.typ)
	s.t.Logf("Arena created %s %s/%s (%s), labels %v", obj.GetKind(), s.ns, obj.GetName(), obj.GetAPIVersion(), obj.GetLabels())
	specs, _, err := unstructured.NestedMap(obj.Object, "spec", j.specsField())
	require.NoError(s.t, err)
	types := make([]string, 0, len(specs))
	for rt := range specs {
		types = append(types, rt)
	}
	sort.Strings(types)
	require.Len(s.t, types, len(j.replicas), "%s's replica types: %v", j.name, types)
	for _, rt := range types {
		spec, _ := specs[rt].(map[string]any)
		replicas, _, _ := unstructured.NestedInt64(spec, "replicas")
		labels, _, _ := unstructured.NestedStringMap(spec, "template", "metadata", "labels")
		scheduler, _, _ := unstructured.NestedString(spec, "template", "spec", "schedulerName")
		containers, _, _ := unstructured.NestedSlice(spec, "template", "spec", "containers")
		require.NotEmpty(s.t, containers, "%s template's containers", rt)
		limits, _, _ := unstructured.NestedMap(containers[0].(map[string]any), "resources", "limits")
		s.t.Logf("  %s: replicas %d, template labels %v, schedulerName %q, limits %v", rt, replicas, labels, scheduler, limits)
		want, ok := j.replicas[rt]
		require.True(s.t, ok, "%s: unexpected replica type %s", j.name, rt)
		require.Equal(s.t, want, replicas, "%s replicas", rt)
		require.Equal(s.t, j.gang, labels[wellknown.LabelLightweightGangName], "%s template's gang label", rt)
		require.Equal(s.t, strconv.Itoa(j.minAvailable), labels[wellknown.LabelLightweightMinAvailable], "%s template's min-available label", rt)
		require.Empty(s.t, scheduler, "%s template: Arena names no scheduler without --scheduler", rt)
		if gpus := j.gpus[rt]; gpus > 0 {
			require.Equal(s.t, strconv.Itoa(gpus), fmt.Sprint(limits["nvidia.com/gpu"]), "%s template's GPU limit", rt)
		} else {
			require.NotContains(s.t, limits, "nvidia.com/gpu", "%s template's GPU limit", rt)
		}
	}
	// Arena's record of the submit, which `arena get` and `arena delete` read.
	cm, err := env.client.CoreV1().ConfigMaps(s.ns).Get(s.ctx, j.name+"-"+j.typ, metav1.GetOptions{})
	require.NoError(s.t, err, "Arena's ConfigMap of the job")
	keys := make([]string, 0, len(cm.Data))
	for k := range cm.Data {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	s.t.Logf("Arena created ConfigMap %s/%s: keys %v, app %q", s.ns, cm.Name, keys, cm.Data["app"])
	require.Contains(s.t, strings.Fields(cm.Data["app"]), j.typ+".kubeflow.org/"+j.name, "what Arena's ConfigMap says it created")
}

// checkPods waits for the operator's pods of the job, logs them, and checks that each carries
// Arena's labels and nothing of another gang scheduler, under default-scheduler.
func (j *arenaJob) checkPods() []corev1.Pod {
	s := j.a.s
	s.t.Helper()
	want, n := map[string]int{}, 0
	for rt, c := range j.replicas {
		want[strings.ToLower(rt)] = int(c)
		n += int(c)
	}
	selector := kubeflowJobLabel + "=" + j.name
	s.eventually(60*time.Second, fmt.Sprintf("the operator's %d pods of %s", n, j.name), func() bool {
		return len(listPods(s.ctx, s.ns, selector)) == n
	})
	pods := listPods(s.ctx, s.ns, selector)
	sort.Slice(pods, func(a, b int) bool { return pods[a].Name < pods[b].Name })
	roles := map[string]int{}
	for _, p := range pods {
		s.t.Logf("pod %s: schedulerName %q, node %q, labels %v, annotations %v", p.Name, p.Spec.SchedulerName, p.Spec.NodeName, p.Labels, p.Annotations)
		require.Equal(s.t, corev1.DefaultSchedulerName, p.Spec.SchedulerName, "pod %s", p.Name)
		require.Equal(s.t, j.gang, p.Labels[wellknown.LabelLightweightGangName], "pod %s's gang label", p.Name)
		require.Equal(s.t, strconv.Itoa(j.minAvailable), p.Labels[wellknown.LabelLightweightMinAvailable], "pod %s's min-available label", p.Name)
		require.NotContains(s.t, p.Labels, wellknown.LabelCoschedulingPodGroup, "pod %s: the operator makes no PodGroup without a gang scheduler", p.Name)
		require.NotContains(s.t, p.Annotations, wellknown.AnnotationGroupName, "pod %s: the operator makes no PodGroup without a gang scheduler", p.Name)
		role := p.Labels["training.kubeflow.org/replica-type"]
		roles[role]++
		gpus := int64(0)
		for rt, g := range j.gpus {
			if strings.EqualFold(rt, role) {
				gpus = int64(g)
			}
		}
		got := p.Spec.Containers[0].Resources.Limits[corev1.ResourceName("nvidia.com/gpu")]
		require.Equal(s.t, gpus, got.Value(), "pod %s's GPUs", p.Name)
	}
	require.Equal(s.t, want, roles, "the operator's pods by replica type")
	return pods
}

// logGet logs `arena get`: what Arena itself makes of the job it submitted.
func (a *arena) logGet(j *arenaJob) {
	s := a.s
	s.t.Helper()
	args := []string{"get", j.name, "--namespace", s.ns, "--type", j.typ}
	out, err := a.cli.Run(s.ctx, args...)
	require.NoError(s.t, err)
	s.t.Logf("$ arena %s\n%s", harness.ShellQuote(args), strings.TrimSpace(out))
}

// remove deletes the job, Arena's ConfigMap of it and the job's pods (without a kubelet a bound
// pod's graceful deletion never ends), and waits for the pods to go: the next training-operator
// the suite starts would otherwise adopt them.
func (j *arenaJob) remove() {
	if j.removed || j.a == nil {
		return
	}
	j.removed = true
	s := j.a.s
	bg := context.Background()
	if err := j.a.dyn.Resource(j.resource()).Namespace(s.ns).Delete(bg, j.name, metav1.DeleteOptions{}); err != nil && !apierrors.IsNotFound(err) {
		s.t.Errorf("deleting %s %s: %v", j.typ, j.name, err)
	}
	cm := j.name + "-" + j.typ
	if err := env.client.CoreV1().ConfigMaps(s.ns).Delete(bg, cm, metav1.DeleteOptions{}); err != nil && !apierrors.IsNotFound(err) {
		s.t.Errorf("deleting Arena's ConfigMap %s: %v", cm, err)
	}
	selector := kubeflowJobLabel + "=" + j.name
	if err := env.client.CoreV1().Pods(s.ns).DeleteCollection(bg, metav1.DeleteOptions{GracePeriodSeconds: new(int64)},
		metav1.ListOptions{LabelSelector: selector}); err != nil {
		s.t.Errorf("deleting the pods of %s: %v", j.name, err)
	}
	s.eventually(30*time.Second, fmt.Sprintf("job %s's pods gone", j.name), func() bool {
		return len(listPods(bg, s.ns, selector)) == 0
	})
}
