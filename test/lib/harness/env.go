package harness

import (
	"context"
	"fmt"
	"path/filepath"
	"slices"
	"time"

	authenticationv1 "k8s.io/api/authentication/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/client-go/tools/clientcmd"

	"github.com/lockstep-sched/lockstep/test/lib/cluster"
	"github.com/lockstep-sched/lockstep/test/lib/faultproxy"
)

// SchedulerConfig is the shipped configuration kube-scheduler runs with: lockstep beside the
// default scheduler.
const SchedulerConfig = "deploy/scheduler-config/lockstep-sidecar.yaml"

// BindWait is lockstep's --bind-wait here. Shorter than the Deployment's 25s: tests whose quorum
// never arrives see the held binds answer sooner. Their members are created together, so they
// reach bind together.
const BindWait = 8 * time.Second

// Env is a real control plane with lockstep as kube-scheduler's extender.
type Env struct {
	Root     string
	Cluster  *cluster.Cluster
	Lockstep *Lockstep
	// Faults is the proxy lockstep reaches kube-apiserver through when Options.FaultProxy is set,
	// for tests that make the apiserver fail lockstep's requests; nil otherwise.
	Faults *faultproxy.Proxy
	// ControllerManager runs when Options.ControllerManager is set; nil otherwise.
	ControllerManager *cluster.Component
	// Workload is how the control plane serves Kubernetes' own gang API, when Options.WorkloadAPI
	// turned it on; nil otherwise.
	Workload *WorkloadAPI
}

// Options configure Up.
type Options struct {
	Logf        func(format string, args ...any)
	KeepWorkDir bool
	// Race builds lockstep with the race detector, so end-to-end runs check it too.
	Race bool
	// FaultProxy runs lockstep against a faultproxy.Proxy (Env.Faults) in front of kube-apiserver.
	// kube-scheduler and Cluster.Client keep talking to kube-apiserver directly, so injected faults
	// hit lockstep alone.
	FaultProxy bool
	// LockstepArgs are flags added to lockstep's command line.
	LockstepArgs []string
	// WorkloadAPI serves Kubernetes' own gang API (Workload and PodGroup, at the version the
	// release has: WorkloadAPIOf) from kube-apiserver, and has the Job controller make them for
	// Indexed Jobs when the controller-manager runs. kube-scheduler keeps its defaults: the API is
	// on, its own gang scheduling is not. A release that serves none lockstep reads starts without.
	WorkloadAPI bool
	// ControllerManager runs kube-controller-manager with cluster.JobControllers, so Jobs make
	// pods and owners' garbage is collected as in a real cluster.
	ControllerManager bool
}

// Up starts etcd and kube-apiserver, applies the shipped manifests (deploy/manifests and
// deploy/gpu-agent), runs lockstep with a token of the shipped ServiceAccount (so it has only the
// shipped RBAC), and starts kube-scheduler with the shipped scheduler configuration. On error,
// whatever started is stopped.
func Up(ctx context.Context, opts Options) (_ *Env, err error) {
	logf := opts.Logf
	if logf == nil {
		logf = func(string, ...any) {}
	}
	root, err := cluster.RepoRoot()
	if err != nil {
		return nil, err
	}
	copts := cluster.Options{Logf: logf, KeepWorkDir: opts.KeepWorkDir}
	workload, err := workloadAPIFor(opts.WorkloadAPI, logf)
	if err != nil {
		return nil, err
	}
	if workload != nil {
		copts.FeatureGates, copts.RuntimeConfig = workload.APIServerGates, workload.RuntimeConfig
	}
	c, err := cluster.Start(ctx, copts)
	if err != nil {
		return nil, err
	}
	e := &Env{Root: root, Cluster: c, Workload: workload}
	defer func() {
		if err != nil {
			e.Down()
		}
	}()
	if opts.ControllerManager {
		if e.ControllerManager, err = startControllerManager(ctx, c, workload); err != nil {
			return nil, err
		}
	}

	objs, err := shippedManifests(root, c.Release, logf)
	if err != nil {
		return nil, err
	}
	if err := Create(ctx, c.RESTConfig, objs); err != nil {
		return nil, fmt.Errorf("applying deploy/ manifests: %w", err)
	}
	logf("applied %d objects from deploy/", len(objs))
	expiry := int64(4 * 3600)
	tok, err := c.Client.CoreV1().ServiceAccounts("lockstep-system").CreateToken(ctx, "lockstep",
		&authenticationv1.TokenRequest{Spec: authenticationv1.TokenRequestSpec{ExpirationSeconds: &expiry}}, metav1.CreateOptions{})
	if err != nil {
		return nil, fmt.Errorf("token for ServiceAccount lockstep-system/lockstep: %w", err)
	}
	kubeconfig, err := e.lockstepKubeconfig(opts.FaultProxy, tok.Status.Token)
	if err != nil {
		return nil, err
	}
	if e.Faults != nil {
		logf("lockstep reaches kube-apiserver through the fault proxy at %s", e.Faults.URL)
	}

	bin, err := BuildExtender(root, c.WorkDir, opts.Race)
	if err != nil {
		return nil, err
	}
	port, err := cluster.FreePort()
	if err != nil {
		return nil, err
	}
	debugPort, err := cluster.FreePort()
	if err != nil {
		return nil, err
	}
	args := append([]string{
		"--kubeconfig", kubeconfig,
		"--scheduler-config", filepath.Join(root, SchedulerConfig),
		"--bind-wait", BindWait.String(),
		// Tests install PodGroup CRDs while lockstep runs; look for them often.
		"--group-discovery-interval", "1s",
		"-v", "2"}, opts.LockstepArgs...)
	e.Lockstep = NewLockstep(bin, filepath.Join(c.WorkDir, "lockstep.log"), port, debugPort, args...)
	if err := e.Lockstep.Start(ctx); err != nil {
		return nil, err
	}
	logf("lockstep ready at %s", e.Lockstep.URL)
	if err := c.StartScheduler(ctx, filepath.Join(root, SchedulerConfig), e.Lockstep.URL); err != nil {
		return nil, err
	}
	logf("kube-scheduler running with %s", SchedulerConfig)
	return e, nil
}

