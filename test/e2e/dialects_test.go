package e2e

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"

	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/client-go/dynamic"

	"github.com/lockstep-sched/lockstep/dialect"
	"github.com/lockstep-sched/lockstep/test/lib/cluster"
	"github.com/lockstep-sched/lockstep/test/lib/harness"
	"github.com/lockstep-sched/lockstep/test/lib/thirdparty"
)

// The other projects' CRDs, taken from their published modules, are installed once, while
// lockstep runs: it finds them through discovery, without a restart.
var crds struct {
	once sync.Once
	err  error
}

func installCRDs(t *testing.T) {
	t.Helper()
	crds.once.Do(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
		defer cancel()
		paths, err := thirdparty.AllCRDs(ctx)
		if err == nil {
			var dir string
			var kai []string
			if dir, err = os.MkdirTemp("", "lockstep-kai-crds"); err == nil {
				defer os.RemoveAll(dir)
				kai, err = thirdparty.KAICRDs(dir)
				paths = append(paths, kai...)
			}
		}
		if err == nil {
			err = thirdparty.InstallCRDs(ctx, env.cluster.RESTConfig, paths...)
		}
		crds.err = err
	})
	require.NoError(t, crds.err, "installing the PodGroup CRDs from the projects' modules")
}

// createNative creates an examples/ file as its ecosystem would: its group objects as they are,
// its Jobs as the pods their controller makes. edit, when set, changes each pod first.
func (s *scenario) createNative(file string, edit func(*corev1.Pod)) []*corev1.Pod {
	s.t.Helper()
	pods, others, err := harness.SplitExample(filepath.Join(env.root, "examples", file), s.ns)
	require.NoError(s.t, err)
	require.NoError(s.t, harness.Create(s.ctx, env.cluster.RESTConfig, others))
	for _, p := range pods {
		if edit != nil {
			edit(p)
		}
		s.create(p)
	}
	return pods
}

// addNode adds a node with gpus GPUs to the scenario.
func (s *scenario) addNode(gpus int) {
	s.t.Helper()
	name := fmt.Sprintf("%s-extra-%d", strings.TrimPrefix(s.ns, "e2e-"), len(s.nodes))
	_, err := env.cluster.CreateNode(s.ctx, cluster.NodeSpec{Name: name, GPUs: gpus})
	require.NoError(s.t, err)
	s.nodes = append(s.nodes, name)
}

// group reads a group object of the scenario's namespace; an empty one while it does not exist
// (an operator may not have made it yet).
func (s *scenario) group(api dialect.API, name string) *unstructured.Unstructured {
	s.t.Helper()
	dyn, err := dynamic.NewForConfig(env.cluster.RESTConfig)
	require.NoError(s.t, err)
	obj, err := dyn.Resource(api.Resource).Namespace(s.ns).Get(s.ctx, name, metav1.GetOptions{})
	if apierrors.IsNotFound(err) {
		return &unstructured.Unstructured{Object: map[string]any{}}
	}
	require.NoError(s.t, err)
	return obj
}

// createVolcanoGroup creates a Volcano PodGroup with the given spec in the scenario's namespace.
func (s *scenario) createVolcanoGroup(name string, spec map[string]any) {
	s.t.Helper()
	obj := &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": dialect.Volcano.Resource.GroupVersion().String(), "kind": "PodGroup",
		"metadata": map[string]any{"name": name, "namespace": s.ns},
		"spec":     spec,
	}}
	require.NoError(s.t, harness.Create(s.ctx, env.cluster.RESTConfig, []*unstructured.Unstructured{obj}))
}

func statusField(obj *unstructured.Unstructured, field string) string {
	v, found, _ := unstructured.NestedFieldNoCopy(obj.Object, "status", field)
	if !found {
		return ""
	}
	return fmt.Sprint(v)
}

// unschedulableMessage is the message of a Volcano-style Unschedulable condition, "" without one.
func unschedulableMessage(obj *unstructured.Unstructured) string {
	list, _, _ := unstructured.NestedSlice(obj.Object, "status", "conditions")
	for _, c := range list {
		if m, ok := c.(map[string]any); ok && m["type"] == "Unschedulable" && m["status"] == "True" {
			return fmt.Sprint(m["message"])
		}
	}
	return ""
}

