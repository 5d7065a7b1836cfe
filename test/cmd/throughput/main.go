// Command throughput is the second table of `make bench`: scheduling throughput and gang latency
// through the REAL kube-scheduler and its peers, measured in one run on one control plane (etcd and
// kube-apiserver from test/lib/cluster), the same nodes and the same jobs, in five modes, each
// job written in the dialect of the mode's scheduler (dialect.go):
//
//   - stock: kube-scheduler (the pinned release, v1.37.2) alone, with the shipped lockstep-sidecar.yaml minus its
//     extenders stanza. Gang members are plain pods to it (lockstep's annotations mean nothing),
//     so its rates are the baseline of what binding costs without gang semantics.
//   - lockstep: kube-scheduler with lockstep as shipped: lockstep-sidecar.yaml, and the lockstep
//     binary built from ./cmd/extender at the start of the run, with the Deployment's arguments
//     (--scheduler-config, --bind-wait=25s; client rate limits at their defaults).
//   - coscheduling: scheduler-plugins v0.34.7's scheduler (bin/sp-scheduler, from
//     test/tools/scheduler-plugins) with the project's sample Coscheduling profile in place of the
//     sidecar's; gangs get PodGroups (minMember = gang size) and the pod-group label instead of
//     annotations.
//   - volcano: Volcano v1.10.0's scheduler (bin/vc-scheduler) with the volcano-scheduler.conf its
//     installer ships, and its controller-manager's PodGroup controller (bin/vc-controller-manager),
//     which gives pods outside a gang the PodGroup Volcano's scheduler needs to bind them; gangs
//     get Volcano PodGroups (minMember, minResources, the default queue) and schedulerName volcano
//     (peers.go).
//   - koordinator: koord-scheduler v1.8.0 (bin/koord-scheduler) with the koord-scheduler profile
//     of Koordinator's own configuration, Coscheduling at every extension point it has it there;
//     gangs carry the same Koordinator annotations lockstep reads, and schedulerName
//     koord-scheduler.
//
// -workload uniform (the default), each mode on an empty namespace:
//  1. ordinary pods (1 GPU each) are created while no scheduler runs; once kube-apiserver, etcd
//     and lockstep are idle the scheduler starts, and pods/s runs from its readiness to the last
//     bind seen by this program's pod informer. The scheduler, not the client, sets the pace.
//  2. the scheduler stops, the gangs are created, it starts again: gang pods/s, each gang's
//     completion (scheduler ready to its last bind) and the longest time a gang was partly bound
//     (its first to its min-available-th bind).
//  3. with the scheduler running and nothing pending, one gang at a time is created, its members
//     back to back, and timed from the last Create returning to its last member bound.
//
// -workload trace (replay.go): openb's whole-GPU pods grouped into gangs of mixed sizes and GPUs
// per member as `make bench-packing` groups them, ordinary pods between them, arriving at
// -arrival-rate on a running scheduler until the first gang (or pod, a gang of one) that is not
// placed within -place-wait; then the share of GPUs allocated, and the share of placed gangs on
// the fewest nodes possible.
//
// A phase in which no pod binds for -stall is cut short and reported as a stall, with what was
// left unbound, and the run goes on. Every mode's row gives the CPU seconds and peak resident
// memory of its own processes (scheduler, lockstep, Volcano's controller-manager) over the mode,
// and a table below gives each process alone; for lockstep "false binds" is its
// lockstep_binds_total{result="committed"} minus the pods the apiserver shows bound. Another table
// gives every phase's CPU seconds per process: on two cores it shows what limits each number.
// -cpuprofile-dir adds CPU profiles of the scheduler (those that serve them), lockstep and
// kube-apiserver over the first -profile-seconds of each phase, and prints their top entries.
//
// -baseline REV measures a change to lockstep: the lockstep binary built at git revision REV runs
// as a mode of its own (lockstep@<short hash>: the lockstep mode in every other respect, this
// tree's scheduler configuration included) right after the lockstep mode, and a last table sets
// the two side by side with their ratios. Two runs on this shared machine differ by more than most
// changes do, so only figures from one run are compared.
package main

import (
	"context"
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"runtime"
	"slices"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"

	"github.com/lockstep-sched/lockstep/test/lib/cluster"
	"github.com/lockstep-sched/lockstep/test/lib/thirdparty"
)

