package e2e

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/tools/clientcmd"
	"sigs.k8s.io/yaml"

	"github.com/lockstep-sched/lockstep/test/lib/harness"
	"github.com/lockstep-sched/lockstep/test/lib/nodeproxy"
	"github.com/lockstep-sched/lockstep/views"
)

// The lockstep pod the plugin finds: labelled and shaped as deploy/manifests makes it, bound to a
// node whose kubelet is a nodeproxy that forwards the pod's debug port to the suite's lockstep.
const (
	lockstepNS      = "lockstep-system"
	lockstepPodName = "lockstep-scheduler-e2e"
	lockstepHost    = "e2e-lockstep-host"
)

// plugin runs the built kubectl-lockstep as a person would, with a kubeconfig whose context
// namespace is the scenario's.
type plugin struct {
	t          *testing.T
	bin        string
	kubeconfig string
}

type result struct {
	stdout, stderr string
	code           int
}

func (p plugin) run(args ...string) result {
	p.t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
	defer cancel()
	cmd := exec.CommandContext(ctx, p.bin, append([]string{"--kubeconfig", p.kubeconfig}, args...)...)
	var out, errOut bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &errOut
	err := cmd.Run()
	r := result{stdout: out.String(), stderr: errOut.String()}
	var exit *exec.ExitError
	if errors.As(err, &exit) {
		r.code = exit.ExitCode()
	} else {
		require.NoError(p.t, err, "running kubectl-lockstep %s", strings.Join(args, " "))
	}
	return r
}

// ok runs the plugin and requires it to succeed.
func (p plugin) ok(args ...string) result {
	p.t.Helper()
	r := p.run(args...)
	require.Zero(p.t, r.code, "kubectl-lockstep %s failed:\n%s", strings.Join(args, " "), r.stderr)
	return r
}

// fails runs the plugin and requires it to fail with exit code 1.
func (p plugin) fails(args ...string) result {
	p.t.Helper()
	r := p.run(args...)
	require.Equal(p.t, 1, r.code, "kubectl-lockstep %s should fail; stdout:\n%s\nstderr:\n%s", strings.Join(args, " "), r.stdout, r.stderr)
	return r
}

// until runs the plugin until done holds of its result, or fails the test after a deadline.
func (p plugin) until(t *testing.T, done func(result) bool, args ...string) result {
	t.Helper()
	var last result
	err := wait.PollUntilContextTimeout(context.Background(), 250*time.Millisecond, 30*time.Second, true, func(context.Context) (bool, error) {
		last = p.run(args...)
		return done(last), nil
	})
	require.NoError(t, err, "kubectl-lockstep %s never got there; last stdout:\n%s\nstderr:\n%s", strings.Join(args, " "), last.stdout, last.stderr)
	return last
}

func buildPlugin(t *testing.T) string {
	t.Helper()
	bin := filepath.Join(t.TempDir(), "kubectl-lockstep")
	cmd := exec.Command("go", "build", "-o", bin, "./cmd/kubectl-lockstep")
	cmd.Dir = env.root
	out, err := cmd.CombinedOutput()
	require.NoError(t, err, "building ./cmd/kubectl-lockstep:\n%s", out)
	return bin
}

// kubeconfigFor writes the admin's kubeconfig with namespace as the context's namespace.
func kubeconfigFor(t *testing.T, namespace string) string {
	t.Helper()
	cfg, err := clientcmd.LoadFromFile(env.cluster.AdminKubeconfig)
	require.NoError(t, err)
	cfg.Contexts[cfg.CurrentContext].Namespace = namespace
	path := filepath.Join(t.TempDir(), "kubeconfig.yaml")
	require.NoError(t, clientcmd.WriteToFile(*cfg, path))
	return path
}

