package cluster

import (
	"context"
	"crypto/tls"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	authenticationv1 "k8s.io/api/authentication/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/clientcmd"
	schedconfigv1 "k8s.io/kube-scheduler/config/v1"
	extenderv1 "k8s.io/kube-scheduler/extender/v1"
	"sigs.k8s.io/yaml"

	"github.com/lockstep-sched/lockstep/wellknown"
)

const shippedLikeConfig = `apiVersion: kubescheduler.config.k8s.io/v1
kind: KubeSchedulerConfiguration
clientConnection:
  kubeconfig: /etc/kubernetes/scheduler.conf
  qps: 70
leaderElection:
  leaderElect: true
  resourceName: lockstep-scheduler
  resourceNamespace: kube-system
percentageOfNodesToScore: 100
profiles:
- schedulerName: lockstep
  plugins:
    score:
      disabled:
      - name: NodeResourcesBalancedAllocation
  pluginConfig:
  - name: NodeResourcesFit
    args:
      scoringStrategy:
        type: MostAllocated
extenders:
- urlPrefix: http://127.0.0.1:8888/lockstep
  filterVerb: filter
  prioritizeVerb: prioritize
  weight: 5
  nodeCacheCapable: true
  httpTimeout: 5s
  managedResources:
  - name: nvidia.com/gpu
    ignoredByScheduler: false
- urlPrefix: http://lockstep.kube-system.svc:8888
  filterVerb: filter
  ignorable: true
`

func TestRewriteSchedulerConfig(t *testing.T) {
	out, err := RewriteSchedulerConfig([]byte(shippedLikeConfig), "/tmp/w/admin.yaml", "http://127.0.0.1:40123")
	require.NoError(t, err)

	var in, got schedconfigv1.KubeSchedulerConfiguration
	require.NoError(t, yaml.UnmarshalStrict([]byte(shippedLikeConfig), &in))
	require.NoError(t, yaml.UnmarshalStrict(out, &got), "output:\n%s", out)

	assert.Equal(t, "/tmp/w/admin.yaml", got.ClientConnection.Kubeconfig)
	require.NotNil(t, got.LeaderElection.LeaderElect)
	assert.False(t, *got.LeaderElection.LeaderElect)
	require.Len(t, got.Extenders, 2)
	assert.Equal(t, "http://127.0.0.1:40123/lockstep", got.Extenders[0].URLPrefix)
	assert.Equal(t, "http://127.0.0.1:40123", got.Extenders[1].URLPrefix)

	// Everything else is untouched.
	got.ClientConnection.Kubeconfig = in.ClientConnection.Kubeconfig
	got.LeaderElection.LeaderElect = in.LeaderElection.LeaderElect
	got.Extenders[0].URLPrefix = in.Extenders[0].URLPrefix
	got.Extenders[1].URLPrefix = in.Extenders[1].URLPrefix
	assert.Equal(t, in, got)
	assert.Contains(t, string(out), "MostAllocated")
	assert.NotContains(t, string(out), "renewDeadline", "unset fields must stay unset")
	assert.Contains(t, string(out), "ignorable: true")

	// Sections the file leaves out are added; nothing else appears.
	out, err = RewriteSchedulerConfig([]byte("apiVersion: kubescheduler.config.k8s.io/v1\nkind: KubeSchedulerConfiguration\n"), "/k", "")
	require.NoError(t, err)
	assert.YAMLEq(t, `apiVersion: kubescheduler.config.k8s.io/v1
kind: KubeSchedulerConfiguration
clientConnection: {kubeconfig: /k}
leaderElection: {leaderElect: false}
`, string(out))

	for name, tc := range map[string]struct{ config, url, wantErr string }{
		"unknown field":   {shippedLikeConfig + "bogus: 1\n", "http://127.0.0.1:1", "bogus"},
		"wrong version":   {strings.Replace(shippedLikeConfig, "/v1\n", "/v1beta3\n", 1), "http://127.0.0.1:1", "apiVersion"},
		"no extender URL": {shippedLikeConfig, "", "extender URL"},
		"scheme mismatch": {shippedLikeConfig, "https://127.0.0.1:1", "uses http"},
	} {
		t.Run(name, func(t *testing.T) {
			_, err := RewriteSchedulerConfig([]byte(tc.config), "/k", tc.url)
			require.Error(t, err)
			assert.Contains(t, err.Error(), tc.wantErr)
		})
	}
}