// spScheduler is scheduler-plugins' scheduler in bin/ (hack/build-scheduler-plugins.sh).
const spScheduler = "sp-scheduler"

// sidecarConfig is the shipped configuration: kube-scheduler with lockstep beside it.
const sidecarConfig = "deploy/scheduler-config/lockstep-sidecar.yaml"

var allModes = []string{"stock", "lockstep", "coscheduling", "volcano", "koordinator"}

// extraModes run only when -modes names them: "floor" (floor.go) is a yardstick, not a peer.
var extraModes = []string{"floor"}

type options struct {
	// workload is "uniform" (the three phases) or "trace" (openb arrivals until a gang fails).
	workload   string
	trace      traceOptions
	w          workload
	stall      time.Duration
	modes      []string
	profileDir string
	profileFor int
	keep       bool
	// schedulerQPS overrides the schedulers' client rate limits; 0 keeps the shipped ones.
	schedulerQPS int
	// lockstepFlags follow the Deployment's arguments, to measure lockstep under other settings.
	lockstepFlags []string
	// baseline is the revision -baseline also measures lockstep at; its rev is "" without it.
	baseline baseline
}

func main() {
	var o options
	var modes string
	flag.IntVar(&o.w.nodes, "nodes", 1000, "nodes")
	flag.IntVar(&o.w.gpusPerNode, "gpus-per-node", 8, "nvidia.com/gpu per node")
	flag.IntVar(&o.w.ordinary, "ordinary", 4000, "ordinary pods, 1 GPU each")
	flag.IntVar(&o.w.gangs, "gangs", 250, "gangs")
	flag.IntVar(&o.w.gangSize, "gang-size", 8, "members per gang (all needed: min-available = minMember = gang size)")
	flag.IntVar(&o.w.gangGPU, "gang-gpus", 1, "GPUs per gang member")
	flag.IntVar(&o.w.idleSamples, "idle-samples", 20, "gangs created one at a time on an idle cluster, for gang latency")
	flag.DurationVar(&o.stall, "stall", 30*time.Second, "a phase in which no pod binds for this long is stopped and reported as a stall")
	flag.StringVar(&modes, "modes", strings.Join(allModes, ","), "modes to run, comma-separated, of "+strings.Join(allModes, ",")+"; also floor: kube-scheduler with an extender that decides nothing, what the extender protocol alone costs")
	flag.StringVar(&o.profileDir, "cpuprofile-dir", "", "write CPU profiles of the scheduler, lockstep and kube-apiserver over the start of each phase to DIR and print their top entries")
	flag.IntVar(&o.profileFor, "profile-seconds", 10, "length of each CPU profile, from the scheduler's start")
	flag.IntVar(&o.schedulerQPS, "scheduler-qps", 0, "set clientConnection.qps (burst twice that) of the schedulers in every mode, to see past their client rate limit; 0 keeps lockstep-sidecar.yaml's (kube-scheduler's default, 50)")
	var lockstepFlags string
	flag.StringVar(&lockstepFlags, "lockstep-flags", "", "extra flags for lockstep after the Deployment's, space-separated (e.g. \"-v=6\" to log every API request with its latency)")
	flag.StringVar(&o.workload, "workload", "uniform", "uniform: ordinary pods, then equal gangs all at once, then gangs one at a time; "+
		"trace: openb's gangs and pods arriving over time until the first that cannot be placed (GPU allocation then, gangs on the fewest nodes)")
	flag.StringVar(&o.trace.dir, "trace-dir", "", "directory with the openb CSV files (default: ../shared/traces/openb from the repository root)")
	flag.StringVar(&o.trace.list, "trace-list", "openb_pod_list_multigpu50.csv", "openb pod list the trace workload replays")
	flag.Uint64Var(&o.trace.seed, "trace-seed", 1, "seed of the trace workload's gang grouping (the same rule and seed as make bench-packing)")
	flag.Float64Var(&o.trace.rate, "arrival-rate", 20, "trace workload: pods arriving per second (a gang's members arrive together)")
	flag.DurationVar(&o.trace.placeWait, "place-wait", 15*time.Second, "trace workload: a gang or pod not placed this long after it arrived is the first that cannot be placed")
	flag.DurationVar(&o.trace.pauseAfter, "pause-after", 2*time.Second, "trace workload: arrivals pause while a gang or pod has waited this long unplaced, and go on when it is placed")
	flag.StringVar(&o.baseline.rev, "baseline", "", "also measure lockstep built at this git revision (e.g. HEAD~1), as mode lockstep@<its short hash> right after "+
		"lockstep on the same control plane, and compare the two in a last table; needs lockstep in -modes")
	flag.BoolVar(&o.keep, "keep", false, "keep the work directory (logs of every component, configurations) and print its path")
	flag.Parse()
	o.modes = strings.Split(modes, ",")
	o.lockstepFlags = strings.Fields(lockstepFlags)
	if err := o.validate(); err != nil {
		fmt.Fprintln(os.Stderr, "throughput:", err)
		os.Exit(2)
	}
	if err := run(context.Background(), o); err != nil {
		fmt.Fprintln(os.Stderr, "throughput:", err)
		os.Exit(1)
	}
}

