package cluster

import (
	"context"
	"crypto/tls"
	"fmt"
	"net/http"
	"path/filepath"
	"strconv"
	"strings"
	"time"
)

// KubeControllerManager is kube-controller-manager's name in BinDir and in WorkDir's logs. It is
// built from the same pinned Kubernetes module as kube-apiserver (hack/build-control-plane.sh).
const KubeControllerManager = "kube-controller-manager"

// ControllerManagerReadyTimeout bounds StartControllerManager's wait for /healthz.
const ControllerManagerReadyTimeout = 60 * time.Second

// Controllers the clients in the end-to-end suite rely on, by kube-controller-manager's names.
var (
	// JobControllers make a batch Job's pods (the MPI operator's launcher, Kueue's Jobs,
	// Indexed Jobs) and collect what their owners leave, as in a real cluster.
	JobControllers = []string{"job-controller", "garbage-collector-controller"}
	// WorkloadControllers add the finalizer that keeps a native PodGroup while pods still
	// name it (Kubernetes 1.36 and later, gate GenericWorkload).
	WorkloadControllers = []string{"podgroup-protection-controller"}
	// DRAControllers make the ResourceClaims of pods' claim templates, clear the reservations
	// of pods gone and deallocate what no pod uses (Dynamic Resource Allocation, GA in 1.34).
	DRAControllers = []string{"resourceclaim-controller"}
)

// ControllerManagerOptions choose what StartControllerManager runs.
type ControllerManagerOptions struct {
	// Controllers are the controllers to run, by name (e.g. JobControllers); every other one
	// stays off, so a test gets only the behaviour it asks for.
	Controllers []string
	// FeatureGates is --feature-gates, e.g. "GenericWorkload=true,WorkloadWithJob=true".
	FeatureGates string
}

// StartControllerManager runs kube-controller-manager against the cluster with leader election
// off and returns once its /healthz answers 200, i.e. its controllers started. Stop the returned
// component when the test is done; the cluster's Stop does not know about it.
func (c *Cluster) StartControllerManager(ctx context.Context, opts ControllerManagerOptions) (*Component, error) {
	if len(opts.Controllers) == 0 {
		return nil, fmt.Errorf("cluster: StartControllerManager needs at least one controller")
	}
	if err := checkBinaries(c.BinDir, KubeControllerManager); err != nil {
		return nil, err
	}
	port, err := FreePort()
	if err != nil {
		return nil, err
	}
	args := []string{
		"--kubeconfig", c.AdminKubeconfig,
		"--leader-elect=false",
		"--controllers", strings.Join(opts.Controllers, ","),
		// Every controller acts as the admin: no ServiceAccounts or their tokens exist here.
		"--use-service-account-credentials=false",
		"--bind-address", "127.0.0.1",
		"--secure-port", strconv.Itoa(port),
		"--cert-dir", filepath.Join(c.WorkDir, "controller-manager-certs"),
		"--v", "2",
	}
	if opts.FeatureGates != "" {
		args = append(args, "--feature-gates", opts.FeatureGates)
	}
	began := time.Now()
	comp, err := c.StartComponent(KubeControllerManager, KubeControllerManager, args...)
	if err != nil {
		return nil, err
	}
	// Loopback, and the certificate is one the controller-manager generated a moment ago.
	hc := &http.Client{Timeout: 2 * time.Second, Transport: &http.Transport{
		TLSClientConfig: &tls.Config{InsecureSkipVerify: true}, //nolint:gosec // see above
	}}
	healthz := fmt.Sprintf("https://127.0.0.1:%d/healthz?verbose", port)
	last := "no answer yet"
	err = c.waitReady(ctx, comp.p, ControllerManagerReadyTimeout, 100*time.Millisecond, func(ctx context.Context) (bool, error) {
		return probeReadyz(ctx, hc, healthz, "", &last)
	}, func() string { return "last /healthz: " + last })
	if err != nil {
		comp.Stop()
		return nil, err
	}
	c.logf("cluster: kube-controller-manager (%s) ready in %s", strings.Join(opts.Controllers, ", "),
		time.Since(began).Round(time.Millisecond))
	return comp, nil
}