// TestCluster runs the real control plane: nodes without kubelets, a pod that stays unbound while
// no scheduler runs, the real kube-scheduler binding it to a GPU node, and kube-scheduler calling
// an extender at the rewritten urlPrefix.
func TestCluster(t *testing.T) {
	if testing.Short() {
		t.Skip("starts etcd, kube-apiserver and kube-scheduler")
	}
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()

	began := time.Now()
	c, err := Start(ctx, Options{Logf: t.Logf, Users: []User{{Name: "viewer"}}})
	require.NoError(t, err) // the message says to run `make control-plane` when binaries are missing
	t.Cleanup(func() {
		if t.Failed() {
			for _, comp := range []string{KubeScheduler, KubeAPIServer, Etcd} {
				t.Logf("--- tail of %s.log ---\n%s", comp, c.LogTail(comp, 40))
			}
		}
		c.Stop()
		c.Stop() // idempotent
		_, err := os.Stat(c.WorkDir)
		assert.True(t, os.IsNotExist(err), "work dir %s left behind", c.WorkDir)
	})
	t.Logf("Start took %s", time.Since(began).Round(time.Millisecond))

	t.Run("kubeconfigs", func(t *testing.T) {
		admin := clientFromKubeconfig(t, c.AdminKubeconfig)
		assert.Equal(t, "admin", whoAmI(ctx, t, admin).Username)

		viewer := clientFromKubeconfig(t, mustKubeconfig(t, c, "viewer", c.Token("viewer")))
		assert.Equal(t, "viewer", whoAmI(ctx, t, viewer).Username)

		// A ServiceAccount token from the TokenRequest API (no controller-manager: create the SA).
		_, err := c.Client.CoreV1().ServiceAccounts("default").Create(ctx,
			&corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Name: "probe"}}, metav1.CreateOptions{})
		require.NoError(t, err)
		tr, err := c.Client.CoreV1().ServiceAccounts("default").CreateToken(ctx, "probe",
			&authenticationv1.TokenRequest{}, metav1.CreateOptions{})
		require.NoError(t, err)
		sa := clientFromKubeconfig(t, mustKubeconfig(t, c, "probe", tr.Status.Token))
		assert.Equal(t, "system:serviceaccount:default:probe", whoAmI(ctx, t, sa).Username)
		_, err = sa.CoreV1().Nodes().List(ctx, metav1.ListOptions{})
		assert.True(t, apierrors.IsForbidden(err), "a ServiceAccount without RBAC must not list nodes, got %v", err)
	})

	gpuNodes := map[string]bool{"gpu-a": true, "gpu-b": true}
	for name := range gpuNodes {
		_, err := c.CreateNode(ctx, NodeSpec{Name: name, GPUs: 8, Labels: map[string]string{"lockstep.test/pool": "gpu"}})
		require.NoError(t, err)
	}
	_, err = c.CreateNode(ctx, NodeSpec{Name: "cpu-a"})
	require.NoError(t, err)

	nodes, err := c.Client.CoreV1().Nodes().List(ctx, metav1.ListOptions{})
	require.NoError(t, err)
	seen := map[string]bool{}
	for _, n := range nodes.Items {
		gpus := n.Status.Allocatable[wellknown.ResourceGPU]
		if gpuNodes[n.Name] {
			seen[n.Name] = true
			assert.Equal(t, int64(8), gpus.Value(), "allocatable GPUs of %s", n.Name)
			assert.Equal(t, "64", n.Status.Allocatable.Cpu().String())
			assert.Equal(t, "gpu", n.Labels["lockstep.test/pool"])
			assert.Equal(t, n.Name, n.Labels[corev1.LabelHostname])
			assert.Empty(t, n.Spec.Taints, "no not-ready taint may be added")
			require.NotEmpty(t, n.Status.Conditions)
			assert.Equal(t, corev1.NodeReady, n.Status.Conditions[0].Type)
			assert.Equal(t, corev1.ConditionTrue, n.Status.Conditions[0].Status)
		} else {
			assert.True(t, gpus.IsZero(), "%s has no GPUs", n.Name)
		}
	}
	assert.Len(t, seen, 2)

	// No scheduler runs yet: the pod stays unbound.
	pod1 := createGPUPod(ctx, t, c, "gpu-pod-1")
	err = wait.PollUntilContextTimeout(ctx, 200*time.Millisecond, 2*time.Second, true, func(context.Context) (bool, error) {
		// The outer ctx: a Get cut short by the 2s window is not a failure.
		node, err := boundNode(ctx, c, pod1)
		return node != "", err
	})
	require.True(t, wait.Interrupted(err), "pod bound without a scheduler: %v", err)

	// The real kube-scheduler, no extenders: binds it to a GPU node.
	noExtenders := filepath.Join(t.TempDir(), "no-extenders.yaml")
	require.NoError(t, os.WriteFile(noExtenders, []byte(`apiVersion: kubescheduler.config.k8s.io/v1
kind: KubeSchedulerConfiguration
leaderElection:
  leaderElect: true
`), 0o644))
	require.NoError(t, c.StartSchedulerWith(ctx, SchedulerOptions{ConfigPath: noExtenders, Profiling: true}))
	require.Error(t, c.StartScheduler(ctx, noExtenders, ""), "a second scheduler must be refused")
	node := waitBound(ctx, t, c, pod1)
	assert.True(t, gpuNodes[node], "bound to %s, want a GPU node", node)
	assert.NotZero(t, c.Pid(KubeScheduler))
	assert.Equal(t, http.StatusOK, schedulerGet(t, c, "/debug/pprof/"), "Profiling opens /debug/pprof/")
	assert.Equal(t, http.StatusForbidden, schedulerGet(t, c, "/configz"), "only /debug/pprof/ is opened")
	c.StopScheduler()
	c.StopScheduler() // idempotent
	assert.Zero(t, c.Pid(KubeScheduler))
	assert.Empty(t, c.SchedulerURL())

	// An extender stanza pointing at a dead port gets rewritten to ours; ours admits only gpu-b.
	var mu sync.Mutex
	var calls []string
	ext := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		var args extenderv1.ExtenderArgs
		if err := json.NewDecoder(r.Body).Decode(&args); err != nil {
			http.Error(w, err.Error(), http.StatusBadRequest)
			return
		}
		mu.Lock()
		calls = append(calls, r.URL.Path+" "+args.Pod.Name)
		mu.Unlock()
		res := extenderv1.ExtenderFilterResult{FailedNodes: extenderv1.FailedNodesMap{}}
		keep := []string{}
		if args.NodeNames != nil {
			for _, n := range *args.NodeNames {
				if n == "gpu-b" {
					keep = append(keep, n)
				} else {
					res.FailedNodes[n] = "not gpu-b"
				}
			}
		}
		res.NodeNames = &keep
		_ = json.NewEncoder(w).Encode(&res)
	}))
	defer ext.Close()
	withExtender := filepath.Join(t.TempDir(), "extender.yaml")
	require.NoError(t, os.WriteFile(withExtender, []byte(`apiVersion: kubescheduler.config.k8s.io/v1
kind: KubeSchedulerConfiguration
extenders:
- urlPrefix: http://127.0.0.1:1/lockstep
  filterVerb: filter
  nodeCacheCapable: true
  managedResources:
  - name: nvidia.com/gpu
`), 0o644))
	require.NoError(t, c.StartScheduler(ctx, withExtender, ext.URL))
	pod2 := createGPUPod(ctx, t, c, "gpu-pod-2")
	assert.Equal(t, "gpu-b", waitBound(ctx, t, c, pod2))
	mu.Lock()
	assert.Contains(t, calls, "/lockstep/filter gpu-pod-2")
	mu.Unlock()
}

