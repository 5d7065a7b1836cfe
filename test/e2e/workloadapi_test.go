package e2e

import (
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	schedulingv1alpha2 "k8s.io/api/scheduling/v1alpha2"
	apimeta "k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/lockstep-sched/lockstep/test/lib/builders"
	"github.com/lockstep-sched/lockstep/test/lib/harness"
)

// Kubernetes' own gang API (1.36, scheduling.k8s.io/v1alpha2): the suite's kube-apiserver serves
// it (gate GenericWorkload), its kube-controller-manager makes PodGroups for Indexed Jobs (gate
// WorkloadWithJob), and its kube-scheduler runs with its defaults, so without the GangScheduling
// plugin: alone, it would place these pods one by one. Under lockstep each group binds whole or
// not at all, and its PodGroupScheduled condition says which, as kube-scheduler's plugin would.

// TestKubernetesPodGroup: a PodGroup written by hand. The fitting group's pods are created first
// and its PodGroup after them, the order a user's script may well use.
func TestKubernetesPodGroup(t *testing.T) {
	s := newScenario(t, 2, 4)

	s.createPodGroup("big", 3)
	for _, name := range []string{"big-0", "big-1", "big-2"} {
		s.create(builders.Pod("", name).CPU("100m").GPU(4).PodGroup("big").Obj())
	}
	s.eventually(60*time.Second, "lockstep to say why the 3 x 4-GPU group waits", func() bool {
		return s.waitsFor("big", "need 12 nvidia.com/gpu, 8 free")
	})
	require.Contains(t, s.gangs()["big"].Source, "Kubernetes PodGroup "+s.ns+"/big")
	s.eventually(30*time.Second, "the PodGroup's condition to say Unschedulable with lockstep's reason", func() bool {
		c := s.podGroupCondition("big")
		return c != nil && c.Status == metav1.ConditionFalse && c.Reason == "Unschedulable" && strings.Contains(c.Message, "need 12 nvidia.com/gpu")
	})
	require.Zero(t, s.boundIn("big-"), "no member of a group that does not fit may bind")
	for _, name := range []string{"big-0", "big-1", "big-2"} {
		s.deletePod(name)
	}

	for _, name := range []string{"train-0", "train-1", "train-2"} {
		s.create(builders.Pod("", name).CPU("100m").GPU(2).PodGroup("train").Obj())
	}
	s.eventually(30*time.Second, "lockstep to wait for the PodGroup the pods name", func() bool {
		return strings.Contains(s.gangs()["train"].Reason, "Kubernetes PodGroup "+s.ns+"/train")
	})
	require.Zero(t, s.boundIn("train-"), "pods whose PodGroup is not there yet must wait for its rules")
	s.createPodGroup("train", 3)
	s.eventually(60*time.Second, "all 3 members bound once their PodGroup exists", func() bool { return s.boundIn("train-") == 3 })
	s.binds.assertNeverPartial(t, "train", 3)
	s.eventually(30*time.Second, "the PodGroup's condition to say Scheduled", func() bool {
		c := s.podGroupCondition("train")
		return c != nil && c.Status == metav1.ConditionTrue && c.Reason == "Scheduled"
	})
}

// TestIndexedJobGetsAPodGroup: kube-controller-manager's Job controller makes a Workload and a
// PodGroup (gang, minCount = parallelism) for an Indexed Job, and pods that name it. A Job whose
// pods cannot all fit binds none; one that fits binds whole.
func TestIndexedJobGetsAPodGroup(t *testing.T) {
	s := newScenario(t, 2, 4)

	s.createIndexedJob("big", 3, 4)
	bigGroup := s.jobPodGroup("big")
	require.Equal(t, int32(3), bigGroup.Spec.SchedulingPolicy.Gang.MinCount, "the Job controller's gang: minCount is the Job's parallelism")
	t.Logf("the Job controller made PodGroup %s (gang minCount %d, template %s of Workload %s)", bigGroup.Name,
		bigGroup.Spec.SchedulingPolicy.Gang.MinCount, bigGroup.Spec.PodGroupTemplateRef.Workload.PodGroupTemplateName,
		bigGroup.Spec.PodGroupTemplateRef.Workload.WorkloadName)
	s.eventually(60*time.Second, "the Job's 3 pods, each naming the PodGroup", func() bool { return len(s.podsNaming(bigGroup.Name)) == 3 })
	s.eventually(60*time.Second, "lockstep to say why the 3 x 4-GPU Job waits", func() bool {
		return s.waitsFor(bigGroup.Name, "need 12 nvidia.com/gpu, 8 free")
	})
	require.Zero(t, s.boundIn("big-"), "no pod of a Job that does not fit may bind")
	s.deleteJob("big")
	s.eventually(60*time.Second, "the big Job's pods to be collected", func() bool { return len(s.podsNaming(bigGroup.Name)) == 0 })

	s.createIndexedJob("fits", 3, 2)
	group := s.jobPodGroup("fits")
	s.eventually(90*time.Second, "all 3 pods of the fitting Job bound", func() bool { return s.boundIn("fits-") == 3 })
	s.binds.assertNeverPartial(t, group.Name, 3)
	s.eventually(30*time.Second, "the Job's PodGroup to say Scheduled", func() bool {
		c := s.podGroupCondition(group.Name)
		return c != nil && c.Status == metav1.ConditionTrue
	})
	s.deleteJob("fits")
}

