package harness

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"sync"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"

	"github.com/lockstep-sched/lockstep/test/lib/cluster"
	"github.com/lockstep-sched/lockstep/test/lib/thirdparty"
)

// MPIOperatorBinary is the Kubeflow MPI operator's file name in the cluster's BinDir, built by
// `make mpi-operator` (hack/build-mpi-operator.sh) at thirdparty.MPIOperatorVersion.
const MPIOperatorBinary = "mpi-operator"

const (
	// MPIOperatorVolcano is the --gang-scheduling value for Volcano PodGroups; the operator
	// takes every other non-empty value for scheduler-plugins and the pods' schedulerName.
	MPIOperatorVolcano = "volcano"
	// MPIOperatorLockNamespace is the operator's default --lock-namespace. Its leader election
	// cannot be turned off, and it cannot take a Lease in a namespace that does not exist.
	MPIOperatorLockNamespace = "mpi-operator"
	// mpiOperatorLease is the Lease the operator elects itself with, named after the operator.
	mpiOperatorLease = "mpi-operator"
	// MPIOperatorReadyTimeout bounds StartMPIOperator's wait for the controller's workers.
	MPIOperatorReadyTimeout = 2 * time.Minute
	// mpiOperatorReadyLine is what the controller logs once its informers (the PodGroup one too,
	// when gang scheduling is on) have synced and its workers run.
	mpiOperatorReadyLine = "Started workers"
)

// MPIOperator is a running Kubeflow MPI operator (the kubeflow.org/v2beta1 MPIJob controller).
type MPIOperator struct {
	// GangScheduling is its --gang-scheduling.
	GangScheduling string
	// LogPath is its output, in the cluster's WorkDir; each start appends to it.
	LogPath string

	client   kubernetes.Interface
	cfg      *rest.Config
	proc     *cluster.Component
	logf     func(format string, args ...any)
	stopOnce sync.Once
}

// StartMPIOperator runs bin/mpi-operator against the cluster with --gang-scheduling=gangScheduling:
// "volcano" makes scheduling.volcano.sh/v1beta1 PodGroups and pods with schedulerName volcano,
// any other name scheduling.x-k8s.io/v1alpha1 PodGroups and pods with that schedulerName (the
// operator's own rule). It installs the CRDs the operator needs and its lock namespace, and
// returns once the controller's workers run. Only one can run at a time on a machine (see Stop).
func StartMPIOperator(ctx context.Context, c *cluster.Cluster, gangScheduling string,
	logf func(format string, args ...any)) (_ *MPIOperator, err error) {
	began := time.Now()
	if logf == nil {
		logf = func(string, ...any) {}
	}
	if gangScheduling == "" {
		return nil, fmt.Errorf("harness: StartMPIOperator needs a --gang-scheduling name")
	}
	if err := checkBinary(c.BinDir, MPIOperatorBinary, "mpi-operator"); err != nil {
		return nil, err
	}
	if err := checkNoStrayKubeconfig(c.AdminKubeconfig); err != nil {
		return nil, err
	}
	var o *MPIOperator
	defer func() {
		switch {
		case err == nil:
		case o != nil:
			o.Stop()
		default: // the MPIJob CRD may have been changed all the same
			releaseMPIJobCRD(c.RESTConfig, logf)
		}
	}()
	if err := installMPIOperatorCRDs(ctx, c.RESTConfig, gangScheduling); err != nil {
		return nil, err
	}
	if err := resetMPIOperatorLock(ctx, c.Client); err != nil {
		return nil, err
	}
	from := logOffset(filepath.Join(c.WorkDir, MPIOperatorBinary+".log"))
	proc, err := c.StartComponent(MPIOperatorBinary, MPIOperatorBinary,
		"--kubeConfig", c.AdminKubeconfig,
		"--gang-scheduling="+gangScheduling,
		"--lock-namespace="+MPIOperatorLockNamespace,
		"--monitoring-port=0",
	)
	if err != nil {
		return nil, err
	}
	o = &MPIOperator{GangScheduling: gangScheduling, LogPath: proc.LogPath(), client: c.Client, cfg: c.RESTConfig, proc: proc, logf: logf}
	if err := o.waitReady(ctx, from); err != nil {
		return nil, err
	}
	logf("mpi-operator (--gang-scheduling=%s) ready in %s", gangScheduling, time.Since(began).Round(time.Millisecond))
	return o, nil
}

