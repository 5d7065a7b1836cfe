package e2e

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/dynamic"
	"sigs.k8s.io/yaml"

	"github.com/lockstep-sched/lockstep/dialect"
	"github.com/lockstep-sched/lockstep/test/lib/harness"
	"github.com/lockstep-sched/lockstep/test/lib/thirdparty"
	"github.com/lockstep-sched/lockstep/views"
)

// The Kubeflow MPI operator v0.8.0, built from its module, writes the PodGroup, the worker pods
// and the launcher Job (a pod by kube-controller-manager's job controller): lockstep reads them
// as they come, with no edit. 4 nodes x 2 GPUs: an MPIJob of 5 workers x 2 GPUs binds nothing,
// holds nothing and says why; one of 4 binds whole, launcher included.

func TestMPIOperatorWithSchedulerPlugins(t *testing.T) {
	testMPIOperator(t, mpiSchedulerPlugins)
}

func TestMPIOperatorWithVolcano(t *testing.T) {
	testMPIOperator(t, mpiVolcano)
}

// mpiMode is one of the operator's gang-scheduling modes, as the tests see it.
type mpiMode struct {
	// gangScheduling is the operator's --gang-scheduling: a name the suite's kube-scheduler
	// must answer to, since the operator puts it in every pod's schedulerName.
	gangScheduling string
	example        string      // under examples/mpi-operator
	group          dialect.API // the PodGroup kind the operator creates
	// member is the name of the group a pod says it belongs to, "" for none.
	member func(p *corev1.Pod) string
	// checkGroup asserts the mode's own fields of the PodGroup the operator made.
	checkGroup func(t *testing.T, pg *unstructured.Unstructured)
}

// --gang-scheduling=scheduler-plugins-scheduler: any name but "volcano" gets scheduler-plugins
// PodGroups; this one is the name scheduler-plugins' Helm chart installs, and a profile of the
// shipped scheduler configuration. (The operator's own "scheduler-plugins" would do as well.)
var mpiSchedulerPlugins = mpiMode{
	gangScheduling: "scheduler-plugins-scheduler",
	example:        "mpi-operator/mpijob-scheduler-plugins.yaml",
	group:          dialect.Coscheduling,
	member:         func(p *corev1.Pod) string { return p.Labels["scheduling.x-k8s.io/pod-group"] },
	checkGroup: func(t *testing.T, pg *unstructured.Unstructured) {
		// 0 is what the operator writes for a job that sets no timeout; scheduler-plugins
		// reads it as its default waiting time, and lockstep must too, or no member would
		// ever wait for the others.
		secs, found, err := unstructured.NestedInt64(pg.Object, "spec", "scheduleTimeoutSeconds")
		require.NoError(t, err)
		require.True(t, found, "the operator writes spec.scheduleTimeoutSeconds")
		require.Zero(t, secs, "spec.scheduleTimeoutSeconds")
	},
}

var mpiVolcano = mpiMode{
	gangScheduling: harness.MPIOperatorVolcano,
	example:        "mpi-operator/mpijob-volcano.yaml",
	group:          dialect.Volcano,
	member:         func(p *corev1.Pod) string { return p.Annotations["scheduling.k8s.io/group-name"] },
	checkGroup: func(t *testing.T, pg *unstructured.Unstructured) {
		queue, _, _ := unstructured.NestedString(pg.Object, "spec", "queue")
		require.Empty(t, queue, "the job names no queue; lockstep takes Volcano's default")
	},
}

// mpiJobs is the MPI operator's MPIJob; the training-operator's is kubeflow.org/v1.
var mpiJobs = schema.GroupVersionResource{Group: "kubeflow.org", Version: "v2beta1", Resource: "mpijobs"}

// The labels the operator gives the pods of a job.
const (
	mpiJobLabel  = "training.kubeflow.org/job-name"
	mpiRoleLabel = "training.kubeflow.org/job-role"
)

