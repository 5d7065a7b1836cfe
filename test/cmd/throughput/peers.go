package main

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strconv"

	"github.com/lockstep-sched/lockstep/test/lib/cluster"
	"github.com/lockstep-sched/lockstep/test/lib/thirdparty"
)

// The peers' programs in bin/ (hack/build-vc-scheduler.sh, hack/build-volcano.sh,
// hack/build-koord-scheduler.sh).
const (
	vcScheduler          = "vc-scheduler"
	vcControllerManager  = "vc-controller-manager"
	koordSchedulerBinary = "koord-scheduler"
)

// What Volcano's programs log once their caches have synced and they work: the scheduler at -v=2
// (pkg/scheduler/scheduler.go, Run), the PodGroup controller at any level.
const (
	vcSchedulerReady   = "Scheduler completes Initialization and start to run"
	vcControllersReady = "PodgroupController is running"
)

// volcanoMode sets up Volcano v1.10.0 as its installer deploys it, less what a loopback cluster
// cannot run: every CRD of its bases, its scheduler with the volcano-scheduler.conf its Helm chart
// mounts (installer/helm/chart/volcano/config/volcano-scheduler.conf in the module, the same text
// as the ConfigMap in installer/volcano-development.yaml: actions enqueue, allocate, backfill;
// tiers priority, gang, conformance | overcommit, drf, predicates, capacity, nodeorder, binpack),
// and its controller-manager's PodGroup controller, which gives every volcano pod outside a gang a
// PodGroup of its own (the scheduler binds no pod without one). The scheduler makes the default
// queue itself. Not run: the admission webhook (its defaults, the queue name above all, are
// written by the bench into each PodGroup instead) and leader election. qps > 0 sets the
// scheduler's client limits (Volcano's own default is 2,000 qps).
func volcanoMode(ctx context.Context, c *cluster.Cluster, qps int) (sched, controllers *metered, err error) {
	for _, bin := range []string{vcScheduler, vcControllerManager} {
		if err := requireBinary(c.BinDir, bin); err != nil {
			return nil, nil, err
		}
	}
	if err := installCRDs(ctx, c, thirdparty.VolcanoSchedulerCRDs); err != nil {
		return nil, nil, err
	}
	conf, err := volcanoConf(ctx, c.WorkDir)
	if err != nil {
		return nil, nil, err
	}
	// Its klog level socket goes to /tmp/klog-socks unless told otherwise; keep it in the run's
	// directory, which is removed with the run.
	if err := os.Setenv("DEBUG_SOCKET_DIR", filepath.Join(c.WorkDir, "klog-socks")); err != nil {
		return nil, nil, err
	}
	args := []string{"--kubeconfig", c.AdminKubeconfig, "--leader-elect=false", "--scheduler-name", volcanoSchedulerName,
		"--scheduler-conf", conf,
		// The installer runs it at -v=3; -v=2 is the level every other scheduler here logs at,
		// and the lowest at which it says it is ready.
		"-v=2"}
	if qps > 0 {
		args = append(args, "--kube-api-qps", strconv.Itoa(qps), "--kube-api-burst", strconv.Itoa(2*qps))
	}
	sched = newMetered(vcScheduler, &component{c: c, binary: vcScheduler, args: args, ready: vcSchedulerReady})
	controllers = newMetered(vcControllerManager, &component{c: c, binary: vcControllerManager, ready: vcControllersReady, args: []string{
		"--kubeconfig", c.AdminKubeconfig, "--leader-elect=false", "--controllers=pg-controller", "--scheduler-name", volcanoSchedulerName,
	}})
	return sched, controllers, nil
}