// runLockstepPod registers a node whose kubelet is a nodeproxy and a running, ready lockstep pod
// on it, its debug port (8889, from its --debug-listen) forwarded to the suite's lockstep.
func runLockstepPod(t *testing.T, ctx context.Context) {
	t.Helper()
	kubelet, err := nodeproxy.Start()
	require.NoError(t, err)
	t.Cleanup(kubelet.Close)
	kubelet.Forward(lockstepNS, lockstepPodName, 8889, strings.TrimPrefix(env.lockstep.DebugURL, "http://"))
	_, err = kubelet.Register(ctx, env.client, lockstepHost)
	require.NoError(t, err)
	zero := int64(0)
	t.Cleanup(func() {
		bg := context.Background()
		_ = env.client.CoreV1().Pods(lockstepNS).Delete(bg, lockstepPodName, metav1.DeleteOptions{GracePeriodSeconds: &zero})
		_ = env.client.CoreV1().Nodes().Delete(bg, lockstepHost, metav1.DeleteOptions{})
	})
	pod := &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Namespace: lockstepNS, Name: lockstepPodName, Labels: map[string]string{
			"app.kubernetes.io/name": "lockstep-scheduler", "app.kubernetes.io/part-of": "lockstep"}},
		Spec: corev1.PodSpec{NodeName: lockstepHost, Containers: []corev1.Container{
			{Name: "kube-scheduler", Image: "registry.k8s.io/kube-scheduler:v1.37.2", SecurityContext: restricted()},
			{Name: "lockstep", Image: "ghcr.io/lockstep-sched/lockstep:latest", SecurityContext: restricted(),
				Args: []string{"--listen=0.0.0.0:8443", "--debug-listen=127.0.0.1:8889"}},
		}},
	}
	created, err := env.client.CoreV1().Pods(lockstepNS).Create(ctx, pod, metav1.CreateOptions{})
	require.NoError(t, err)
	now := metav1.Now()
	created.Status = corev1.PodStatus{Phase: corev1.PodRunning, Conditions: []corev1.PodCondition{
		{Type: corev1.PodScheduled, Status: corev1.ConditionTrue, LastTransitionTime: now},
		{Type: corev1.PodReady, Status: corev1.ConditionTrue, LastTransitionTime: now}}}
	_, err = env.client.CoreV1().Pods(lockstepNS).UpdateStatus(ctx, created, metav1.UpdateOptions{})
	require.NoError(t, err)
}

// restricted is what the namespace's "restricted" Pod Security level asks of each container, as
// deploy/manifests sets it.
func restricted() *corev1.SecurityContext {
	return &corev1.SecurityContext{AllowPrivilegeEscalation: new(false), RunAsNonRoot: new(true),
		Capabilities:   &corev1.Capabilities{Drop: []corev1.Capability{"ALL"}},
		SeccompProfile: &corev1.SeccompProfile{Type: corev1.SeccompProfileTypeRuntimeDefault}}
}

// otherNamespace makes a namespace with a one-member gang that binds, for the namespace filters.
func otherNamespace(t *testing.T, s *scenario) string {
	t.Helper()
	ns := s.ns + "-other"
	_, err := env.client.CoreV1().Namespaces().Create(s.ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}, metav1.CreateOptions{})
	require.NoError(t, err)
	t.Cleanup(func() {
		bg := context.Background()
		zero := int64(0)
		_ = env.client.CoreV1().Pods(ns).DeleteCollection(bg, metav1.DeleteOptions{GracePeriodSeconds: &zero}, metav1.ListOptions{})
		_ = wait.PollUntilContextTimeout(bg, 200*time.Millisecond, 30*time.Second, true, func(ctx context.Context) (bool, error) {
			gangs, err := env.lockstep.Gangs(ctx, ns)
			return err == nil && len(gangs) == 0, nil
		})
		_ = env.client.CoreV1().Namespaces().Delete(bg, ns, metav1.DeleteOptions{})
	})
	// No GPUs: the scenario's GPUs stay for the gangs the test counts.
	p := podSpec{name: "solo-0", gang: "solo", minAvailable: 1}.pod()
	_, err = env.client.CoreV1().Pods(ns).Create(s.ctx, p, metav1.CreateOptions{})
	require.NoError(t, err)
	s.eventually(60*time.Second, "gang solo in "+ns+" bound", func() bool {
		gangs, err := env.lockstep.Gangs(s.ctx, ns)
		return err == nil && len(gangs) == 1 && gangs[0].Phase == views.PhaseBound
	})
	return ns
}

// rows are the table's lines below its header, each split into columns.
func rows(t *testing.T, table string) (header []string, out [][]string) {
	t.Helper()
	lines := strings.Split(strings.TrimRight(table, "\n"), "\n")
	require.NotEmpty(t, lines)
	for _, l := range lines[1:] {
		out = append(out, strings.Fields(l))
	}
	return strings.Fields(lines[0]), out
}

// row finds the row whose column col is value.
func row(rows [][]string, col int, value string) []string {
	for _, r := range rows {
		if len(r) > col && r[col] == value {
			return r
		}
	}
	return nil
}

