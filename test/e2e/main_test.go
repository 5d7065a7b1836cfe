// Package e2e runs lockstep against a real etcd, kube-apiserver and kube-scheduler on loopback.
// kube-scheduler runs with the shipped deploy/scheduler-config/lockstep-sidecar.yaml, and lockstep
// (built with -race) runs as its own process with a ServiceAccount token bound only by the
// shipped RBAC, reaching kube-apiserver through a fault-injecting proxy (test/lib/faultproxy).
package e2e

import (
	"context"
	"fmt"
	"os"
	"strings"
	"testing"
	"time"

	"k8s.io/client-go/kubernetes"

	"github.com/lockstep-sched/lockstep/test/lib/cluster"
	"github.com/lockstep-sched/lockstep/test/lib/faultproxy"
	"github.com/lockstep-sched/lockstep/test/lib/harness"
)

// env is the control plane and lockstep every test shares; tests run one after another and each
// brings its own nodes and namespace.
var env struct {
	root     string
	cluster  *cluster.Cluster
	client   kubernetes.Interface
	lockstep *harness.Lockstep
	// faults sits between lockstep and kube-apiserver; tests add rules to it and remove them
	// before they end. The suite's own client does not go through it.
	faults *faultproxy.Proxy
	// workload is how this release serves Kubernetes' own PodGroup API; nil on a release that
	// serves none lockstep reads (see needWorkloadAPI).
	workload *harness.WorkloadAPI
}

func TestMain(m *testing.M) {
	os.Exit(runSuite(m))
}

func runSuite(m *testing.M) int {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	logf := func(format string, args ...any) {
		fmt.Fprintf(os.Stderr, "e2e: "+format+"\n", args...)
	}
	// LOCKSTEP_E2E_KEEP=1 keeps every component's log and data for a look after the run.
	// --queue-reclaim (off by default) acts only where team queues are enforced and a gang waits
	// below its queue's fair share: the tests without queues run as they would without it, and
	// reclaim_test.go shows it.
	// Every lockstep this suite starts compares each decision's snapshot with one made afresh
	// (gang/snapshot.go), and panics with "fell out of step" should they differ.
	os.Setenv("LOCKSTEP_VERIFY_SNAPSHOTS", "1")
	e, err := harness.Up(ctx, harness.Options{Logf: logf, KeepWorkDir: os.Getenv("LOCKSTEP_E2E_KEEP") != "", Race: true, FaultProxy: true,
		WorkloadAPI: true, ControllerManager: true,
		LockstepArgs: []string{"--starvation-threshold", starvationThreshold.String(), "--topology-tiers", suiteTiers, "--queue-reclaim",
			"--gather-wait", gatherWait.String()}})
	if err != nil {
		fmt.Fprintf(os.Stderr, "e2e: setting up the control plane failed: %v\n", err)
		return 1
	}
	env.root, env.cluster, env.client, env.lockstep, env.faults, env.workload = e.Root, e.Cluster, e.Cluster.Client, e.Lockstep, e.Faults, e.Workload
	logf("control plane: Kubernetes %s from %s", e.Cluster.Release, e.Cluster.BinDir)
	code := m.Run()
	// lockstep runs with the race detector in its own process: a race shows only in its log.
	if log, err := os.ReadFile(env.lockstep.LogPath); err == nil && strings.Contains(string(log), "WARNING: DATA RACE") {
		fmt.Fprintf(os.Stderr, "e2e: the race detector reported a data race in lockstep; see %s\n", env.lockstep.LogPath)
		code = 1
	} else if err == nil && strings.Contains(string(log), "fell out of step") {
		fmt.Fprintf(os.Stderr, "e2e: lockstep's snapshot fell out of step with its ledger; see %s\n", env.lockstep.LogPath)
		code = 1
	}
	if code != 0 {
		fmt.Fprintf(os.Stderr, "e2e: lockstep log tail:\n%s\n", env.lockstep.Tail(8000))
		fmt.Fprintf(os.Stderr, "e2e: kube-scheduler log tail:\n%s\n", env.cluster.LogTail(cluster.KubeScheduler, 40))
	}
	e.Down()
	return code
}