func (o options) validate() error {
	if o.workload != "uniform" && o.workload != "trace" {
		return fmt.Errorf("-workload: %q is neither uniform nor trace", o.workload)
	}
	if o.workload == "trace" && (o.trace.rate <= 0 || o.trace.pauseAfter <= 0 || o.trace.placeWait <= o.trace.pauseAfter) {
		return fmt.Errorf("-arrival-rate and -pause-after must be positive, and -place-wait longer than -pause-after")
	}
	for _, m := range o.modes {
		if !slices.Contains(allModes, m) && !slices.Contains(extraModes, m) {
			return fmt.Errorf("-modes: unknown mode %q (want some of %s)", m, strings.Join(slices.Concat(allModes, extraModes), ","))
		}
	}
	if o.baseline.rev != "" && !slices.Contains(o.modes, "lockstep") {
		return fmt.Errorf("-baseline measures lockstep beside the lockstep mode: -modes must name lockstep")
	}
	w := o.w
	if o.schedulerQPS < 0 {
		return fmt.Errorf("-scheduler-qps must not be negative")
	}
	if w.nodes < 1 || w.gpusPerNode < 1 || w.ordinary < 0 || w.gangs < 0 || w.gangSize < 1 || w.gangGPU < 1 || w.idleSamples < 0 {
		return fmt.Errorf("counts must be positive (ordinary, gangs and idle-samples may be 0)")
	}
	if need, have := w.ordinary+(w.gangs+1)*w.gangSize*w.gangGPU, w.nodes*w.gpusPerNode; o.workload == "uniform" && need > have {
		return fmt.Errorf("the load needs %d GPUs and the nodes have %d: every pod must fit", need, have)
	}
	return nil
}

func run(ctx context.Context, o options) error {
	fmt.Printf("lockstep throughput  %s  %s  GOMAXPROCS=%d  NumCPU=%d\n", time.Now().UTC().Format(time.RFC3339),
		runtime.Version(), runtime.GOMAXPROCS(0), runtime.NumCPU())
	root, err := cluster.RepoRoot()
	if err != nil {
		return err
	}
	if o, err = o.withBaseline(root); err != nil {
		return err
	}
	var items []traceItem
	if o.workload == "trace" {
		if items, err = o.loadTrace(root); err != nil {
			return err
		}
	}
	printLoad(o, items)
	c, err := cluster.Start(ctx, cluster.Options{KeepWorkDir: o.keep, Logf: progress})
	if err != nil {
		return err
	}
	defer c.Stop()
	b, modes, err := setUp(ctx, c, root, o)
	if err != nil {
		return err
	}
	b.trace, b.items = o.trace, items
	var results []result
	for _, m := range modes {
		results = append(results, b.runLogged(ctx, m))
	}
	fmt.Println()
	if items != nil {
		printTraceResults(os.Stdout, o.trace, results)
	} else {
		printResults(os.Stdout, o.w, results)
	}
	b.prof.printTop()
	if o.baseline.rev != "" {
		printComparison(os.Stdout, o.baseline, results)
	}
	if o.keep {
		fmt.Printf("\nwork directory kept: %s\n", c.WorkDir)
	}
	return nil
}