func TestKubectlPlugin(t *testing.T) {
	s := newScenario(t, 2, 4)
	runLockstepPod(t, s.ctx)
	p := plugin{t: t, bin: buildPlugin(t), kubeconfig: kubeconfigFor(t, s.ns)}
	other := otherNamespace(t, s)

	// A pod outside any gang, a gang that binds (2 x 2 GPUs), then one too big for the 4 GPUs
	// left (3 x 4).
	s.create(podSpec{name: "loner"}.pod())
	for i := 0; i < 2; i++ {
		s.create(podSpec{name: fmt.Sprintf("fits-%d", i), gpus: 2, gang: "fits", minAvailable: 2}.pod())
	}
	s.eventually(60*time.Second, "gang fits and the loner bound", func() bool { return s.boundIn("fits-") == 2 && s.boundIn("loner") == 1 })
	// Gated until all three exist, so that the scheduler's first try sees the whole gang rather
	// than parking members that lockstep turned away for want of the others.
	var toobig []*corev1.Pod
	for i := 0; i < 3; i++ {
		pod := podSpec{name: fmt.Sprintf("toobig-%d", i), gpus: 4, gang: "toobig", minAvailable: 3}.pod()
		pod.Spec.SchedulingGates = []corev1.PodSchedulingGate{{Name: "lockstep.e2e/hold"}}
		toobig = append(toobig, s.create(pod))
	}
	s.ungate(toobig)
	s.eventually(60*time.Second, "gang toobig waiting for GPUs", func() bool { return s.waitsFor("toobig", "3 members need 12 nvidia.com/gpu, 4 free") })

	t.Run("gangs in the kubeconfig's namespace", func(t *testing.T) {
		r := p.ok("gangs")
		header, got := rows(t, r.stdout)
		assert.Equal(t, []string{"GANG", "SOURCE", "PHASE", "BOUND/MIN/TOTAL", "QUEUE", "AGE", "REASON"}, header)
		require.Len(t, got, 2, r.stdout)
		fits, toobig := row(got, 0, "fits"), row(got, 0, "toobig")
		require.NotNil(t, fits, r.stdout)
		require.NotNil(t, toobig, r.stdout)
		assert.Contains(t, r.stdout, "Koordinator annotations")
		assert.Contains(t, fits, "Bound")
		assert.Contains(t, fits, "2/2/2")
		assert.Contains(t, toobig, "Waiting")
		assert.Contains(t, toobig, "0/3/3")
		assert.Contains(t, r.stdout, "3 members need 12 nvidia.com/gpu, 4 free")
		assert.NotContains(t, r.stdout, "loner", "a pod outside any gang is no gang")
		assert.NotContains(t, r.stdout, "solo", "another namespace's gang")
		t.Logf("kubectl lockstep gangs:\n%s", r.stdout)
	})

	t.Run("-n and -A", func(t *testing.T) {
		r := p.ok("gangs", "-n", other)
		_, got := rows(t, r.stdout)
		require.Len(t, got, 1, r.stdout)
		assert.Equal(t, "solo", got[0][0])

		r = p.ok("gangs", "-n", "default")
		assert.Empty(t, r.stdout)
		assert.Equal(t, "No gangs found in namespace default.\n", r.stderr)

		r = p.ok("gangs", "-A")
		t.Logf("kubectl lockstep gangs -A:\n%s", r.stdout)
		header, got := rows(t, r.stdout)
		assert.Equal(t, "NAMESPACE", header[0])
		for _, want := range [][2]string{{s.ns, "fits"}, {s.ns, "toobig"}, {other, "solo"}} {
			found := false
			for _, r := range got {
				found = found || (r[0] == want[0] && r[1] == want[1])
			}
			assert.True(t, found, "-A lists %s/%s:\n%s", want[0], want[1], r.stdout)
		}
	})

	t.Run("-o json, yaml and wide", func(t *testing.T) {
		var fromJSON []views.GangStatus
		require.NoError(t, json.Unmarshal([]byte(p.ok("gangs", "-o", "json").stdout), &fromJSON))
		var fromYAML []views.GangStatus
		require.NoError(t, yaml.Unmarshal([]byte(p.ok("gangs", "-o", "yaml").stdout), &fromYAML))
		for _, list := range [][]views.GangStatus{fromJSON, fromYAML} {
			require.Len(t, list, 2)
			phases := map[string]views.Phase{}
			for _, g := range list {
				assert.Equal(t, s.ns, g.Namespace)
				phases[g.Name] = g.Phase
			}
			assert.Equal(t, map[string]views.Phase{"fits": views.PhaseBound, "toobig": views.PhaseWaiting}, phases)
		}
		var all []views.GangStatus
		require.NoError(t, json.Unmarshal([]byte(p.ok("gangs", "-A", "-o", "json").stdout), &all))
		assert.Len(t, all, 3)

		wide := p.ok("gangs", "-o", "wide").stdout
		t.Logf("kubectl lockstep gangs -o wide:\n%s", wide)
		header, _ := rows(t, wide)
		assert.Contains(t, header, "LINE")
		for _, g := range fromJSON {
			assert.Contains(t, wide, strings.TrimPrefix(g.Reason, "gang "+s.ns+"/"+g.Name+": "), "wide keeps every word of the reason")
		}
	})

	t.Run("why the big gang waits", func(t *testing.T) {
		r := p.ok("why", "toobig-0")
		why := strings.TrimSpace(r.stdout)
		t.Logf("kubectl lockstep why toobig-0:\n%s", why)
		assert.NotContains(t, why, "\n", "one paragraph")
		for _, want := range []string{
			"Pod " + s.ns + "/toobig-0 is a member of gang " + s.ns + "/toobig",
			"which is Waiting: 0 of its min-available 3 bound",
			"It is number 1 in line",
			"3 members need 12 nvidia.com/gpu, 4 free",
			"lower min-available (now 3)",
		} {
			assert.Contains(t, why, want)
		}
		// The scenario's nodes hold 8 GPUs; nodes other tests left would make freeing 8 enough.
		assert.Regexp(t, `What would let it run: (more GPU nodes: its quorum needs 12 nvidia.com/gpu and the schedulable nodes have \d+ in all|free 8 more nvidia.com/gpu in the cluster)`, why)

		var parsed struct {
			Pod  string           `json:"pod"`
			Gang views.GangStatus `json:"gang"`
			Why  string           `json:"why"`
		}
		require.NoError(t, json.Unmarshal([]byte(p.ok("why", "toobig-1", "-o", "json").stdout), &parsed))
		assert.Equal(t, "toobig", parsed.Gang.Name)
		assert.Equal(t, views.PhaseWaiting, parsed.Gang.Phase)
	})

	t.Run("why a bound member and a pod outside any gang", func(t *testing.T) {
		bound := p.ok("why", "fits-0").stdout
		t.Logf("kubectl lockstep why fits-0:\n%s", bound)
		assert.Contains(t, bound, "which is Bound: 2 of its min-available 2 bound")
		assert.Contains(t, bound, "This pod is bound to node "+s.ns[len("e2e-"):])
		assert.Contains(t, bound, "The gang runs; nothing holds it.")

		loner := p.ok("why", "loner").stdout
		t.Logf("kubectl lockstep why loner:\n%s", loner)
		assert.Contains(t, loner, "Pod "+s.ns+"/loner is not a member of any gang")
		assert.Contains(t, loner, "It is bound to node "+s.ns[len("e2e-"):])

		r := p.fails("why", "nobody")
		assert.Contains(t, r.stderr, "pod nobody not found in namespace "+s.ns)
	})

	t.Run("nodes and queues", func(t *testing.T) {
		r := p.ok("nodes")
		header, got := rows(t, r.stdout)
		assert.Equal(t, []string{"NODE", "GPUS", "FREE/TOTAL", "SCHEDULABLE", "TOPOLOGY", "DRA", "PROBLEMS"}, header)
		free := 0
		for _, n := range s.nodes {
			cells := row(got, 0, n)
			require.NotNil(t, cells, "nodes lists %s:\n%s", n, r.stdout)
			var f, total int
			_, err := fmt.Sscanf(cells[1], "%d/%d", &f, &total)
			require.NoError(t, err, cells[1])
			assert.Equal(t, 4, total, n)
			assert.Equal(t, "-", cells[4], "%s has device-plugin GPUs, no DRA pool", n)
			free += f
		}
		assert.Equal(t, 4, free, "gang fits holds 4 of the scenario's 8 GPUs, toobig none:\n%s", r.stdout)

		t.Logf("kubectl lockstep nodes:\n%s", r.stdout)
		q := p.ok("queues")
		t.Logf("kubectl lockstep queues:\n%s%s", q.stdout, q.stderr)
		var queues struct {
			Queues []json.RawMessage `json:"queues"`
		}
		require.NoError(t, json.Unmarshal([]byte(p.ok("queues", "-o", "json").stdout), &queues))
	})

	t.Run("lockstep not found", func(t *testing.T) {
		r := p.fails("gangs", "--lockstep-namespace", "default")
		assert.Contains(t, r.stderr, `no pod labelled app.kubernetes.io/part-of=lockstep with a container named "lockstep" in namespace default`)
		t.Logf("kubectl lockstep gangs --lockstep-namespace default:\n%s", r.stderr)
		r = p.fails("gangs", "--lockstep-selector", "app.kubernetes.io/part-of=nothing")
		assert.Contains(t, r.stderr, `no pod labelled app.kubernetes.io/part-of=nothing with a container named "lockstep" in any namespace`)
	})

	t.Run("RBAC", func(t *testing.T) {
		applyDocRBAC(t, s.ctx)
		// The apiserver's RBAC authorizer learns of new bindings from a watch: poll.
		r := p.until(t, func(r result) bool { return r.code == 0 }, "gangs", "--as", "bob", "--as-group", "lockstep-inspectors")
		assert.Contains(t, r.stdout, "toobig", "the Role docs/kubectl-plugin.md gives is enough")

		grantPodReading(t, s.ctx, "alice")
		r = p.until(t, func(r result) bool { return strings.Contains(r.stderr, "pods/portforward") }, "gangs", "--as", "alice")
		require.Equal(t, 1, r.code)
		assert.Contains(t, r.stderr, "cannot reach lockstep in pod "+lockstepNS+"/"+lockstepPodName)
		assert.Contains(t, r.stderr, "RBAC forbids it (403): you need create and get on pods/portforward in namespace "+lockstepNS)
		t.Logf("kubectl lockstep gangs --as alice:\n%s", r.stderr)

		r = p.fails("gangs", "--as", "carol")
		assert.Contains(t, r.stderr, "you may not list pods in all namespaces (RBAC: list on pods)")
		t.Logf("kubectl lockstep gangs --as carol:\n%s", r.stderr)
	})
}