func testMPIOperator(t *testing.T, mode mpiMode) {
	requireSchedulerProfile(t, mode.gangScheduling)
	s := newScenario(t, 4, 2)
	startMPIOperator(s.ctx, t, mode.gangScheduling)

	removeBig := s.submitMPIJob(mode, "big", 5)
	s.assertMPIJobWaits(mode, "big", 5)
	removeBig()

	remove := s.submitMPIJob(mode, "fit", 4)
	defer remove()
	s.assertMPIJobBindsWhole(mode, "fit", 4)
}

// assertMPIJobWaits checks that a job too big for the cluster binds no pod, not even the
// launcher, holds no capacity even past the starvation threshold, and that lockstep says why
// where a user looks: the gang, the PodGroup, the pods' PodScheduled condition or events.
func (s *scenario) assertMPIJobWaits(mode mpiMode, job string, workers int) {
	t := s.t
	pods := s.awaitMPIPods(mode, job, workers)
	s.recordMPIJob(mode, job, workers, pods)
	want := fmt.Sprintf("gang %s/%s: %d members need %d nvidia.com/gpu, 8 free", s.ns, job, workers+1, 2*workers)
	s.eventually(90*time.Second, "lockstep to say why "+job+" waits", func() bool { return s.waitsFor(job, want) })
	g := s.gangs()[job]
	require.Equal(t, workers+1, g.MinAvailable, "the operator's minMember counts the launcher")
	require.Contains(t, g.Source, mode.group.Dialect+" PodGroup "+s.ns+"/"+job)
	t.Logf("lockstep on gang %s: phase %s, %d attempts, reason %q", job, g.Phase, g.Attempts, g.Reason)
	s.eventually(60*time.Second, "lockstep's reason on a pod's PodScheduled condition or in a FailedScheduling event", func() bool {
		return slices.ContainsFunc(pods, func(p corev1.Pod) bool {
			msg := s.schedulingMessage(p.Name)
			if strings.Contains(msg, want) {
				t.Logf("pod %s PodScheduled=False: %s", p.Name, msg)
				return true
			}
			return s.hasEvent(p.Name, "FailedScheduling", want)
		})
	})
	if mode.group.Status == dialect.StatusVolcano {
		s.assertVolcanoGroupPending(job, want)
	}
	t.Logf("PodGroup %s status as lockstep wrote it:\n%s", job, toYAML(s.group(mode.group, job).Object["status"]))
	s.assertHoldsNothing(job, starvationThreshold+2*time.Second)
}

// assertVolcanoGroupPending waits for lockstep to keep the Volcano PodGroup Pending (never
// Inqueue: the quorum cannot fit) with its reason in the Unschedulable condition, where Volcano
// users look.
func (s *scenario) assertVolcanoGroupPending(job, why string) {
	var status any
	err := wait.PollUntilContextTimeout(s.ctx, 250*time.Millisecond, 30*time.Second, true, func(context.Context) (bool, error) {
		obj := s.group(dialect.Volcano, job)
		status = obj.Object["status"]
		return statusField(obj, "phase") == "Pending" && strings.Contains(unschedulableMessage(obj), why), nil
	})
	if err != nil {
		s.t.Fatalf("Volcano PodGroup %s: want phase Pending and an Unschedulable condition saying %q; its status:\n%s", job, why, toYAML(status))
	}
}

// assertHoldsNothing watches for the given time that no pod of the job binds and that lockstep
// reserves or holds nothing for its gang: no node could ever hold the quorum, so not even the
// starvation rule may keep capacity for it.
func (s *scenario) assertHoldsNothing(job string, watch time.Duration) {
	err := wait.PollUntilContextTimeout(s.ctx, 250*time.Millisecond, watch, true, func(context.Context) (bool, error) {
		if held := s.mpiGangHolds(job); held != "" {
			return false, fmt.Errorf("lockstep keeps capacity for %s: %s", job, held)
		}
		if bound := s.boundMPIPods(job); len(bound) > 0 {
			return false, fmt.Errorf("pod %s of %s bound to %s", bound[0].Name, job, bound[0].Spec.NodeName)
		}
		return false, nil
	})
	if !wait.Interrupted(err) {
		s.t.Fatalf("MPIJob %s must bind nothing and hold nothing: %v", job, err)
	}
}

