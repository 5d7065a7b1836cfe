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
	"github.com/lockstep-sched/lockstep/gang"
	"github.com/lockstep-sched/lockstep/test/lib/harness"
	"github.com/lockstep-sched/lockstep/test/lib/thirdparty"
)

// The Kubeflow training-operator v1.8.1, built from its module, writes the PodGroups and pods:
// lockstep reads them as they come, with no edit. 4 nodes x 2 GPUs: a job of 5 GPU workers x 2
// binds nothing and says why; one of 4 binds whole.

func TestTrainingOperatorWithSchedulerPlugins(t *testing.T) {
	installCRDs(t)
	s := newScenario(t, 4, 2)
	startTrainingOperator(s.ctx, t, "scheduler-plugins")

	big := s.submitJob("scheduler-plugins/tfjob.yaml", "tf-big", 5)
	s.eventually(90*time.Second, "lockstep to say why the 5-worker TFJob waits", func() bool {
		g := s.gangs()["tf-big"]
		return g.Phase == gang.PhaseWaiting && strings.Contains(g.Reason, "need 10 nvidia.com/gpu, 8 free")
	})
	g := s.gangs()["tf-big"]
	require.Equal(t, 6, g.MinAvailable, "the operator's PodGroup counts the parameter server too")
	require.Contains(t, g.Source, "scheduler-plugins PodGroup "+s.ns+"/tf-big")
	require.Zero(t, s.boundIn("tf-big"), "no member of a gang that does not fit may bind, not even the GPU-less PS")
	big()

	for _, job := range []struct{ file, name string }{{"scheduler-plugins/tfjob.yaml", "tf"}, {"scheduler-plugins/mpijob.yaml", "mpi"}} {
		remove := s.submitJob(job.file, job.name, 4)
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

	big := s.submitJob("volcano/tfjob.yaml", "tf-big", 5)
	s.eventually(60*time.Second, "the 5-worker TFJob's PodGroup to stay Pending with lockstep's reason", func() bool {
		obj := s.group(dialect.Volcano, "tf-big")
		return statusField(obj, "phase") == "Pending" && strings.Contains(unschedulableMessage(obj), "needs 10 nvidia.com/gpu in all; the cluster has 8 free")
	})
	require.Empty(t, listJobPods(s.ctx, s.ns, "tf-big"), "the operator creates no pods for a group that is not Inqueue")
	big()

	remove := s.submitJob("volcano/tfjob.yaml", "tf", 4)
	defer remove()
	s.eventually(60*time.Second, "the PodGroup Inqueue, the operator's pods created and all 5 bound", func() bool { return s.boundIn("tf-") == 5 })
	s.binds.assertNeverPartial(t, "tf", 5)
	require.Contains(t, s.gangs()["tf"].Source, "Volcano PodGroup "+s.ns+"/tf")
	s.eventually(30*time.Second, "the PodGroup to say Running", func() bool {
		return statusField(s.group(dialect.Volcano, "tf"), "phase") == "Running"
	})
}

// submitJob creates a training job from an examples/ file under name, with workers workers, and
// returns what removes it: the job, and its pods, which nothing garbage-collects here (and which
// the next operator started in the suite would otherwise adopt).
func (s *scenario) submitJob(file, name string, workers int) (remove func()) {
	s.t.Helper()
	objs, err := thirdparty.ReadObjects(filepath.Join(env.root, "examples", file))
	require.NoError(s.t, err)
	require.Len(s.t, objs, 1)
	job := objs[0]
	job.SetName(name)
	job.SetNamespace(s.ns)
	replicas := map[string]string{"TFJob": "tfReplicaSpecs", "MPIJob": "mpiReplicaSpecs"}[job.GetKind()]
	require.NotEmpty(s.t, replicas, "%s: a TFJob or an MPIJob", file)
	require.NoError(s.t, unstructured.SetNestedField(job.Object, int64(workers), "spec", replicas, "Worker", "replicas"))
	require.NoError(s.t, harness.Create(s.ctx, env.cluster.RESTConfig, []*unstructured.Unstructured{job}))
	removed := false
	remove = func() {
		if removed {
			return
		}
		removed = true
		dyn, err := dynamic.NewForConfig(env.cluster.RESTConfig)
		require.NoError(s.t, err)
		gvr := schema.GroupVersionResource{Group: "kubeflow.org", Version: "v1", Resource: strings.ToLower(job.GetKind()) + "s"}
		bg := context.Background()
		require.NoError(s.t, dyn.Resource(gvr).Namespace(s.ns).Delete(bg, name, metav1.DeleteOptions{}))
		selector := "training.kubeflow.org/job-name=" + name
		require.NoError(s.t, env.client.CoreV1().Pods(s.ns).DeleteCollection(bg, metav1.DeleteOptions{GracePeriodSeconds: new(int64)},
			metav1.ListOptions{LabelSelector: selector}))
		s.eventually(30*time.Second, fmt.Sprintf("job %s's pods gone", name), func() bool { return len(listJobPods(bg, s.ns, name)) == 0 })
	}
	s.t.Cleanup(func() {
		if s.t.Failed() && !removed {
			s.t.Logf("pods of job %s before removing it:\n%s\n/debug/gangs:\n%s", name, s.describePods(), s.rawGangs())
		}
		remove()
	})
	return remove
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

// listJobPods lists the pods the training-operator made for a job (none on error).
func listJobPods(ctx context.Context, ns, job string) []corev1.Pod {
	list, err := env.client.CoreV1().Pods(ns).List(ctx, metav1.ListOptions{LabelSelector: "training.kubeflow.org/job-name=" + job})
	if err != nil {
		return nil
	}
	return list.Items
}
