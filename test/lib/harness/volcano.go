package harness

import (
	"context"
	"fmt"
	"path/filepath"
	"sync"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/dynamic"

	"github.com/lockstep-sched/lockstep/test/lib/cluster"
	"github.com/lockstep-sched/lockstep/test/lib/thirdparty"
)

// VolcanoControllersBinary is Volcano's controller-manager file name in the cluster's BinDir,
// built by `make volcano` (hack/build-volcano.sh).
const VolcanoControllersBinary = "vc-controller-manager"

const (
	// VolcanoDefaultQueue is the Queue StartVolcanoControllers creates. Volcano's admission
	// webhook (not run here) puts jobs that name no queue in it; its job controller refuses to
	// sync a job whose queue does not exist.
	VolcanoDefaultQueue = "default"
	// VolcanoReadyTimeout bounds StartVolcanoControllers' wait for the job controller's caches.
	VolcanoReadyTimeout = time.Minute
	// volcanoReadyLine is what the job controller logs once its caches have synced and its
	// workers run.
	volcanoReadyLine = "JobController is running"
)

var volcanoQueues = schema.GroupVersionResource{Group: "scheduling.volcano.sh", Version: "v1beta1", Resource: "queues"}

// VolcanoControllers is a running Volcano controller-manager with only its job controller: the
// part that turns a vcjob (batch.volcano.sh/v1alpha1 Job) into a PodGroup and pods. Volcano's
// PodGroup controller is left out on purpose: it would make PodGroups for every pod with
// schedulerName volcano that names none, pods other tests create on their own.
type VolcanoControllers struct {
	// LogPath is its output, in the cluster's WorkDir; each start appends to it.
	LogPath string

	proc     *cluster.Component
	logf     func(format string, args ...any)
	stopOnce sync.Once
}

// StartVolcanoControllers installs Volcano's CRDs and the default Queue, runs
// bin/vc-controller-manager's job controller against the cluster for pods with schedulerName
// "volcano", and returns once its caches have synced. Call Stop when done.
func StartVolcanoControllers(ctx context.Context, c *cluster.Cluster,
	logf func(format string, args ...any)) (_ *VolcanoControllers, err error) {
	began := time.Now()
	if logf == nil {
		logf = func(string, ...any) {}
	}
	if err := checkBinary(c.BinDir, VolcanoControllersBinary, "volcano"); err != nil {
		return nil, err
	}
	paths, err := thirdparty.VolcanoCRDs(ctx)
	if err != nil {
		return nil, err
	}
	if err := thirdparty.InstallCRDs(ctx, c.RESTConfig, paths...); err != nil {
		return nil, err
	}
	if err := ensureVolcanoQueue(ctx, c, VolcanoDefaultQueue); err != nil {
		return nil, err
	}
	from := logOffset(filepath.Join(c.WorkDir, VolcanoControllersBinary+".log"))
	proc, err := c.StartComponent(VolcanoControllersBinary, VolcanoControllersBinary,
		"--kubeconfig", c.AdminKubeconfig,
		"--leader-elect=false",
		"--controllers=job-controller",
		"--scheduler-name=volcano",
	)
	if err != nil {
		return nil, err
	}
	v := &VolcanoControllers{LogPath: proc.LogPath(), proc: proc, logf: logf}
	defer func() {
		if err != nil {
			v.Stop()
		}
	}()
	if err := v.waitReady(ctx, from); err != nil {
		return nil, err
	}
	logf("volcano job controller ready in %s", time.Since(began).Round(time.Millisecond))
	return v, nil
}

// ensureVolcanoQueue creates an open Queue of that name unless one exists.
func ensureVolcanoQueue(ctx context.Context, c *cluster.Cluster, name string) error {
	dyn, err := dynamic.NewForConfig(c.RESTConfig)
	if err != nil {
		return fmt.Errorf("harness: %w", err)
	}
	q := &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": "scheduling.volcano.sh/v1beta1",
		"kind":       "Queue",
		"metadata":   map[string]any{"name": name},
		"spec":       map[string]any{"weight": int64(1), "reclaimable": true},
	}}
	_, err = dyn.Resource(volcanoQueues).Create(ctx, q, metav1.CreateOptions{})
	if err != nil && !apierrors.IsAlreadyExists(err) {
		return fmt.Errorf("harness: volcano queue %s: %w", name, err)
	}
	return nil
}

// waitReady waits for this run's log (from offset from) to say the job controller runs.
func (v *VolcanoControllers) waitReady(ctx context.Context, from int64) error {
	return waitForLine(ctx, v.proc, readyLine{name: VolcanoControllersBinary, logPath: v.LogPath, line: volcanoReadyLine,
		hint: "are all of Volcano's CRDs installed?", timeout: VolcanoReadyTimeout}, from)
}

// Tail returns the last n lines of the controller-manager's log, for failure messages.
func (v *VolcanoControllers) Tail(n int) string { return v.proc.Tail(n) }

// Stop stops the controller-manager. The Queue and what it created for jobs stay, for the tests
// that made the jobs to remove. Safe to call more than once.
func (v *VolcanoControllers) Stop() {
	v.stopOnce.Do(func() {
		v.proc.Stop()
		v.logf("volcano job controller stopped")
	})
}
