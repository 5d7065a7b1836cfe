package e2e

import (
	"fmt"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	schedulingv1alpha3 "k8s.io/api/scheduling/v1alpha3"
	apimeta "k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/dynamic"

	"github.com/lockstep-sched/lockstep/dialect"
	"github.com/lockstep-sched/lockstep/test/lib/builders"
	"github.com/lockstep-sched/lockstep/test/lib/harness"
)

// Kubernetes' own gang API (scheduling.k8s.io/v1beta1 in 1.37, v1alpha2 in 1.36): the suite's
// kube-apiserver serves it (gate GenericWorkload), its kube-controller-manager makes PodGroups
// for Indexed Jobs (gate WorkloadWithJob), and its kube-scheduler runs with its defaults, so
// without the GangScheduling plugin: alone, it would place these pods one by one. Under lockstep
// each group binds whole or not at all, and its condition (PodGroupInitiallyScheduled in 1.37,
// PodGroupScheduled in 1.36) says which, as kube-scheduler's plugin would. The PodGroups are
// written and read at whichever version the apiserver serves, as lockstep reads them.

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

// TestKubernetesPodGroupSeedPair: the seed's two jobs as Kubernetes PodGroups, created together on
// 4 nodes x 2 GPUs: the 5 x 2-GPU group binds nothing and says why, the 4 x 2-GPU group binds
// whole, and each PodGroup's condition says which.
func TestKubernetesPodGroupSeedPair(t *testing.T) {
	s := newScenario(t, 4, 2)
	s.createPodGroup("big", 5)
	s.createPodGroup("train", 4)
	for i := range 5 {
		s.create(builders.Pod("", fmt.Sprintf("big-%d", i)).CPU("100m").GPU(2).PodGroup("big").Obj())
		if i < 4 {
			s.create(builders.Pod("", fmt.Sprintf("train-%d", i)).CPU("100m").GPU(2).PodGroup("train").Obj())
		}
	}
	s.eventually(60*time.Second, "the 4 x 2-GPU group bound whole", func() bool { return s.boundIn("train-") == 4 })
	s.binds.assertNeverPartial(t, "train", 4)
	s.eventually(30*time.Second, "the conditions: train Scheduled, big Unschedulable with lockstep's reason", func() bool {
		train, big := s.podGroupCondition("train"), s.podGroupCondition("big")
		return train != nil && train.Status == metav1.ConditionTrue && train.Reason == "Scheduled" &&
			big != nil && big.Status == metav1.ConditionFalse && strings.Contains(big.Message, "5 members need 10 nvidia.com/gpu")
	})
	require.Zero(t, s.boundIn("big-"), "no member of the group that does not fit may bind")
}

// TestCompositePodGroupIsRefusedByName: a PodGroup that is part of a CompositePodGroup (1.37,
// scheduling.k8s.io/v1alpha3, alpha) must be placed together with its siblings, which lockstep
// does not do; its pods are refused with the field and the reason, and none binds.
func TestCompositePodGroupIsRefusedByName(t *testing.T) {
	s := newScenario(t, 2, 4)
	nativeAPI(t)
	if !env.workload.Composite {
		t.Fatalf("Kubernetes %s serves no CompositePodGroup; this test needs 1.37 or later", env.cluster.Release)
	}
	dyn, err := dynamic.NewForConfig(env.cluster.RESTConfig)
	require.NoError(t, err)
	composites := dyn.Resource(schema.GroupVersionResource{Group: "scheduling.k8s.io", Version: "v1alpha3", Resource: "compositepodgroups"}).Namespace(s.ns)
	_, err = composites.Create(s.ctx, &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": "scheduling.k8s.io/v1alpha3", "kind": "CompositePodGroup",
		"metadata": map[string]any{"name": "training"},
		"spec": map[string]any{"workloadRef": map[string]any{"workloadName": "training", "templateName": "training"},
			"schedulingPolicy": map[string]any{"gang": map[string]any{"minGroupCount": int64(2)}}},
	}}, metav1.CreateOptions{})
	require.NoError(t, err)
	groups, api := s.podGroups()
	_, err = groups.Create(s.ctx, &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": api.Resource.GroupVersion().String(), "kind": "PodGroup",
		"metadata": map[string]any{"name": "workers"},
		"spec": map[string]any{"parentCompositePodGroupName": "training",
			"workloadRef":      map[string]any{"workloadName": "training", "templateName": "workers"},
			"schedulingPolicy": map[string]any{"gang": map[string]any{"minCount": int64(2)}}},
	}}, metav1.CreateOptions{})
	require.NoError(t, err)
	for i := range 2 {
		s.create(builders.Pod("", fmt.Sprintf("workers-%d", i)).CPU("100m").GPU(1).PodGroup("workers").Obj())
	}
	for i := range 2 {
		pod := fmt.Sprintf("workers-%d", i)
		s.eventually(60*time.Second, pod+" refused with a GangRejected event naming the field", func() bool {
			return s.hasEvent(pod, "GangRejected", `spec.parentCompositePodGroupName="training"`)
		})
	}
	require.Equal(t, "Rejected", s.gangs()["workers"].Members[0].State)
	require.Zero(t, s.boundIn("workers-"), "no pod of a composite's PodGroup may bind")
}