// Each dialect's seed job, in its native form, on a cluster one node too small for it: it binds
// nothing and says why; once a node is added it binds whole; its group object's status follows.
func TestDialectSeedJobs(t *testing.T) {
	installCRDs(t)
	cases := []struct {
		file, gang, source string
		api                *dialect.API // the group object whose status lockstep writes
		boundPhase         string
		ungate             bool // play Kueue: admit the group by removing its gates
	}{
		{file: "volcano/podgroup-and-pods.yaml", gang: "volcano-gang", source: "Volcano PodGroup", api: &dialect.Volcano, boundPhase: "Running"},
		{file: "kube-batch/job.yaml", gang: "kube-batch-gang", source: "kube-batch PodGroup", api: &dialect.KubeBatch, boundPhase: "Running"},
		{file: "koordinator/podgroup.yaml", gang: "koord-gang", source: "Koordinator PodGroup", api: &dialect.Koordinator, boundPhase: "Scheduled"},
		{file: "arena/mpi-gang.yaml", gang: "mpijob-arena-mpi", source: "lightweight coscheduling labels (Arena)"},
		{file: "kueue/pod-group.yaml", gang: "kueue-group", source: "Kueue pod group", ungate: true},
		{file: "kai/podgroup-and-pods.yaml", gang: "kai-gang", source: "KAI Scheduler PodGroup"},
		{file: "yunikorn/job.yaml", gang: "yunikorn-gang", source: "YuniKorn task groups"},
	}
	for _, tc := range cases {
		t.Run(tc.gang, func(t *testing.T) {
			s := newScenario(t, 3, 2)
			pods := s.createNative(tc.file, nil)
			if tc.ungate {
				s.ungate(pods)
			}
			s.eventually(60*time.Second, "lockstep to say why the gang waits", func() bool {
				return s.waitsFor(tc.gang, "need 8 nvidia.com/gpu, 6 free")
			})
			g := s.gangs()[tc.gang]
			require.Contains(t, g.Source, tc.source)
			require.Equal(t, 4, g.MinAvailable)
			require.Zero(t, s.boundIn(""), "no member of a gang that does not fit may bind")
			if tc.api != nil && tc.api.Status == dialect.StatusVolcano {
				s.eventually(30*time.Second, "the PodGroup's Unschedulable condition to carry lockstep's reason", func() bool {
					return strings.Contains(unschedulableMessage(s.group(*tc.api, tc.gang)), "need 8 nvidia.com/gpu, 6 free")
				})
			}

			s.addNode(2)
			s.eventually(90*time.Second, "every member bound once the cluster has room", func() bool { return s.boundIn("") == len(pods) })
			s.binds.assertNeverPartial(t, tc.gang, 4)
			if tc.api != nil {
				s.eventually(30*time.Second, "the PodGroup's phase to say "+tc.boundPhase, func() bool {
					return statusField(s.group(*tc.api, tc.gang), "phase") == tc.boundPhase
				})
			}
		})
	}
}

// ungate removes every pod's scheduling gates at once, as Kueue does when it admits a group.
func (s *scenario) ungate(pods []*corev1.Pod) {
	s.t.Helper()
	for _, p := range pods {
		patch := []byte(`{"spec":{"schedulingGates":null}}`)
		_, err := env.client.CoreV1().Pods(s.ns).Patch(s.ctx, p.Name, "application/strategic-merge-patch+json", patch, metav1.PatchOptions{})
		require.NoError(s.t, err)
	}
}

// A PodGroup created after its pods (Volcano's controller does this): the members wait, naming
// the missing object, and never schedule as ordinary pods; then they bind whole.
func TestPodGroupCreatedAfterItsPods(t *testing.T) {
	installCRDs(t)
	s := newScenario(t, 4, 2)
	pods, others, err := harness.SplitExample(filepath.Join(env.root, "examples", "volcano/podgroup-and-pods.yaml"), s.ns)
	require.NoError(t, err)
	for _, p := range pods {
		s.create(p)
	}
	want := fmt.Sprintf("waiting for Volcano or kube-batch PodGroup %s/volcano-gang to exist", s.ns)
	s.eventually(60*time.Second, "the members to wait for their PodGroup", func() bool {
		return strings.Contains(s.gangs()["volcano-gang"].Reason, want)
	})
	require.Zero(t, s.boundIn(""), "members must not schedule as ordinary pods while their PodGroup is missing")

	require.NoError(t, harness.Create(s.ctx, env.cluster.RESTConfig, others))
	s.eventually(60*time.Second, "the gang to bind whole once its PodGroup exists", func() bool { return s.boundIn("") == 4 })
	s.binds.assertNeverPartial(t, "volcano-gang", 4)
}

