package e2e

import (
	"context"
	"fmt"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/dynamic"

	"github.com/lockstep-sched/lockstep/dialect"
	"github.com/lockstep-sched/lockstep/test/lib/harness"
	"github.com/lockstep-sched/lockstep/test/lib/thirdparty"
)

// The Kubeflow training-operator v1.8.1 and Volcano's job controller, each built from its module,
// write the PodGroups and pods: lockstep reads them as they come, with no edit. 4 nodes x 2 GPUs:
// a job of 5 GPU workers x 2 binds nothing and says why; one of 4 binds whole.

func TestTrainingOperatorWithSchedulerPlugins(t *testing.T) {
	installCRDs(t)
	s := newScenario(t, 4, 2)
	startTrainingOperator(s.ctx, t, "scheduler-plugins")

	_, big := s.submitJob("scheduler-plugins/tfjob.yaml", "tf-big", 5)
	s.eventually(90*time.Second, "lockstep to say why the 5-worker TFJob waits", func() bool {
		return s.waitsFor("tf-big", "need 10 nvidia.com/gpu, 8 free")
	})
	g := s.gangs()["tf-big"]
	require.Equal(t, 6, g.MinAvailable, "the operator's PodGroup counts the parameter server too")
	require.Contains(t, g.Source, "scheduler-plugins PodGroup "+s.ns+"/tf-big")
	require.Zero(t, s.boundIn("tf-big"), "no member of a gang that does not fit may bind, not even the GPU-less PS")
	big()

	for _, job := range []struct{ file, name string }{{"scheduler-plugins/tfjob.yaml", "tf"}, {"scheduler-plugins/mpijob.yaml", "mpi"}} {
		_, remove := s.submitJob(job.file, job.name, 4)
		s.eventually(90*time.Second, job.name+": all 5 pods bound", func() bool { return s.boundIn(job.name+"-") == 5 })
		s.binds.assertNeverPartial(t, job.name, 5)
		s.eventually(30*time.Second, job.name+"'s PodGroup to say Running", func() bool {
			return statusField(s.group(dialect.Coscheduling, job.name), "phase") == "Running"
		})
		remove() // frees the GPUs for the next job
	}
}

func TestTrainingOperatorWithVolcano(t *testing.T) {
	installCRDs(t)
	s := newScenario(t, 4, 2)
	startTrainingOperator(s.ctx, t, "volcano")

	_, big := s.submitJob("volcano/tfjob.yaml", "tf-big", 5)
	s.eventually(60*time.Second, "the 5-worker TFJob's PodGroup to stay Pending with lockstep's reason", func() bool {
		obj := s.group(dialect.Volcano, "tf-big")
		return statusField(obj, "phase") == "Pending" && strings.Contains(unschedulableMessage(obj), "needs 10 nvidia.com/gpu in all; the cluster has 8 free")
	})
	require.Empty(t, listPods(s.ctx, s.ns, kubeflowJobLabel+"=tf-big"), "the operator creates no pods for a group that is not Inqueue")
	big()

	_, remove := s.submitJob("volcano/tfjob.yaml", "tf", 4)
	defer remove()
	s.eventually(60*time.Second, "the PodGroup Inqueue, the operator's pods created and all 5 bound", func() bool { return s.boundIn("tf-") == 5 })
	s.binds.assertNeverPartial(t, "tf", 5)
	require.Contains(t, s.gangs()["tf"].Source, "Volcano PodGroup "+s.ns+"/tf")
	s.eventually(30*time.Second, "the PodGroup to say Running", func() bool {
		return statusField(s.group(dialect.Volcano, "tf"), "phase") == "Running"
	})
}