// TestKubernetesExamples applies examples/kubernetes as a user would, objects as written (the
// Job's pods made by kube-controller-manager): on 4 nodes x 2 GPUs each gang binds whole.
func TestKubernetesExamples(t *testing.T) {
	for _, ex := range []struct{ file, pods string }{
		{"kubernetes/podgroup.yaml", "train-"},
		{"kubernetes/indexed-job.yaml", "indexed-train-"},
	} {
		t.Run(ex.file, func(t *testing.T) {
			s := newScenario(t, 4, 2)
			objs, err := harness.DecodeFile(filepath.Join(env.root, "examples", ex.file))
			require.NoError(t, err)
			for _, o := range objs {
				o.SetNamespace(s.ns)
				if o.GetKind() == "Job" {
					s.t.Cleanup(func() { s.deleteJob(o.GetName()) })
				}
			}
			require.NoError(t, harness.Create(s.ctx, env.cluster.RESTConfig, objs))
			s.eventually(90*time.Second, "all 4 pods bound", func() bool { return s.boundIn(ex.pods) == 4 })
		})
	}
}

func (s *scenario) createPodGroup(name string, minCount int32) {
	s.t.Helper()
	pg := &schedulingv1alpha2.PodGroup{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: s.ns},
		Spec: schedulingv1alpha2.PodGroupSpec{SchedulingPolicy: schedulingv1alpha2.PodGroupSchedulingPolicy{
			Gang: &schedulingv1alpha2.GangSchedulingPolicy{MinCount: minCount}}}}
	_, err := env.client.SchedulingV1alpha2().PodGroups(s.ns).Create(s.ctx, pg, metav1.CreateOptions{})
	require.NoError(s.t, err)
}

// podGroupCondition is the PodGroupScheduled condition of a PodGroup, nil when it has none yet.
func (s *scenario) podGroupCondition(name string) *metav1.Condition {
	pg, err := env.client.SchedulingV1alpha2().PodGroups(s.ns).Get(s.ctx, name, metav1.GetOptions{})
	if err != nil {
		return nil
	}
	return apimeta.FindStatusCondition(pg.Status.Conditions, schedulingv1alpha2.PodGroupScheduled)
}

// createIndexedJob creates an Indexed Job of n pods asking gpus GPUs each, all running at once:
// the shape the Job controller makes a gang of. It is deleted, with its pods, when the test ends.
func (s *scenario) createIndexedJob(name string, n int32, gpus int) {
	s.t.Helper()
	indexed := batchv1.IndexedCompletion
	pod := builders.Pod("", name).CPU("100m").GPU(int64(gpus)).Obj()
	pod.Spec.RestartPolicy = corev1.RestartPolicyNever
	job := &batchv1.Job{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: s.ns},
		Spec: batchv1.JobSpec{Parallelism: &n, Completions: &n, CompletionMode: &indexed,
			Template: corev1.PodTemplateSpec{ObjectMeta: metav1.ObjectMeta{Labels: map[string]string{"job": name}}, Spec: pod.Spec}}}
	_, err := env.client.BatchV1().Jobs(s.ns).Create(s.ctx, job, metav1.CreateOptions{})
	require.NoError(s.t, err)
	// Before the scenario's own cleanup (cleanups run last first): a Job left behind would make
	// its pods again as fast as they are deleted.
	s.t.Cleanup(func() { s.deleteJob(name) })
}

func (s *scenario) deleteJob(name string) {
	background := metav1.DeletePropagationBackground
	_ = env.client.BatchV1().Jobs(s.ns).Delete(s.ctx, name, metav1.DeleteOptions{PropagationPolicy: &background})
	s.deleteAllPods() // no kubelet finishes the bound ones the garbage collector deletes
}

// jobPodGroup waits for the PodGroup the Job controller makes for a Job, and returns it.
func (s *scenario) jobPodGroup(job string) *schedulingv1alpha2.PodGroup {
	s.t.Helper()
	var found *schedulingv1alpha2.PodGroup
	s.eventually(60*time.Second, "the Job controller to make a PodGroup for Job "+job, func() bool {
		list, err := env.client.SchedulingV1alpha2().PodGroups(s.ns).List(s.ctx, metav1.ListOptions{})
		if err != nil {
			return false
		}
		for i, pg := range list.Items {
			if ref := metav1.GetControllerOf(&pg); ref != nil && ref.Kind == "Job" && ref.Name == job {
				found = &list.Items[i]
				return true
			}
		}
		return false
	})
	return found
}

// podsNaming are the scenario's pods whose spec.schedulingGroup names the PodGroup.
func (s *scenario) podsNaming(group string) []string {
	var out []string
	for _, p := range s.pods() {
		if g := p.Spec.SchedulingGroup; g != nil && g.PodGroupName != nil && *g.PodGroupName == group {
			out = append(out, p.Name)
		}
	}
	return out
}