// mpiGangHolds says what capacity lockstep keeps for the gang, "" for none.
func (s *scenario) mpiGangHolds(job string) string {
	gangs, err := env.lockstep.Gangs(s.ctx, s.ns)
	if err != nil {
		return "unknown: " + err.Error()
	}
	i := slices.IndexFunc(gangs, func(g views.GangStatus) bool { return g.Name == job })
	if i < 0 {
		return "unknown: lockstep lost gang " + job
	}
	g := gangs[i]
	if g.Phase != views.PhaseWaiting || g.ReservationExpires != nil {
		return fmt.Sprintf("phase %s, reservation until %v", g.Phase, g.ReservationExpires)
	}
	for _, m := range g.Members {
		if m.Node != "" || m.ReservationExpires != nil {
			return fmt.Sprintf("member %s on %q (%s)", m.Pod, m.Node, m.State)
		}
	}
	return ""
}

// assertMPIJobBindsWhole checks that a job that fits binds every worker and the launcher in one
// commit, one worker per node, and that lockstep reports the group running.
func (s *scenario) assertMPIJobBindsWhole(mode mpiMode, job string, workers int) {
	t := s.t
	pods := s.awaitMPIPods(mode, job, workers)
	s.recordMPIJob(mode, job, workers, pods)
	s.eventually(120*time.Second, fmt.Sprintf("all %d pods of %s bound", workers+1, job), func() bool {
		return len(s.boundMPIPods(job)) == workers+1
	})
	// The bind watch trails the list a little; all members must show up under the gang's name
	// there, or assertNeverPartial would pass for want of any bind to compare.
	s.eventually(10*time.Second, "the bind watch to see every member of "+job+" bound under its gang", func() bool {
		return len(s.binds.bindTimes(job)) == workers+1
	})
	s.binds.assertNeverPartial(t, job, workers+1)
	nodes := map[string]string{}
	for _, p := range s.boundMPIPods(job) {
		t.Logf("%s bound to %s", p.Name, p.Spec.NodeName)
		if p.Labels[mpiRoleLabel] == "worker" {
			require.NotContains(t, nodes, p.Spec.NodeName, "two 2-GPU workers on one 2-GPU node: %s and %s", nodes[p.Spec.NodeName], p.Name)
			nodes[p.Spec.NodeName] = p.Name
		}
	}
	require.Len(t, nodes, workers)
	g := s.gangs()[job]
	require.Equal(t, views.PhaseBound, g.Phase)
	require.Equal(t, workers+1, g.MinAvailable)
	s.eventually(30*time.Second, job+"'s PodGroup to say Running", func() bool {
		return statusField(s.group(mode.group, job), "phase") == "Running"
	})
	if c := g.LastCommit; c != nil {
		t.Logf("lockstep's commit of %s: %d members, %d bound, took %s, partly bound for %s", job, c.Members, c.Bound, c.Duration, c.PartlyBoundFor)
	}
	t.Logf("PodGroup %s status as lockstep wrote it:\n%s", job, toYAML(s.group(mode.group, job).Object["status"]))
}

// awaitMPIPods waits for the operator's workers and the launcher Job's pod, and checks that each
// names the job's group and the mode's scheduler.
func (s *scenario) awaitMPIPods(mode mpiMode, job string, workers int) []corev1.Pod {
	t := s.t
	var pods []corev1.Pod
	s.eventually(90*time.Second, fmt.Sprintf("%d workers and a launcher pod of %s", workers, job), func() bool {
		pods = listPods(s.ctx, s.ns, mpiJobLabel+"="+job)
		return len(pods) == workers+1
	})
	roles := map[string]int{}
	for _, p := range pods {
		roles[p.Labels[mpiRoleLabel]]++
		require.Equal(t, job, mode.member(&p), "pod %s names its job's group", p.Name)
		require.Equal(t, mode.gangScheduling, p.Spec.SchedulerName, "pod %s", p.Name)
	}
	require.Equal(t, map[string]int{"worker": workers, "launcher": 1}, roles)
	return pods
}