// Volcano's job controller and the training-operator create no pods while a Volcano PodGroup is
// Pending: lockstep moves a group whose minResources fit to Inqueue, and leaves one that cannot
// fit Pending with its reason.
func TestVolcanoGroupInqueueBeforeAnyPod(t *testing.T) {
	installCRDs(t)
	s := newScenario(t, 4, 2)
	s.createVolcanoGroup("fits", map[string]any{"minMember": int64(4), "minResources": map[string]any{"nvidia.com/gpu": "8"}})
	s.createVolcanoGroup("too-big", map[string]any{"minMember": int64(4), "minResources": map[string]any{"nvidia.com/gpu": "10"}})
	s.eventually(30*time.Second, "the fitting group to be Inqueue", func() bool {
		return statusField(s.group(dialect.Volcano, "fits"), "phase") == "Inqueue"
	})
	s.eventually(30*time.Second, "the oversized group to stay Pending, saying why", func() bool {
		obj := s.group(dialect.Volcano, "too-big")
		return statusField(obj, "phase") == "Pending" &&
			strings.Contains(unschedulableMessage(obj), "needs 10 nvidia.com/gpu in all; the cluster has 8 free")
	})
}

// Koordinator's gang group: two gangs that bind only together. The first gang's quorum alone
// reserves and waits at bind; nothing binds until the second gang's quorum is there too.
func TestKoordinatorGangGroupBindsOnlyTogether(t *testing.T) {
	s := newScenario(t, 4, 2)
	inNamespace := func(p *corev1.Pod) {
		for k, v := range p.Annotations {
			p.Annotations[k] = strings.ReplaceAll(v, "default/", s.ns+"/")
		}
	}
	pods, _, err := harness.SplitExample(filepath.Join(env.root, "examples", "koordinator/bundle.yaml"), s.ns)
	require.NoError(t, err)
	for _, p := range pods {
		if strings.HasPrefix(p.Name, "bundle-a") {
			inNamespace(p)
			s.create(p)
		}
	}
	s.eventually(60*time.Second, "gang bundle-a to hold its binds for bundle-b", func() bool {
		return strings.Contains(s.gangs()["bundle-a"].Reason, "binds held until every gang of its group")
	})
	require.Zero(t, s.boundIn(""), "one gang of a group must not bind alone")

	for _, p := range pods {
		if strings.HasPrefix(p.Name, "bundle-b") {
			inNamespace(p)
			s.create(p)
		}
	}
	s.eventually(90*time.Second, "both gangs bound", func() bool { return s.boundIn("") == 4 })
	s.binds.assertNeverPartial(t, "bundle-a", 2)
	s.binds.assertNeverPartial(t, "bundle-b", 2)
}

// Kueue admits a group by lifting every member's gate at once; on nodes too fragmented for it the
// group binds nothing (each member alone would fit), and binds whole once the fragments are gone.
func TestKueueGroupUngatedOnFragmentedNodes(t *testing.T) {
	s := newScenario(t, 4, 2)
	// One GPU taken on two of the nodes: 6 GPUs free, two nodes that hold a 2-GPU member.
	fragments := s.nodes[:2]
	for i, node := range fragments {
		s.create(podSpec{name: fmt.Sprintf("fragment-%d", i), gpus: 1, nodeName: node}.pod())
	}
	pods := s.createNative("kueue/pod-group.yaml", nil)
	s.ungate(pods)
	s.eventually(60*time.Second, "lockstep to say why the group waits", func() bool {
		return s.waitsFor("kueue-group", "need 8 nvidia.com/gpu, 6 free")
	})
	require.Zero(t, s.boundIn("kueue-group"), "each member fits somewhere, the group does not: none may bind")

	for i := range fragments {
		s.deletePod(fmt.Sprintf("fragment-%d", i))
	}
	s.eventually(90*time.Second, "the group bound whole", func() bool { return s.boundIn("kueue-group") == 4 })
	s.binds.assertNeverPartial(t, "kueue-group", 4)
}