// workloadAPIFor is the gang API the control plane in cluster.DefaultBinDir serves when asked
// for, or nil: not asked, or a release that has none (logged, so a run on it says why).
func workloadAPIFor(asked bool, logf func(string, ...any)) (*WorkloadAPI, error) {
	if !asked {
		return nil, nil
	}
	dir, err := cluster.DefaultBinDir()
	if err != nil {
		return nil, err
	}
	release, err := cluster.ReleaseOf(dir)
	if err != nil {
		return nil, err
	}
	w, err := WorkloadAPIOf(release)
	if err != nil {
		logf("%v; the control plane starts without it", err)
		return nil, nil
	}
	logf("Kubernetes %s: serving its PodGroup API scheduling.k8s.io/%s", release, w.Version)
	return &w, nil
}

// startControllerManager runs the controllers Jobs need, DRA's claim controller where the release
// serves DRA, and with the Workload API those that make and protect native PodGroups.
func startControllerManager(ctx context.Context, c *cluster.Cluster, workload *WorkloadAPI) (*cluster.Component, error) {
	cm := cluster.ControllerManagerOptions{Controllers: slices.Clone(cluster.JobControllers)}
	if c.Release.AtLeast(34) {
		cm.Controllers = append(cm.Controllers, cluster.DRAControllers...)
	}
	if workload != nil {
		cm.Controllers = append(cm.Controllers, cluster.WorkloadControllers...)
		cm.FeatureGates = workload.ControllerManagerGates
	}
	return c.StartControllerManager(ctx, cm)
}

// lockstepKubeconfig writes the kubeconfig lockstep runs with, authenticating with token: to
// kube-apiserver directly, or through a new fault proxy (Env.Faults) when viaProxy.
func (e *Env) lockstepKubeconfig(viaProxy bool, token string) (string, error) {
	if !viaProxy {
		return e.Cluster.KubeconfigForToken("lockstep", token)
	}
	p, err := faultproxy.Start(e.Cluster.RESTConfig)
	if err != nil {
		return "", err
	}
	e.Faults = p
	path := filepath.Join(e.Cluster.WorkDir, "kubeconfig-lockstep-via-faultproxy.yaml")
	if err := clientcmd.WriteToFile(*p.Kubeconfig("lockstep", token), path); err != nil {
		return "", fmt.Errorf("writing lockstep's kubeconfig for the fault proxy: %w", err)
	}
	return path, nil
}

// Down stops lockstep, the fault proxy and the control plane.
func (e *Env) Down() {
	if e.Lockstep != nil {
		e.Lockstep.Kill()
	}
	if e.Faults != nil {
		e.Faults.Close()
	}
	if e.ControllerManager != nil {
		e.ControllerManager.Stop()
	}
	if e.Cluster != nil {
		e.Cluster.Stop()
	}
}

// shippedManifests are deploy/manifests and deploy/gpu-agent, but for the agent's on a release
// older than 1.30: its ValidatingAdmissionPolicy is admissionregistration.k8s.io/v1, which 1.29
// does not serve, so there it is installed without the agent, as the chart says.
func shippedManifests(root string, release cluster.Release, logf func(string, ...any)) ([]*unstructured.Unstructured, error) {
	files := []string{}
	for _, f := range []string{"namespace.yaml", "rbac.yaml", "flowschema.yaml", "configmap.yaml", "deployment.yaml"} {
		files = append(files, filepath.Join(root, "deploy/manifests", f))
	}
	agent, err := filepath.Glob(filepath.Join(root, "deploy/gpu-agent/*.yaml"))
	if err != nil {
		return nil, err
	}
	if !release.AtLeast(30) {
		logf("Kubernetes %s: deploy/gpu-agent needs 1.30 or later (ValidatingAdmissionPolicy v1); lockstep runs without it", release)
		agent = nil
	}
	var objs []*unstructured.Unstructured
	for _, f := range append(files, agent...) {
		if filepath.Base(f) == "kustomization.yaml" {
			continue // kustomize's own file, not an API object
		}
		o, err := DecodeFile(f)
		if err != nil {
			return nil, err
		}
		objs = append(objs, o...)
	}
	return objs, nil
}