// recordMPIJob logs what the operator made of a job (so the run log shows it) and checks the
// PodGroup fields lockstep relies on and the launcher's owner.
func (s *scenario) recordMPIJob(mode mpiMode, job string, workers int, pods []corev1.Pod) {
	t := s.t
	pg := s.group(mode.group, job)
	require.NotEmpty(t, pg.Object, "the operator's %s PodGroup %s", mode.group.Dialect, job)
	t.Logf("PodGroup %s %s/%s spec:\n%s", pg.GetAPIVersion(), s.ns, job, toYAML(pg.Object["spec"]))
	minMember, _, _ := unstructured.NestedInt64(pg.Object, "spec", "minMember")
	require.EqualValues(t, workers+1, minMember, "minMember: the workers and the launcher")
	gpus, _, _ := unstructured.NestedString(pg.Object, "spec", "minResources", "nvidia.com/gpu")
	require.Equal(t, fmt.Sprint(2*workers), gpus, "minResources: the workers' GPUs")
	mode.checkGroup(t, pg)

	for _, p := range pods {
		t.Logf("pod %s: schedulerName=%s labels=%v annotations=%v owner=%s", p.Name, p.Spec.SchedulerName,
			p.Labels, p.Annotations, ownerOf(p.OwnerReferences))
	}
	launcher, err := env.client.BatchV1().Jobs(s.ns).Get(s.ctx, job+"-launcher", metav1.GetOptions{})
	require.NoError(t, err, "the launcher Job")
	require.Equal(t, "MPIJob/"+job, ownerOf(launcher.OwnerReferences))
	tmpl := launcher.Spec.Template
	t.Logf("launcher Job %s: owner=%s template schedulerName=%s labels=%v annotations=%v", launcher.Name,
		ownerOf(launcher.OwnerReferences), tmpl.Spec.SchedulerName, tmpl.Labels, tmpl.Annotations)
	// Without a kubelet no worker gets Ready, so a launcher made only then would never come.
	policy, _, _ := unstructured.NestedString(s.mpiJob(job).Object, "spec", "launcherCreationPolicy")
	require.Equal(t, "AtStartup", policy, "MPIJob %s is stored as written", job)
}

// ownerOf is "Kind/name" of an object's controller, "" without one.
func ownerOf(refs []metav1.OwnerReference) string {
	for _, r := range refs {
		if r.Controller != nil && *r.Controller {
			return r.Kind + "/" + r.Name
		}
	}
	return ""
}

func toYAML(v any) string {
	out, err := yaml.Marshal(v)
	if err != nil {
		return fmt.Sprintf("(%v)", err)
	}
	return string(out)
}

// boundMPIPods are the job's pods that have a node.
func (s *scenario) boundMPIPods(job string) []corev1.Pod {
	var out []corev1.Pod
	for _, p := range listPods(s.ctx, s.ns, mpiJobLabel+"="+job) {
		if p.Spec.NodeName != "" {
			out = append(out, p)
		}
	}
	return out
}

func (s *scenario) mpiJob(name string) *unstructured.Unstructured {
	s.t.Helper()
	obj, err := s.dyn().Resource(mpiJobs).Namespace(s.ns).Get(s.ctx, name, metav1.GetOptions{})
	require.NoError(s.t, err, "MPIJob %s", name)
	return obj
}

func (s *scenario) dyn() dynamic.Interface {
	s.t.Helper()
	dyn, err := dynamic.NewForConfig(env.cluster.RESTConfig)
	require.NoError(s.t, err)
	return dyn
}