// TestIndexedJobGetsAPodGroup: kube-controller-manager's Job controller makes a Workload and a
// PodGroup (gang, minCount = parallelism) for an Indexed Job, and pods that name it. A Job whose
// pods cannot all fit binds none; one that fits binds whole.
func TestIndexedJobGetsAPodGroup(t *testing.T) {
	s := newScenario(t, 2, 4)

	s.createIndexedJob("big", 3, 4)
	bigGroup := s.jobPodGroup("big")
	require.Equal(t, int64(3), bigGroup.minCount, "the Job controller's gang: minCount is the Job's parallelism")
	t.Logf("the Job controller made %s PodGroup %s (gang minCount %d, template %s of Workload %s)", bigGroup.version,
		bigGroup.Name, bigGroup.minCount, bigGroup.template, bigGroup.workload)
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
// Job's pods made by kube-controller-manager; on 1.36 the PodGroup at v1alpha2 and the Job without
// spec.scheduling, as their comments say): on 4 nodes x 2 GPUs each gang binds whole.
func TestKubernetesExamples(t *testing.T) {
	// Each pod alone would fit: only the gang's minimum says they went together.
	for _, ex := range []struct{ file, pods string }{
		{"kubernetes/podgroup.yaml", "train-"},
		{"kubernetes/indexed-job.yaml", "indexed-train-"},
	} {
		t.Run(ex.file, func(t *testing.T) {
			s := newScenario(t, 4, 2)
			objs, err := harness.DecodeFile(filepath.Join(env.root, "examples", ex.file))
			require.NoError(t, err)
			_, api := s.podGroups()
			for _, o := range objs {
				o.SetNamespace(s.ns)
				if o.GetKind() == "PodGroup" {
					o.SetAPIVersion(api.Resource.GroupVersion().String())
				}
				if o.GetKind() == "Job" && !jobAsksForGang() {
					unstructured.RemoveNestedField(o.Object, "spec", "scheduling")
				}
				if o.GetKind() == "Job" {
					s.t.Cleanup(func() { s.deleteJob(o.GetName()) })
				}
			}
			require.NoError(t, harness.Create(s.ctx, env.cluster.RESTConfig, objs))
			s.eventually(90*time.Second, "all 4 pods bound", func() bool { return s.boundIn(ex.pods) == 4 })
			gangs := s.gangs()
			require.Len(t, gangs, 1, "one gang: %s", s.rawGangs())
			for name, g := range gangs {
				require.Equal(t, 4, g.MinAvailable, "gang %s (%s)", name, g.Source)
				s.binds.assertNeverPartial(t, name, 4)
			}
		})
	}
}

// nativeAPI is the version of Kubernetes' PodGroup this release serves (v1beta1 from 1.37,
// v1alpha2 in 1.36), as lockstep reads it. A release that serves none fails the test that needs
// it, by name: such a run selects only the cases that do not (make test-versions).
func nativeAPI(t *testing.T) dialect.API {
	t.Helper()
	if env.workload == nil {
		t.Fatalf("Kubernetes %s serves no PodGroup API lockstep reads; this test needs 1.36 or later", env.cluster.Release)
	}
	for _, api := range []dialect.API{dialect.Native, dialect.NativeV1alpha2} {
		if api.Resource.Version == env.workload.Version {
			return api
		}
	}
	t.Fatalf("lockstep reads no Kubernetes PodGroup at scheduling.k8s.io/%s", env.workload.Version)
	return dialect.API{}
}

// podGroups is the scenario's namespace's PodGroups, at the version served.
func (s *scenario) podGroups() (dynamic.ResourceInterface, dialect.API) {
	s.t.Helper()
	api := nativeAPI(s.t)
	dyn, err := dynamic.NewForConfig(env.cluster.RESTConfig)
	require.NoError(s.t, err)
	return dyn.Resource(api.Resource).Namespace(s.ns), api
}

func (s *scenario) createPodGroup(name string, minCount int32) {
	s.t.Helper()
	groups, api := s.podGroups()
	pg := &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": api.Resource.GroupVersion().String(), "kind": "PodGroup",
		"metadata": map[string]any{"name": name, "namespace": s.ns},
		"spec":     map[string]any{"schedulingPolicy": map[string]any{"gang": map[string]any{"minCount": int64(minCount)}}},
	}}
	_, err := groups.Create(s.ctx, pg, metav1.CreateOptions{})
	require.NoError(s.t, err)
}