// Volcano's own job controller (v1.10.0, built from its module) turns a vcjob into a PodGroup
// named <job>-<job uid> with a quorum per task, and makes no pods while that group is Pending.
// 4 nodes x 2 GPUs, as above: 1 PS + 5 GPU workers x 2 binds nothing and says why; 1 + 4 binds
// whole.
func TestVolcanoJob(t *testing.T) {
	installCRDs(t)
	s := newScenario(t, 4, 2)
	startVolcanoControllers(s.ctx, t)

	big, removeBig := s.submitJob("volcano/vcjob.yaml", "big", 5)
	bigGroup := volcanoJobGroup(big)
	s.eventually(60*time.Second, "the 6-member vcjob's PodGroup to stay Pending with lockstep's reason", func() bool {
		obj := s.group(dialect.Volcano, bigGroup)
		return statusField(obj, "phase") == "Pending" && strings.Contains(unschedulableMessage(obj), "needs 10 nvidia.com/gpu in all; the cluster has 8 free")
	})
	require.Empty(t, listPods(s.ctx, s.ns, jobKinds["Job"].podLabel+"=big"), "Volcano's job controller creates no pods for a group that is not Inqueue")
	removeBig()

	job, remove := s.submitJob("volcano/vcjob.yaml", "vcjob", 4)
	defer remove()
	group := volcanoJobGroup(job)
	s.eventually(60*time.Second, "the PodGroup Inqueue, the job controller's pods created and all 5 bound", func() bool { return s.boundIn("vcjob-") == 5 })
	s.binds.assertNeverPartial(t, group, 5)
	g := s.gangs()[group]
	require.Equal(t, 5, g.MinAvailable, "spec.minAvailable of the vcjob, through its PodGroup")
	require.Equal(t, "ps=1,worker=4", g.TaskQuorums, "the job controller's minTaskMember: each task's replicas")
	require.Contains(t, g.Source, "Volcano PodGroup "+s.ns+"/"+group)
	s.eventually(30*time.Second, "the PodGroup to say Running", func() bool {
		return statusField(s.group(dialect.Volcano, group), "phase") == "Running"
	})
}

// volcanoJobGroup is the name of the PodGroup Volcano's job controller makes for a vcjob.
func volcanoJobGroup(job *unstructured.Unstructured) string {
	return job.GetName() + "-" + string(job.GetUID())
}

// jobKind is what the suite needs to know of a job kind an operator turns into pods.
type jobKind struct {
	resource schema.GroupVersionResource
	// scale sets the number of workers, and keeps a quorum that counts every member in step.
	scale func(job *unstructured.Unstructured, workers int) error
	// podLabel is the label the operator puts the job's name in on each pod.
	podLabel string
}

var jobKinds = map[string]jobKind{
	"TFJob": {schema.GroupVersionResource{Group: "kubeflow.org", Version: "v1", Resource: "tfjobs"},
		kubeflowWorkers("tfReplicaSpecs"), kubeflowJobLabel},
	"MPIJob": {schema.GroupVersionResource{Group: "kubeflow.org", Version: "v1", Resource: "mpijobs"},
		kubeflowWorkers("mpiReplicaSpecs"), kubeflowJobLabel},
	"Job": {schema.GroupVersionResource{Group: "batch.volcano.sh", Version: "v1alpha1", Resource: "jobs"},
		volcanoWorkers, "volcano.sh/job-name"},
}

const kubeflowJobLabel = "training.kubeflow.org/job-name"

// kubeflowWorkers sets a Kubeflow job's Worker replicas; the operator derives the quorum.
func kubeflowWorkers(specs string) func(*unstructured.Unstructured, int) error {
	return func(job *unstructured.Unstructured, workers int) error {
		return unstructured.SetNestedField(job.Object, int64(workers), "spec", specs, "Worker", "replicas")
	}
}

// volcanoWorkers sets a vcjob's worker task replicas and moves spec.minAvailable by as much.
func volcanoWorkers(job *unstructured.Unstructured, workers int) error {
	tasks, _, err := unstructured.NestedSlice(job.Object, "spec", "tasks")
	if err != nil {
		return err
	}
	for _, t := range tasks {
		task, _ := t.(map[string]any)
		if task["name"] != "worker" {
			continue
		}
		before, _, _ := unstructured.NestedInt64(task, "replicas")
		minAvailable, _, _ := unstructured.NestedInt64(job.Object, "spec", "minAvailable")
		task["replicas"] = int64(workers)
		if err := unstructured.SetNestedSlice(job.Object, tasks, "spec", "tasks"); err != nil {
			return err
		}
		return unstructured.SetNestedField(job.Object, minAvailable+int64(workers)-before, "spec", "minAvailable")
	}
	return fmt.Errorf("vcjob %s has no task named worker", job.GetName())
}