// volcanoConf copies the volcano-scheduler.conf Volcano ships into a directory of its own (the
// scheduler watches the whole directory of its configuration file) and returns its path.
func volcanoConf(ctx context.Context, workDir string) (string, error) {
	src, err := thirdparty.VolcanoSchedulerConf(ctx)
	if err != nil {
		return "", err
	}
	raw, err := os.ReadFile(src)
	if err != nil {
		return "", err
	}
	dir := filepath.Join(workDir, "volcano-scheduler")
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return "", err
	}
	dst := filepath.Join(dir, "volcano-scheduler.conf")
	return dst, os.WriteFile(dst, raw, 0o644)
}

// koordMode sets up koord-scheduler v1.8.0: every CRD of its bases (it starts informers for them
// and waits until they sync) and the configuration writeKoordConfig derives from the one
// Koordinator deploys, leader election off.
func koordMode(ctx context.Context, c *cluster.Cluster, stockConfig string, profiling bool) (*metered, error) {
	if err := requireBinary(c.BinDir, koordSchedulerBinary); err != nil {
		return nil, err
	}
	if err := installCRDs(ctx, c, thirdparty.KoordSchedulerCRDs); err != nil {
		return nil, err
	}
	sample, err := thirdparty.KoordSchedulerConfig(ctx)
	if err != nil {
		return nil, err
	}
	config, err := writeKoordConfig(stockConfig, sample, c.WorkDir)
	if err != nil {
		return nil, err
	}
	return newKoordScheduler(c, config, profiling)
}

// koordSchedulerReady is what koord-scheduler logs once its informers and their handlers have
// synced (cmd/koord-scheduler/app/server.go, at V(3): --vmodule raises that one file to it).
const koordSchedulerReady = "Handlers synced"

// koordScheduler runs koord-scheduler as the cluster runs kube-scheduler, with two differences.
// It serves no /readyz (its handler chain has /healthz alone, which answers before its caches
// sync), so its readiness is the log line above. And it still serves the deprecated insecure port,
// 10251 on every interface, configuration file or not, unless --port=0 turns it off.
type koordScheduler struct {
	component
	base []string
	// port is its secure port while it runs, where /debug/pprof/ is with profiling.
	port      int
	profiling bool
}

func newKoordScheduler(c *cluster.Cluster, config string, profiling bool) (*metered, error) {
	raw, err := os.ReadFile(config)
	if err != nil {
		return nil, err
	}
	rewritten, err := cluster.RewriteSchedulerConfig(raw, c.AdminKubeconfig, "")
	if err != nil {
		return nil, fmt.Errorf("%s: %w", config, err)
	}
	if err := os.WriteFile(config, rewritten, 0o644); err != nil {
		return nil, err
	}
	base := []string{"--config", config, "--bind-address", "127.0.0.1", "--cert-dir", filepath.Join(c.WorkDir, "koord-scheduler-certs"),
		"--port=0", "--v", "2", "--vmodule", "server=3"}
	if profiling {
		base = append(base, "--authorization-always-allow-paths", "/healthz,/readyz,/livez,/debug/pprof/*")
	}
	k := &koordScheduler{component: component{c: c, binary: koordSchedulerBinary, ready: koordSchedulerReady}, base: base, profiling: profiling}
	return newMetered(koordSchedulerBinary, k), nil
}

func (k *koordScheduler) start(ctx context.Context) error {
	port, err := cluster.FreePort()
	if err != nil {
		return err
	}
	k.port, k.args = port, append(slices.Clone(k.base), "--secure-port", strconv.Itoa(port))
	return k.component.start(ctx)
}

func (k *koordScheduler) url() string {
	if !k.profiling || k.pid() == 0 {
		return ""
	}
	return fmt.Sprintf("https://127.0.0.1:%d", k.port)
}

func installCRDs(ctx context.Context, c *cluster.Cluster, set func(context.Context) ([]string, error)) error {
	paths, err := set(ctx)
	if err != nil {
		return err
	}
	if err := thirdparty.InstallCRDs(ctx, c.RESTConfig, paths...); err != nil {
		return fmt.Errorf("installing %d CRDs: %w", len(paths), err)
	}
	return nil
}