// applyDocRBAC creates the RBAC that docs/kubectl-plugin.md tells users to apply, read from the
// doc itself so that the two cannot drift apart.
func applyDocRBAC(t *testing.T, ctx context.Context) {
	t.Helper()
	doc, err := os.ReadFile(filepath.Join(env.root, "docs", "kubectl-plugin.md"))
	require.NoError(t, err)
	_, after, found := strings.Cut(string(doc), "## RBAC")
	require.True(t, found, "docs/kubectl-plugin.md has an RBAC section")
	_, block, found := strings.Cut(after, "```yaml\n")
	require.True(t, found, "the RBAC section holds a yaml block")
	block, _, found = strings.Cut(block, "```")
	require.True(t, found)
	path := filepath.Join(t.TempDir(), "rbac.yaml")
	require.NoError(t, os.WriteFile(path, []byte(block), 0o600))
	objs, err := harness.DecodeFile(path)
	require.NoError(t, err)
	require.NoError(t, harness.Create(ctx, env.cluster.RESTConfig, objs))
	t.Cleanup(func() {
		bg := context.Background()
		rbac := env.client.RbacV1()
		for _, o := range objs {
			switch o.GetKind() {
			case "Role":
				_ = rbac.Roles(o.GetNamespace()).Delete(bg, o.GetName(), metav1.DeleteOptions{})
			case "RoleBinding":
				_ = rbac.RoleBindings(o.GetNamespace()).Delete(bg, o.GetName(), metav1.DeleteOptions{})
			case "ClusterRole":
				_ = rbac.ClusterRoles().Delete(bg, o.GetName(), metav1.DeleteOptions{})
			case "ClusterRoleBinding":
				_ = rbac.ClusterRoleBindings().Delete(bg, o.GetName(), metav1.DeleteOptions{})
			}
		}
	})
}