// submitJob creates a training job from an examples/ file under name, with workers workers, and
// returns it as created and what removes it: the job, and its pods, which nothing
// garbage-collects here (and which the next operator started in the suite would otherwise adopt).
func (s *scenario) submitJob(file, name string, workers int) (created *unstructured.Unstructured, remove func()) {
	s.t.Helper()
	objs, err := thirdparty.ReadObjects(filepath.Join(env.root, "examples", file))
	require.NoError(s.t, err)
	require.Len(s.t, objs, 1)
	job := objs[0]
	job.SetName(name)
	job.SetNamespace(s.ns)
	kind, ok := jobKinds[job.GetKind()]
	require.True(s.t, ok, "%s: a kind of job the suite knows (%s)", file, job.GetKind())
	require.NoError(s.t, kind.scale(job, workers), file)
	dyn, err := dynamic.NewForConfig(env.cluster.RESTConfig)
	require.NoError(s.t, err)
	created, err = dyn.Resource(kind.resource).Namespace(s.ns).Create(s.ctx, job, metav1.CreateOptions{FieldValidation: "Strict"})
	require.NoError(s.t, err, "creating %s %s", job.GetKind(), name)
	selector := kind.podLabel + "=" + name
	removed := false
	remove = func() {
		if removed {
			return
		}
		removed = true
		bg := context.Background()
		require.NoError(s.t, dyn.Resource(kind.resource).Namespace(s.ns).Delete(bg, name, metav1.DeleteOptions{}))
		require.NoError(s.t, env.client.CoreV1().Pods(s.ns).DeleteCollection(bg, metav1.DeleteOptions{GracePeriodSeconds: new(int64)},
			metav1.ListOptions{LabelSelector: selector}))
		s.eventually(30*time.Second, fmt.Sprintf("job %s's pods gone", name), func() bool { return len(listPods(bg, s.ns, selector)) == 0 })
	}
	s.t.Cleanup(func() {
		if s.t.Failed() && !removed {
			s.t.Logf("pods of job %s before removing it:\n%s\n/debug/gangs:\n%s", name, s.describePods(), s.rawGangs())
		}
		remove()
	})
	return created, remove
}

// startTrainingOperator runs the training-operator for the rest of the test.
func startTrainingOperator(ctx context.Context, t *testing.T, gangScheduler string) {
	t.Helper()
	began := time.Now()
	op, err := harness.StartTrainingOperator(ctx, env.cluster, gangScheduler, t.Logf)
	require.NoError(t, err)
	t.Cleanup(func() {
		if t.Failed() {
			t.Logf("training-operator log tail:\n%s", op.Tail(40))
		}
		op.Stop()
	})
	t.Logf("training-operator for %q started in %s", gangScheduler, time.Since(began).Round(time.Millisecond))
}

// startVolcanoControllers runs Volcano's job controller for the rest of the test.
func startVolcanoControllers(ctx context.Context, t *testing.T) {
	t.Helper()
	vc, err := harness.StartVolcanoControllers(ctx, env.cluster, t.Logf)
	require.NoError(t, err)
	t.Cleanup(func() {
		if t.Failed() {
			t.Logf("volcano controller-manager log tail:\n%s", vc.Tail(40))
		}
		vc.Stop()
	})
}

// listPods lists the scenario namespace's pods that match a label selector (none on error).
func listPods(ctx context.Context, ns, selector string) []corev1.Pod {
	list, err := env.client.CoreV1().Pods(ns).List(ctx, metav1.ListOptions{LabelSelector: selector})
	if err != nil {
		return nil
	}
	return list.Items
}