// podGroupCondition is the condition kube-scheduler's gang scheduling writes on a PodGroup (its
// type depends on the version served), nil when it has none yet.
func (s *scenario) podGroupCondition(name string) *metav1.Condition {
	groups, api := s.podGroups()
	pg, err := groups.Get(s.ctx, name, metav1.GetOptions{})
	if err != nil {
		return nil
	}
	raw, _, _ := unstructured.NestedSlice(pg.Object, "status", "conditions")
	var conditions []metav1.Condition
	for _, c := range raw {
		m, _ := c.(map[string]any)
		conditions = append(conditions, metav1.Condition{Type: str(m["type"]), Status: metav1.ConditionStatus(str(m["status"])),
			Reason: str(m["reason"]), Message: str(m["message"])})
	}
	return apimeta.FindStatusCondition(conditions, api.Condition)
}

func str(v any) string { s, _ := v.(string); return s }

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
	if jobAsksForGang() {
		job.Spec.Scheduling = &batchv1.JobSchedulingConfiguration{SchedulingPolicy: &schedulingv1alpha3.WorkloadPodGroupSchedulingPolicy{
			Gang: &schedulingv1alpha3.WorkloadPodGroupGangSchedulingPolicy{}}}
	}
	_, err := env.client.BatchV1().Jobs(s.ns).Create(s.ctx, job, metav1.CreateOptions{})
	require.NoError(s.t, err)
	// Before the scenario's own cleanup (cleanups run last first): a Job left behind would make
	// its pods again as fast as they are deleted.
	s.t.Cleanup(func() { s.deleteJob(name) })
}

// jobAsksForGang: from 1.37 a Job asks the Job controller for a gang in spec.scheduling (its
// minCount defaults to the parallelism), and gets a basic PodGroup without; 1.36 has no such
// field and makes the gang for an Indexed Job whose completions equal its parallelism.
func jobAsksForGang() bool { return env.workload != nil && env.workload.Version != "v1alpha2" }

func (s *scenario) deleteJob(name string) {
	background := metav1.DeletePropagationBackground
	_ = env.client.BatchV1().Jobs(s.ns).Delete(s.ctx, name, metav1.DeleteOptions{PropagationPolicy: &background})
	s.deleteAllPods() // no kubelet finishes the bound ones the garbage collector deletes
}

// jobGroup is a PodGroup the Job controller made: its gang's minCount, and the Workload template
// it was made from (spec.workloadRef in v1beta1, spec.podGroupTemplateRef.workload in v1alpha2).
type jobGroup struct {
	Name, version      string
	minCount           int64
	workload, template string
}

// jobPodGroup waits for the PodGroup the Job controller makes for a Job, and returns it.
func (s *scenario) jobPodGroup(job string) jobGroup {
	s.t.Helper()
	groups, api := s.podGroups()
	var found jobGroup
	s.eventually(60*time.Second, "the Job controller to make a PodGroup for Job "+job, func() bool {
		list, err := groups.List(s.ctx, metav1.ListOptions{})
		if err != nil {
			return false
		}
		for _, pg := range list.Items {
			if ref := metav1.GetControllerOf(&pg); ref != nil && ref.Kind == "Job" && ref.Name == job {
				found = readJobGroup(pg, api)
				return true
			}
		}
		return false
	})
	return found
}

func readJobGroup(pg unstructured.Unstructured, api dialect.API) jobGroup {
	g := jobGroup{Name: pg.GetName(), version: api.Resource.Version}
	g.minCount, _, _ = unstructured.NestedInt64(pg.Object, "spec", "schedulingPolicy", "gang", "minCount")
	if api.Resource.Version == "v1alpha2" {
		g.workload, _, _ = unstructured.NestedString(pg.Object, "spec", "podGroupTemplateRef", "workload", "workloadName")
		g.template, _, _ = unstructured.NestedString(pg.Object, "spec", "podGroupTemplateRef", "workload", "podGroupTemplateName")
		return g
	}
	g.workload, _, _ = unstructured.NestedString(pg.Object, "spec", "workloadRef", "workloadName")
	g.template, _, _ = unstructured.NestedString(pg.Object, "spec", "workloadRef", "templateName")
	return g
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