// runLogged runs one mode through the chosen workload and says how it went on stderr.
func (b *bench) runLogged(ctx context.Context, m mode) result {
	began := time.Now()
	progress("mode %s: starting", m.key)
	if b.items != nil {
		r := b.traceMode(ctx, m)
		progress("mode %s: done in %s (%s, error: %v)", m.key, time.Since(began).Round(time.Second), r.trace.summary(), r.err)
		return r
	}
	r := b.runMode(ctx, m)
	progress("mode %s: done in %s (ordinary %s pods/s, gangs %s pods/s, %d stalls, error: %v)", m.key,
		time.Since(began).Round(time.Second), perSecond(r.ordinary), perSecond(r.gang), len(r.stalls), r.err)
	return r
}

func (o options) loadTrace(root string) ([]traceItem, error) {
	if o.trace.dir == "" {
		o.trace.dir = defaultTraceDir(root)
	}
	items, err := loadTrace(filepath.Join(o.trace.dir, o.trace.list), o.trace.seed)
	if err != nil {
		return nil, fmt.Errorf("%w (set -trace-dir to the directory holding the openb CSV files)", err)
	}
	return items, nil
}

// printLoad describes the load and the schedulers' client limits.
func printLoad(o options, items []traceItem) {
	w := o.w
	if items == nil {
		fmt.Printf("load: %d nodes x %d nvidia.com/gpu; %d ordinary pods (1 GPU); %d gangs x %d members (%d GPU each, all needed) = %d gang pods; "+
			"%d idle gangs; stall after %s without a bind\n",
			w.nodes, w.gpusPerNode, w.ordinary, w.gangs, w.gangSize, w.gangGPU, w.gangs*w.gangSize, w.idleSamples, o.stall)
	} else {
		fmt.Printf("load: %d nodes x %d nvidia.com/gpu; %s; %s\n", w.nodes, w.gpusPerNode, describeItems(items), traceRule(o.trace.list, o.trace.seed))
		fmt.Printf("arrivals: %.0f pods/s in trace order on a running scheduler, a gang's members (and its PodGroup) together, paused while a gang "+
			"or pod has waited %s unplaced; the replay stops at the first one not placed %s after it arrived\n", o.trace.rate, o.trace.pauseAfter, o.trace.placeWait)
	}
	limits := "as in lockstep-sidecar.yaml (unset: kube-scheduler's default, 50 qps, burst 100), koord-scheduler's too"
	if o.schedulerQPS > 0 {
		limits = fmt.Sprintf("%d qps, burst %d (-scheduler-qps)", o.schedulerQPS, 2*o.schedulerQPS)
	}
	fmt.Printf("schedulers' client rate limits: %s; Volcano's scheduler: %s; lockstep: the Deployment's flags, its client rate limits at their defaults\n",
		limits, volcanoLimits(o.schedulerQPS))
}

func volcanoLimits(qps int) string {
	if qps > 0 {
		return "the same"
	}
	return "its default, 2,000 qps"
}

// setUp builds lockstep, writes the schedulers' configurations, installs the peers' CRDs, and
// creates the namespace and the nodes. A mode whose binary is missing or does not build is
// reported, not fatal.
func setUp(ctx context.Context, c *cluster.Cluster, root string, o options) (*bench, []mode, error) {
	b, err := newBench(c, o)
	if err != nil {
		return nil, nil, err
	}
	tree, base := buildLockstep(root, c.WorkDir, o)
	var spDir string
	var spErr error
	if slices.Contains(o.modes, "coscheduling") {
		spDir, spErr = schedulerPlugins(root, c.BinDir)
	}
	configs, err := writeSchedulerConfigs(filepath.Join(root, sidecarConfig), spDir, c.WorkDir, o.schedulerQPS)
	if err != nil {
		return nil, nil, err
	}
	if err := b.createCluster(ctx, spDir); err != nil {
		return nil, nil, err
	}
	kube := func(binary, config string) *metered {
		return newMetered(binary, &kubeScheduler{c: c, opts: cluster.SchedulerOptions{Binary: binary, ConfigPath: config, Profiling: b.prof != nil}})
	}
	lockstepMode := func(key string, build lockstepBuild) mode {
		return mode{key: key, label: "kube-scheduler + " + key, sched: kube(cluster.KubeScheduler, configs.shipped), config: configs.shipped,
			lockstepBin: build.bin, unavailable: build.err}
	}
	all := map[string]mode{
		"stock":        {key: "stock", label: "kube-scheduler alone", sched: kube(cluster.KubeScheduler, configs.stock), config: configs.stock},
		"lockstep":     lockstepMode("lockstep", tree),
		"coscheduling": {key: "coscheduling", label: "scheduler-plugins coscheduling", sched: kube(spScheduler, configs.cosched), config: configs.cosched, dialect: xk8sPodGroup, unavailable: spErr},
	}
	if o.baseline.rev != "" {
		all[o.baseline.key()] = lockstepMode(o.baseline.key(), base)
	}
	var modes []mode
	for _, key := range o.modes {
		m, ok := all[key]
		switch {
		case key == "floor":
			m = floorMode(c, root, configs.shipped, kube(cluster.KubeScheduler, configs.shipped))
		case !ok:
			m = peerMode(ctx, c, key, configs.stock, o, b.prof != nil)
		}
		modes = append(modes, m)
	}
	b.binds, err = watchBinds(ctx, b.client)
	return b, modes, err
}