// Bad input in any dialect gets a reason naming the object and the field, an Event on the pod,
// and binds nothing: a PodGroup with a negative minMember, a Kueue total count that is not a
// number, a pod carrying two schedulers' markers. (A minMember of 0 asks for no quorum, as in
// Volcano: TestVolcanoMinMemberZeroMeansNoQuorum.)
func TestBadDialectInputIsRefusedByName(t *testing.T) {
	installCRDs(t)
	s := newScenario(t, 2, 2)
	s.createVolcanoGroup("negative", map[string]any{"minMember": int64(-1)})
	s.create(podSpec{name: "negative-0", gpus: 1, annotations: map[string]string{"scheduling.k8s.io/group-name": "negative"}}.pod())
	kueue := podSpec{name: "kueue-0", gpus: 1, annotations: map[string]string{"kueue.x-k8s.io/pod-group-total-count": "all"}}.pod()
	kueue.Labels = map[string]string{"kueue.x-k8s.io/pod-group-name": "kq"}
	s.create(kueue)
	both := podSpec{name: "both-0", gpus: 1, gang: "both", minAvailable: 1}.pod()
	both.Labels = map[string]string{"scheduling.x-k8s.io/pod-group": "both"}
	s.create(both)

	cases := map[string]string{
		"negative-0": fmt.Sprintf(`Volcano PodGroup %s/negative: spec.minMember="-1": must not be negative`, s.ns),
		"kueue-0":    fmt.Sprintf(`pod %s/kueue-0: annotation kueue.x-k8s.io/pod-group-total-count="all": must be a positive integer`, s.ns),
		"both-0":     `label scheduling.x-k8s.io/pod-group="both"`,
	}
	for pod, want := range cases {
		s.eventually(60*time.Second, pod+" refused with a GangRejected event naming the field", func() bool {
			return s.hasEvent(pod, "GangRejected", want)
		})
	}
	require.Zero(t, s.boundIn(""))
	require.Equal(t, "Rejected", s.gangs()["negative"].Members[0].State)
}

// Volcano's job controller writes minMember 0 for a vcjob that sets no minAvailable when no
// admission webhook filled one in, and Volcano's gang plugin then finds the job ready with any
// number of members placed: each member is placed on its own, here beside a member that cannot
// fit anywhere.
func TestVolcanoMinMemberZeroMeansNoQuorum(t *testing.T) {
	installCRDs(t)
	s := newScenario(t, 2, 2)
	s.createVolcanoGroup("zero", map[string]any{"minMember": int64(0)})
	for _, p := range []podSpec{{name: "zero-0", gpus: 2}, {name: "zero-1", gpus: 3}} {
		p.annotations = map[string]string{"scheduling.k8s.io/group-name": "zero"}
		s.create(p.pod())
	}
	s.eventually(60*time.Second, "the member that fits bound on its own", func() bool { return s.boundIn("zero-0") == 1 })
	require.Zero(t, s.boundIn("zero-1"), "3 GPUs fit no node")
	require.Equal(t, 1, s.gangs()["zero"].MinAvailable)
}

// Volcano's minTaskMember: three workers make min-available 4 no more than they make the ps
// task's quorum of 1; nothing binds until the parameter server exists, then all bind together.
func TestVolcanoTaskQuorums(t *testing.T) {
	installCRDs(t)
	s := newScenario(t, 4, 2)
	s.createVolcanoGroup("tasks", map[string]any{"minMember": int64(4), "minTaskMember": map[string]any{"ps": int64(1), "worker": int64(3)}})
	member := func(name, task string, gpus int) *corev1.Pod {
		p := podSpec{name: name, gpus: gpus, annotations: map[string]string{"scheduling.k8s.io/group-name": "tasks", "volcano.sh/task-spec": task}}.pod()
		p.Spec.SchedulerName = "volcano"
		return p
	}
	for i := range 4 {
		s.create(member(fmt.Sprintf("worker-%d", i), "worker", 2))
	}
	s.eventually(60*time.Second, "the gang to wait for its ps task", func() bool {
		return strings.Contains(s.gangs()["tasks"].Reason, "(task ps: 0 of 1)")
	})
	require.Zero(t, s.boundIn(""), "four workers make min-available but not the ps task's quorum")

	s.create(member("ps-0", "ps", 0))
	s.eventually(60*time.Second, "the ps and three workers bound together", func() bool { return s.boundIn("") >= 4 })
	s.binds.assertNeverPartial(t, "tasks", 4)
	require.Equal(t, "ps=1,worker=3", s.gangs()["tasks"].TaskQuorums)
}