// checkNoStrayKubeconfig refuses to start the operator when KUBECONFIG names another file: the
// operator reads KUBECONFIG over its --kubeConfig flag, StartComponent hands the child this
// process' environment, and the operator would then run against whatever cluster that file
// names, taking its leader Lease and creating pods there.
func checkNoStrayKubeconfig(admin string) error {
	if kc := os.Getenv("KUBECONFIG"); kc != "" && kc != admin {
		return fmt.Errorf("harness: KUBECONFIG=%s is set; mpi-operator would use it over --kubeConfig %s "+
			"and act on that cluster: unset KUBECONFIG for the end-to-end suite", kc, admin)
	}
	return nil
}

// installMPIOperatorCRDs installs the MPIJob CRD (v2beta1 stored, beside the training-operator's
// v1; see thirdparty.InstallMPIJobCRD) and the PodGroup CRD of the gang scheduling mode: the operator
// exits at once when MPIJobs are not served, and waits forever for a PodGroup informer whose
// kind is unknown.
func installMPIOperatorCRDs(ctx context.Context, cfg *rest.Config, gangScheduling string) error {
	if err := thirdparty.InstallMPIJobCRD(ctx, cfg); err != nil {
		return err
	}
	set := thirdparty.SchedulerPluginsCRDs
	if gangScheduling == MPIOperatorVolcano {
		set = thirdparty.VolcanoCRDs
	}
	paths, err := set(ctx)
	if err != nil {
		return err
	}
	return thirdparty.InstallCRDs(ctx, cfg, paths...)
}

// resetMPIOperatorLock creates the lock namespace and deletes a Lease an earlier operator left:
// the operator does not release it on exit, and a new one would wait out its 15s lease first.
func resetMPIOperatorLock(ctx context.Context, cs kubernetes.Interface) error {
	if err := ensureNamespace(ctx, cs, MPIOperatorLockNamespace); err != nil {
		return err
	}
	return deleteMPIOperatorLease(ctx, cs)
}

func deleteMPIOperatorLease(ctx context.Context, cs kubernetes.Interface) error {
	err := cs.CoordinationV1().Leases(MPIOperatorLockNamespace).Delete(ctx, mpiOperatorLease, metav1.DeleteOptions{})
	if err != nil && !apierrors.IsNotFound(err) {
		return fmt.Errorf("harness: deleting lease %s/%s: %w", MPIOperatorLockNamespace, mpiOperatorLease, err)
	}
	return nil
}

// waitReady waits for this run's log (from offset from) to say the controller's workers run.
func (o *MPIOperator) waitReady(ctx context.Context, from int64) error {
	return waitForLine(ctx, o.proc, readyLine{name: MPIOperatorBinary, logPath: o.LogPath, line: mpiOperatorReadyLine,
		hint: "is the PodGroup CRD served?", timeout: MPIOperatorReadyTimeout}, from)
}

// Tail returns the last n lines of the operator's log, for failure messages.
func (o *MPIOperator) Tail(n int) string { return o.proc.Tail(n) }

// Stop stops the operator, deletes its Lease, so another can start (in another mode) against the
// same cluster at once, and gives the MPIJob CRD back to the training-operator
// (thirdparty.ReleaseMPIJobCRD). Delete the MPIJobs first: what the operator created for jobs
// stays, for the tests that made the jobs to remove. Safe to call more than once.
//
// The operator serves its health check on :8080, all interfaces, whatever its flags say, and
// exits when that port is taken: proc.Stop returns only once the process is reaped, so the port
// is free for the next operator when Stop returns. Two operators at once (two suites on one
// machine, or anything else on 8080) cannot work.
func (o *MPIOperator) Stop() {
	o.stopOnce.Do(func() {
		o.proc.Stop()
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		if err := deleteMPIOperatorLease(ctx, o.client); err != nil {
			o.logf("mpi-operator: %v", err)
		}
		releaseMPIJobCRD(o.cfg, o.logf)
		o.logf("mpi-operator stopped")
	})
}

// releaseMPIJobCRD makes v1 the MPIJob CRD's storage version again, logging a failure: the next
// training-operator's CRD install would then say what is wrong.
func releaseMPIJobCRD(cfg *rest.Config, logf func(string, ...any)) {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	if err := thirdparty.ReleaseMPIJobCRD(ctx, cfg); err != nil {
		logf("mpi-operator: %v", err)
	}
}