// peerMode sets up Volcano or Koordinator, with their CRDs; what fails makes the mode
// unavailable, with the reason.
func peerMode(ctx context.Context, c *cluster.Cluster, key, stockConfig string, o options, profiling bool) mode {
	switch key {
	case "volcano":
		m := mode{key: key, label: "Volcano " + thirdparty.VolcanoVersion + " scheduler", dialect: volcanoPodGroup, cyclic: true}
		var err error
		if m.sched, m.companion, err = volcanoMode(ctx, c, o.schedulerQPS); err != nil {
			m.sched, m.unavailable = newMetered(vcScheduler, nil), err
		}
		return m
	case "koordinator":
		m := mode{key: key, label: "koord-scheduler " + thirdparty.KoordinatorVersion, dialect: koordAnnotations}
		var err error
		if m.sched, err = koordMode(ctx, c, stockConfig, profiling); err != nil {
			m.sched, m.unavailable = newMetered(koordSchedulerBinary, nil), err
		}
		return m
	}
	panic("unknown mode " + key) // validate rejected it
}

// newBench makes the bench's clients and, with -cpuprofile-dir, its profiler.
func newBench(c *cluster.Cluster, o options) (*bench, error) {
	cfg := rest.CopyConfig(c.RESTConfig)
	cfg.QPS, cfg.Burst = 5000, 10000
	b := &bench{c: c, w: o.w, stall: o.stall, lockstepFlags: o.lockstepFlags}
	var err error
	if b.client, err = kubernetes.NewForConfig(cfg); err != nil {
		return nil, err
	}
	if b.dyn, err = dynamic.NewForConfig(cfg); err != nil {
		return nil, err
	}
	if b.api, err = newAPIMetrics(c.RESTConfig); err != nil {
		return nil, err
	}
	if o.profileDir != "" {
		if err := os.MkdirAll(o.profileDir, 0o755); err != nil {
			return nil, err
		}
		if b.prof, err = newProfiler(o.profileDir, o.profileFor, c.RESTConfig); err != nil {
			return nil, err
		}
	}
	return b, nil
}

// schedulerPlugins finds scheduler-plugins' module directory and checks its scheduler is built.
func schedulerPlugins(root, binDir string) (string, error) {
	if err := requireBinary(binDir, spScheduler); err != nil {
		return "", err
	}
	return schedulerPluginsDir(root)
}

// createCluster creates the namespace, the nodes and, with spDir, the PodGroup CRD: one cluster
// for every mode.
func (b *bench) createCluster(ctx context.Context, spDir string) error {
	ns := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: namespace}}
	if _, err := b.client.CoreV1().Namespaces().Create(ctx, ns, metav1.CreateOptions{}); err != nil {
		return err
	}
	began := time.Now()
	if err := b.w.createNodes(ctx, b.c); err != nil {
		return err
	}
	progress("created %d nodes in %s", b.w.nodes, time.Since(began).Round(time.Second))
	if spDir == "" {
		return nil
	}
	return applyPodGroupCRD(ctx, b.dyn, spDir)
}

var started = time.Now()

// progress reports how the run goes, on stderr, so that stdout holds the tables only.
func progress(format string, args ...any) {
	fmt.Fprintf(os.Stderr, "[%6.1fs] %s\n", time.Since(started).Seconds(), fmt.Sprintf(format, args...))
}
