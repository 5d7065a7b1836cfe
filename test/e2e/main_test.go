// Package e2e runs lockstep against a real etcd, kube-apiserver and kube-scheduler on loopback.
// kube-scheduler runs with the shipped deploy/scheduler-config/lockstep-sidecar.yaml, and lockstep
// runs as its own process with a ServiceAccount token bound only by the shipped RBAC.
package e2e

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"testing"
	"time"

	authenticationv1 "k8s.io/api/authentication/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/client-go/kubernetes"

	"github.com/lockstep-sched/lockstep/test/cluster"
	"github.com/lockstep-sched/lockstep/test/harness"
)

// env is the control plane and lockstep every test shares; tests run one after another and each
// brings its own nodes and namespace.
var env struct {
	root     string
	cluster  *cluster.Cluster
	client   kubernetes.Interface
	lockstep *harness.Lockstep
}

const schedulerConfig = "deploy/scheduler-config/lockstep-sidecar.yaml"

func TestMain(m *testing.M) {
	os.Exit(runSuite(m))
}

func runSuite(m *testing.M) int {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	logf := func(format string, args ...any) {
		fmt.Fprintf(os.Stderr, "e2e: "+format+"\n", args...)
	}
	if err := setUp(ctx, logf); err != nil {
		fmt.Fprintf(os.Stderr, "e2e: setting up the control plane failed: %v\n", err)
		tearDown(true)
		return 1
	}
	code := m.Run()
	tearDown(code != 0)
	return code
}

func setUp(ctx context.Context, logf func(string, ...any)) error {
	root, err := cluster.RepoRoot()
	if err != nil {
		return err
	}
	env.root = root
	// LOCKSTEP_E2E_KEEP=1 keeps every component's log and data for a look after the run.
	c, err := cluster.Start(ctx, cluster.Options{Logf: logf, KeepWorkDir: os.Getenv("LOCKSTEP_E2E_KEEP") != ""})
	if err != nil {
		return err
	}
	env.cluster, env.client = c, c.Client

	// The shipped manifests must apply to a real apiserver; lockstep then runs with the
	// ServiceAccount and ClusterRole they define and nothing more.
	var objs []*unstructured.Unstructured
	for _, f := range []string{"namespace.yaml", "rbac.yaml", "configmap.yaml", "deployment.yaml"} {
		o, err := harness.DecodeFile(filepath.Join(root, "deploy/manifests", f))
		if err != nil {
			return err
		}
		objs = append(objs, o...)
	}
	agent, _ := filepath.Glob(filepath.Join(root, "deploy/gpu-agent/*.yaml"))
	for _, f := range agent {
		if filepath.Base(f) == "kustomization.yaml" {
			continue // kustomize's own file, not an API object
		}
		o, err := harness.DecodeFile(f)
		if err != nil {
			return err
		}
		objs = append(objs, o...)
	}
	if err := harness.Create(ctx, c.RESTConfig, objs); err != nil {
		return fmt.Errorf("applying deploy/ manifests: %w", err)
	}
	logf("applied %d objects from deploy/", len(objs))
	expiry := int64(4 * 3600)
	tok, err := c.Client.CoreV1().ServiceAccounts("lockstep-system").CreateToken(ctx, "lockstep",
		&authenticationv1.TokenRequest{Spec: authenticationv1.TokenRequestSpec{ExpirationSeconds: &expiry}}, metav1.CreateOptions{})
	if err != nil {
		return fmt.Errorf("token for ServiceAccount lockstep-system/lockstep: %w", err)
	}
	kubeconfig, err := c.KubeconfigForToken("lockstep", tok.Status.Token)
	if err != nil {
		return err
	}

	bin, err := harness.BuildExtender(root, c.WorkDir)
	if err != nil {
		return err
	}
	port, err := cluster.FreePort()
	if err != nil {
		return err
	}
	env.lockstep = harness.NewLockstep(bin, filepath.Join(c.WorkDir, "lockstep.log"), port,
		"--kubeconfig", kubeconfig,
		"--scheduler-config", filepath.Join(root, schedulerConfig),
		"--bind-wait", "8s",
		"-v", "2")
	if err := env.lockstep.Start(ctx); err != nil {
		return err
	}
	logf("lockstep ready at %s", env.lockstep.URL)
	if err := c.StartScheduler(ctx, filepath.Join(root, schedulerConfig), env.lockstep.URL); err != nil {
		return err
	}
	logf("kube-scheduler running with %s", schedulerConfig)
	return nil
}

func tearDown(failed bool) {
	if failed && env.lockstep != nil {
		fmt.Fprintf(os.Stderr, "e2e: lockstep log tail:\n%s\n", env.lockstep.Tail(8000))
	}
	if failed && env.cluster != nil {
		fmt.Fprintf(os.Stderr, "e2e: kube-scheduler log tail:\n%s\n", env.cluster.LogTail(cluster.KubeScheduler, 40))
	}
	if env.lockstep != nil {
		env.lockstep.Kill()
	}
	if env.cluster != nil {
		env.cluster.Stop()
	}
}