// schedulerGet asks the running scheduler's secure port for path, without credentials, and returns
// the status code.
func schedulerGet(t *testing.T, c *Cluster, path string) int {
	t.Helper()
	hc := &http.Client{Timeout: 5 * time.Second, Transport: &http.Transport{
		TLSClientConfig: &tls.Config{InsecureSkipVerify: true}, //nolint:gosec // loopback, a certificate made at start-up
	}}
	resp, err := hc.Get(c.SchedulerURL() + path)
	require.NoError(t, err)
	resp.Body.Close()
	return resp.StatusCode
}

func createGPUPod(ctx context.Context, t *testing.T, c *Cluster, name string) *corev1.Pod {
	t.Helper()
	pod := &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: "default"},
		Spec: corev1.PodSpec{Containers: []corev1.Container{{
			Name:  "main",
			Image: "registry.invalid/none:0",
			Resources: corev1.ResourceRequirements{
				Requests: corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("100m")},
				Limits:   corev1.ResourceList{wellknown.ResourceGPU: resource.MustParse("1")},
			},
		}}},
	}
	created, err := c.Client.CoreV1().Pods("default").Create(ctx, pod, metav1.CreateOptions{})
	require.NoError(t, err)
	return created
}

func boundNode(ctx context.Context, c *Cluster, pod *corev1.Pod) (string, error) {
	got, err := c.Client.CoreV1().Pods(pod.Namespace).Get(ctx, pod.Name, metav1.GetOptions{})
	if err != nil {
		return "", err
	}
	return got.Spec.NodeName, nil
}

func waitBound(ctx context.Context, t *testing.T, c *Cluster, pod *corev1.Pod) string {
	t.Helper()
	var node string
	err := wait.PollUntilContextTimeout(ctx, 100*time.Millisecond, 30*time.Second, true, func(ctx context.Context) (bool, error) {
		var err error
		node, err = boundNode(ctx, c, pod)
		return node != "", err
	})
	require.NoError(t, err, "pod %s not bound", pod.Name)
	return node
}

func mustKubeconfig(t *testing.T, c *Cluster, name, token string) string {
	t.Helper()
	path, err := c.KubeconfigForToken(name, token)
	require.NoError(t, err)
	return path
}

func clientFromKubeconfig(t *testing.T, path string) kubernetes.Interface {
	t.Helper()
	cfg, err := clientcmd.BuildConfigFromFlags("", path)
	require.NoError(t, err)
	cs, err := kubernetes.NewForConfig(cfg)
	require.NoError(t, err)
	return cs
}

func whoAmI(ctx context.Context, t *testing.T, cs kubernetes.Interface) authenticationv1.UserInfo {
	t.Helper()
	r, err := cs.AuthenticationV1().SelfSubjectReviews().Create(ctx, &authenticationv1.SelfSubjectReview{}, metav1.CreateOptions{})
	require.NoError(t, err)
	return r.Status.UserInfo
}