// submitMPIJob creates the mode's example MPIJob under name with workers workers, and returns
// what removes it. Removal does not wait for the garbage collector: with no kubelet, the pods it
// deletes gracefully would stay Terminating, and the launcher Job, while it exists, makes a new
// launcher pod for each one deleted.
func (s *scenario) submitMPIJob(mode mpiMode, name string, workers int) (remove func()) {
	s.t.Helper()
	objs, err := thirdparty.ReadObjects(filepath.Join(env.root, "examples", mode.example))
	require.NoError(s.t, err)
	require.Len(s.t, objs, 1)
	job := objs[0]
	require.Equal(s.t, mpiJobs.GroupVersion().String(), job.GetAPIVersion(), mode.example)
	job.SetName(name)
	job.SetNamespace(s.ns)
	require.NoError(s.t, unstructured.SetNestedField(job.Object, int64(workers), "spec", "mpiReplicaSpecs", "Worker", "replicas"))
	_, err = s.dyn().Resource(mpiJobs).Namespace(s.ns).Create(s.ctx, job, metav1.CreateOptions{FieldValidation: "Strict"})
	require.NoError(s.t, err, "creating MPIJob %s", name)
	removed := false
	remove = func() {
		if !removed {
			removed = true
			s.removeMPIJob(mode, name)
		}
	}
	s.t.Cleanup(func() {
		if s.t.Failed() && !removed {
			s.t.Logf("pods of MPIJob %s before removing it:\n%s\n/debug/gangs:\n%s", name, s.describePods(), s.rawGangs())
		}
		remove()
	})
	return remove
}

// removeMPIJob deletes the MPIJob, its launcher Job, its pods (force: no kubelet confirms) and
// then its PodGroup, and waits until they are gone.
func (s *scenario) removeMPIJob(mode mpiMode, name string) {
	bg := context.Background()
	dyn := s.dyn()
	notFoundOK := func(err error) {
		if err != nil && !apierrors.IsNotFound(err) {
			s.t.Errorf("removing MPIJob %s: %v", name, err)
		}
	}
	background := metav1.DeletePropagationBackground
	notFoundOK(dyn.Resource(mpiJobs).Namespace(s.ns).Delete(bg, name, metav1.DeleteOptions{}))
	notFoundOK(env.client.BatchV1().Jobs(s.ns).Delete(bg, name+"-launcher", metav1.DeleteOptions{PropagationPolicy: &background}))
	selector := metav1.ListOptions{LabelSelector: mpiJobLabel + "=" + name}
	err := wait.PollUntilContextTimeout(bg, 250*time.Millisecond, 60*time.Second, true, func(ctx context.Context) (bool, error) {
		_ = env.client.CoreV1().Pods(s.ns).DeleteCollection(ctx, metav1.DeleteOptions{GracePeriodSeconds: new(int64)}, selector)
		_, jobErr := env.client.BatchV1().Jobs(s.ns).Get(ctx, name+"-launcher", metav1.GetOptions{})
		return apierrors.IsNotFound(jobErr) && len(listPods(ctx, s.ns, selector.LabelSelector)) == 0, nil
	})
	if err != nil {
		s.t.Errorf("MPIJob %s: its launcher Job or pods still there after 60s:\n%s", name, s.describePods())
	}
	notFoundOK(dyn.Resource(mode.group.Resource).Namespace(s.ns).Delete(bg, name, metav1.DeleteOptions{}))
}

// startMPIOperator runs the MPI operator for the rest of the test.
func startMPIOperator(ctx context.Context, t *testing.T, gangScheduling string) {
	t.Helper()
	op, err := harness.StartMPIOperator(ctx, env.cluster, gangScheduling, t.Logf)
	require.NoError(t, err)
	t.Cleanup(func() {
		if t.Failed() {
			t.Logf("mpi-operator log tail:\n%s", op.Tail(40))
		}
		op.Stop()
	})
}

// requireSchedulerProfile fails at once, rather than after a long wait for binds, when the
// shipped scheduler configuration the suite's kube-scheduler runs has no profile for the
// schedulerName the operator will write on its pods.
func requireSchedulerProfile(t *testing.T, name string) {
	t.Helper()
	raw, err := os.ReadFile(filepath.Join(env.root, harness.SchedulerConfig))
	require.NoError(t, err)
	var cfg struct {
		Profiles []struct {
			SchedulerName string `json:"schedulerName"`
		} `json:"profiles"`
	}
	require.NoError(t, yaml.Unmarshal(raw, &cfg), harness.SchedulerConfig)
	var names []string
	for _, p := range cfg.Profiles {
		names = append(names, p.SchedulerName)
	}
	require.Contains(t, names, name, "%s has no profile for the operator's schedulerName", harness.SchedulerConfig)
}