// grantPodReading lets user read pods everywhere, and nothing more: no pods/portforward.
func grantPodReading(t *testing.T, ctx context.Context, user string) {
	t.Helper()
	name := "e2e-pod-reader-" + user
	rbac := env.client.RbacV1()
	_, err := rbac.ClusterRoles().Create(ctx, &rbacv1.ClusterRole{ObjectMeta: metav1.ObjectMeta{Name: name},
		Rules: []rbacv1.PolicyRule{{APIGroups: []string{""}, Resources: []string{"pods"}, Verbs: []string{"get", "list"}}}}, metav1.CreateOptions{})
	require.NoError(t, err)
	_, err = rbac.ClusterRoleBindings().Create(ctx, &rbacv1.ClusterRoleBinding{ObjectMeta: metav1.ObjectMeta{Name: name},
		RoleRef:  rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "ClusterRole", Name: name},
		Subjects: []rbacv1.Subject{{APIGroup: rbacv1.GroupName, Kind: rbacv1.UserKind, Name: user}}}, metav1.CreateOptions{})
	require.NoError(t, err)
	t.Cleanup(func() {
		_ = rbac.ClusterRoleBindings().Delete(context.Background(), name, metav1.DeleteOptions{})
		_ = rbac.ClusterRoles().Delete(context.Background(), name, metav1.DeleteOptions{})
	})
}
