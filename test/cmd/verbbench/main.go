// Command verbbench is `make bench`. It runs the real lockstep binary against a real etcd and
// kube-apiserver on loopback, loads 100, then 1,000, then 5,000 nodes with 10 bound pods each
// (50,000 pods at the end) through the API, and measures:
//   - filter, prioritize and bind of an ordinary pod over loopback HTTP, node names only (as the
//     shipped nodeCacheCapable configuration sends them); bind includes the apiserver's write;
//   - allocations per call, in process, through the HTTP handler alone;
//   - the lockstep process's resident memory with 5,000 nodes and 50,000 pods in its informers.
//
// Each size is measured once lockstep has counted every pod of the load and kube-apiserver and
// etcd have gone idle: the figures are lockstep answering a settled cluster, not lockstep or the
// apiserver still taking in tens of thousands of new objects on the same two cores.
//
// Every figure comes from this one run on this machine. -baseline=REV measures a change: lockstep
// built at REV runs beside this tree's on the same cluster, the two taking turns call batch by call
// batch, and a second table gives both with their ratios (separate runs on this shared machine
// differ by more than most changes do). BenchmarkHandler5000 (go test -bench) is the in-process
// loop for profiling between runs.
package main

import (
	"bytes"
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"text/tabwriter"
	"time"

	"github.com/lockstep-sched/lockstep/dialect"
	"github.com/lockstep-sched/lockstep/dra"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	extenderv1 "k8s.io/kube-scheduler/extender/v1"

	"github.com/lockstep-sched/lockstep/extender"
	"github.com/lockstep-sched/lockstep/gang"
	"github.com/lockstep-sched/lockstep/test/lib/builders"
	"github.com/lockstep-sched/lockstep/test/lib/cluster"
	"github.com/lockstep-sched/lockstep/test/lib/harness"
	"github.com/lockstep-sched/lockstep/test/lib/procstat"
	"github.com/lockstep-sched/lockstep/test/lib/schedsim"
)

const (
	podsPerNode = 10
	namespace   = "bench"
	nodeCPU     = "64"
	podCPU      = "500m" // every bench pod's request, the residents' included
)

func main() {
	calls := flag.Int("calls", 1000, "filter and prioritize calls per size")
	binds := flag.Int("binds", 200, "bind calls per size")
	extra := flag.String("lockstep-flags", "", "extra flags for the lockstep process, space-separated (e.g. \"--gc-percent=800\")")
	baseline := flag.String("baseline", "", "also measure lockstep built at this git revision, on the same cluster, its calls taking turns with this tree's in batches, and print both with their ratios (e.g. -baseline=HEAD~1)")
	flag.StringVar(&cpuProfile, "cpuprofile", "", "write a CPU profile of the lockstep process over the 5,000-node filter and prioritize calls to FILE (runs lockstep with --profiling)")
	flag.StringVar(&latencyDir, "latencies", "", "write every call's latency, in call order, to DIR/<nodes>-<verb>.txt (to see whether slow calls cluster)")
	withDRA := flag.Bool("dra", false, "run twice: nodes of device-plugin GPUs as usual, then the same load with each node's 8 GPUs published as a ResourceSlice of NVIDIA's DRA driver instead (no nvidia.com/gpu in allocatable), and print the DRA run's figures as ratios of the first's (make bench-dra)")
	flag.Parse()
	if err := runAll(*calls, *binds, *baseline, strings.Fields(*extra), *withDRA); err != nil {
		fmt.Fprintln(os.Stderr, "bench:", err)
		os.Exit(1)
	}
}

// runAll is one run, or with withDRA the device-plugin run and the DRA run and their ratios.
func runAll(calls, binds int, baselineRev string, lockstepFlags []string, withDRA bool) error {
	plugin, err := run(calls, binds, baselineRev, lockstepFlags)
	if err != nil || !withDRA {
		return err
	}
	draGPUs = true
	fmt.Println("\nThe same load, each node's GPUs published as a ResourceSlice of NVIDIA's DRA driver:")
	devices, err := run(calls, binds, baselineRev, lockstepFlags)
	if err != nil {
		return err
	}
	plugin.label, devices.label = "device-plugin GPUs", "DRA GPUs"
	compare(plugin, devices, "One control plane after the other in this run, the same load and calls.")
	return nil
}

type row struct {
	nodes          int
	verb           string
	calls          int
	p50, p99, max  time.Duration
	allocs, kbCall float64
}

var latencyDir, cpuProfile string

// draGPUs: nodes publish their GPUs as DRA devices (-dra's second run).
var draGPUs bool

func run(calls, binds int, baselineRev string, lockstepFlags []string) (*subject, error) {
	ctx := context.Background()
	fmt.Printf("lockstep bench  %s  %s  GOMAXPROCS=%d  (shared machine: compare figures within one run)\n",
		time.Now().UTC().Format(time.RFC3339), runtime.Version(), runtime.GOMAXPROCS(0))
	c, err := cluster.Start(ctx, cluster.Options{})
	if err != nil {
		return nil, err
	}
	defer c.Stop()
	subjects, err := buildSubjects(c.WorkDir, baselineRev)
	if err != nil {
		return nil, err
	}
	cfg := rest.CopyConfig(c.RESTConfig)
	cfg.QPS, cfg.Burst = 5000, 10000
	client, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		return nil, err
	}
	if _, err := client.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: namespace}}, metav1.CreateOptions{}); err != nil {
		return nil, err
	}
	if draGPUs {
		for _, dc := range builders.NVIDIADeviceClasses() {
			if _, err := client.ResourceV1().DeviceClasses().Create(ctx, dc, metav1.CreateOptions{}); err != nil {
				return nil, err
			}
		}
	}

	loaded := 0
	for _, size := range []int{100, 1000, 5000} {
		start := time.Now()
		if err := populate(ctx, client, c, loaded, size, binds*len(subjects)); err != nil {
			return nil, err
		}
		loaded = size
		fmt.Printf("loaded %d nodes and %d pods through the API in %s\n", size, size*podsPerNode, time.Since(start).Round(time.Second))
		if err := startSubjects(ctx, c, subjects, lockstepFlags); err != nil {
			return nil, err
		}
		names := nodeNames(size)
		if err := waitUntilSettled(ctx, c, subjects, names); err != nil {
			return nil, err
		}
		if err := measure(subjects, size, calls, binds, names); err != nil {
			return nil, err
		}
	}
	for _, s := range subjects {
		s.ls.Kill()
	}
	c.Stop()

	measureAllocations(subjects[0].rows)
	report(subjects, 5000*podsPerNode+3*binds*len(subjects))
	return subjects[0], nil
}

// measureAllocations fills each row's allocations per call, measured through the handler in this
// process fed the same objects directly: this tree's code only.
func measureAllocations(rows []row) {
	for _, size := range []int{100, 1000, 5000} {
		h, names, stop := inProcessHandler(size)
		for i := range rows {
			if rows[i].nodes == size {
				rows[i].allocs, rows[i].kbCall = allocs(h, rows[i].verb, names, size)
			}
		}
		stop()
	}
}

func buildSubjects(workDir, baselineRev string) ([]*subject, error) {
	root, err := cluster.RepoRoot()
	if err != nil {
		return nil, err
	}
	bin, err := harness.BuildExtender(root, workDir, false)
	if err != nil {
		return nil, err
	}
	subjects := []*subject{{label: "this tree", bin: bin}}
	if baselineRev != "" {
		base, err := harness.BuildExtenderAt(root, workDir, baselineRev)
		if err != nil {
			return nil, err
		}
		subjects = append(subjects, &subject{label: "baseline " + baselineRev, bin: base})
	}
	return subjects, nil
}

// startSubjects starts every subject's lockstep the first time; they stay up across sizes, their
// informers taking in each new load.
func startSubjects(ctx context.Context, c *cluster.Cluster, subjects []*subject, extra []string) error {
	for k, s := range subjects {
		if s.ls != nil {
			continue
		}
		if err := s.start(ctx, c, k, extra); err != nil {
			return err
		}
	}
	return nil
}

// waitUntilSettled returns once every subject has counted the whole load and kube-apiserver and
// etcd have gone idle.
func waitUntilSettled(ctx context.Context, c *cluster.Cluster, subjects []*subject, names []string) error {
	for _, s := range subjects {
		if err := waitUntilSeen(ctx, s.ls.URL, names); err != nil {
			return err
		}
		if err := waitUntilCounted(ctx, s.ls.URL, names); err != nil {
			return err
		}
	}
	start := time.Now()
	if quiet := procstat.WaitUntilQuiet(ctx, 2*time.Minute, c.Pids()...); quiet {
		fmt.Printf("kube-apiserver and etcd idle after %s\n", time.Since(start).Round(100*time.Millisecond))
	} else {
		fmt.Printf("kube-apiserver and etcd still busy after %s; measuring anyway\n", time.Since(start).Round(time.Second))
	}
	return nil
}

// measure times every verb at one size on every subject, each binding pending pods of its own.
func measure(subjects []*subject, size, calls, binds int, names []string) error {
	pending := pendingPods(size, binds*len(subjects))
	var profiled <-chan error
	if cpuProfile != "" && size == 5000 {
		profiled = profile(subjects[0].ls.DebugURL, cpuProfile, time.Duration(2*calls*len(subjects))*time.Millisecond)
	}
	for _, verb := range []string{"filter", "prioritize", "bind"} {
		if verb == "bind" && profiled != nil {
			if err := <-profiled; err != nil {
				return err
			}
		}
		count := calls
		if verb == "bind" {
			count = binds
		}
		callers := make([]*caller, len(subjects))
		for k, s := range subjects {
			callers[k] = newCaller(s.ls.URL, verb, names, pending[k*binds:(k+1)*binds])
		}
		lats, err := interleaved(callers, verb, count)
		if err != nil {
			return err
		}
		if err := writeLatencies(size, verb, lats[0]); err != nil {
			return err
		}
		for k, s := range subjects {
			lat := lats[k]
			slices.Sort(lat)
			s.rows = append(s.rows, row{nodes: size, verb: verb, calls: count, p50: pct(lat, 50), p99: pct(lat, 99), max: lat[len(lat)-1]})
		}
	}
	if size == 5000 {
		for _, s := range subjects {
			s.rssMB = procstat.ResidentMB(s.ls.Pid())
		}
	}
	return nil
}

// report prints this tree's table and the targets, then, with a baseline, both side by side. pods
// is how many pods the informers held at the largest size.
func report(subjects []*subject, pods int) {
	fmt.Println()
	w := tabwriter.NewWriter(os.Stdout, 0, 0, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintln(w, "nodes\tverb\tcalls\tp50\tp99\tmax\tallocs/call\tKB/call\t")
	var filterP99, prioP99 time.Duration
	for _, r := range subjects[0].rows {
		fmt.Fprintf(w, "%d\t%s\t%d\t%s\t%s\t%s\t%.0f\t%.1f\t\n", r.nodes, r.verb, r.calls, ms(r.p50), ms(r.p99), ms(r.max), r.allocs, r.kbCall)
		if r.nodes == 5000 && r.verb == "filter" {
			filterP99 = r.p99
		}
		if r.nodes == 5000 && r.verb == "prioritize" {
			prioP99 = r.p99
		}
	}
	_ = w.Flush()
	rssMB := subjects[0].rssMB
	fmt.Printf("\nlockstep process resident memory with 5,000 nodes and %d pods in its informers: %.0f MB\n", pods, rssMB)
	fmt.Println("(bind latency includes kube-apiserver writing the binding to etcd)")
	verdict := func(name string, ok bool, got string) {
		v := "PASS"
		if !ok {
			v = "MISS"
		}
		fmt.Printf("%s  %s: %s\n", v, name, got)
	}
	verdict("filter p99 < 2 ms at 5,000 nodes", filterP99 < 2*time.Millisecond, ms(filterP99))
	verdict("prioritize p99 < 2 ms at 5,000 nodes", prioP99 < 2*time.Millisecond, ms(prioP99))
	verdict("resident memory < 300 MB with 5,000 nodes and 50,000 pods", rssMB > 0 && rssMB < 300, fmt.Sprintf("%.0f MB", rssMB))
	if len(subjects) > 1 {
		compare(subjects[1], subjects[0], fmt.Sprintf("Same cluster, calls taking turns in batches of %d.", batch))
	}
}

// compare prints before and after, measured in the same run as how says, with after/before
// ratios.
func compare(before, after *subject, how string) {
	fmt.Printf("\nbefore: %s; after: %s. %s\n", before.label, after.label, how)
	w := tabwriter.NewWriter(os.Stdout, 0, 0, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintln(w, "nodes\tverb\tp50 before\tp50 after\tafter/before\tp99 before\tp99 after\tafter/before\t")
	for i, a := range after.rows {
		b := before.rows[i]
		fmt.Fprintf(w, "%d\t%s\t%s\t%s\t%.2f\t%s\t%s\t%.2f\t\n", a.nodes, a.verb, ms(b.p50), ms(a.p50), ratio(a.p50, b.p50), ms(b.p99), ms(a.p99), ratio(a.p99, b.p99))
	}
	_ = w.Flush()
	fmt.Printf("resident memory at 5,000 nodes: before %.0f MB, after %.0f MB\n", before.rssMB, after.rssMB)
}

func ratio(a, b time.Duration) float64 {
	if b == 0 {
		return 0
	}
	return float64(a) / float64(b)
}

// populate creates nodes [from, to) with their status, podsPerNode bound pods on each, and
// pending pods for the bind measurement, with parallel writers.
func populate(ctx context.Context, client kubernetes.Interface, c *cluster.Cluster, from, to, pending int) error {
	work := make(chan func() error)
	var firstErr error
	var mu sync.Mutex
	var wg sync.WaitGroup
	for range 32 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for job := range work {
				if err := job(); err != nil {
					mu.Lock()
					if firstErr == nil {
						firstErr = err
					}
					mu.Unlock()
				}
			}
		}()
	}
	names := nodeNames(to)
	for i := from; i < to; i++ {
		name := names[i]
		work <- func() error {
			if draGPUs {
				if _, err := c.CreateNode(ctx, cluster.NodeSpec{Name: name, CPU: nodeCPU, Memory: "256Gi", Pods: 110}); err != nil {
					return err
				}
				_, err := client.ResourceV1().ResourceSlices().Create(ctx, builders.GPUSlice(name, 8).Obj(), metav1.CreateOptions{})
				return err
			}
			_, err := c.CreateNode(ctx, cluster.NodeSpec{Name: name, GPUs: 8, CPU: nodeCPU, Memory: "256Gi", Pods: 110})
			return err
		}
	}
	for i := from; i < to; i++ {
		for j := range podsPerNode {
			p := pod(fmt.Sprintf("resident-%05d-%02d", i, j), 0)
			p.Spec.NodeName = names[i]
			work <- func() error {
				_, err := client.CoreV1().Pods(namespace).Create(ctx, p, metav1.CreateOptions{})
				return err
			}
		}
	}
	for _, p := range pendingPods(to, pending) {
		work <- func() error {
			_, err := client.CoreV1().Pods(namespace).Create(ctx, p, metav1.CreateOptions{})
			return err
		}
	}
	close(work)
	wg.Wait()
	return firstErr
}

func nodeNames(n int) []string {
	names := make([]string, n)
	for i := range names {
		names[i] = fmt.Sprintf("node-%05d", i)
	}
	return names
}

func pendingPods(size, n int) []*corev1.Pod {
	pods := make([]*corev1.Pod, n)
	for i := range pods {
		pods[i] = pod(fmt.Sprintf("pending-%d-%04d", size, i), 0)
	}
	return pods
}

func pod(name string, gpus int64) *corev1.Pod {
	b := builders.Pod(namespace, name).CPU(podCPU).Memory("1Gi").Label("app", "bench")
	if gpus > 0 {
		b.GPU(gpus)
	}
	return b.Obj()
}

// waitUntilSeen polls lockstep's filter until every node passes: its informers have them all.
func waitUntilSeen(ctx context.Context, url string, names []string) error {
	return pollFeasible(ctx, url, probe, names, func(feasible int) bool { return feasible == len(names) })
}

// waitUntilCounted polls until lockstep counts every node's resident pods, so that the
// measurement finds it answering calls, not still taking in the bulk load's pod events. The probe
// asks for a CPU more than a node with all its residents has free, less than one with a resident
// fewer: it passes no node once they are all counted.
func waitUntilCounted(ctx context.Context, url string, names []string) error {
	resident, capacity := resource.MustParse(podCPU), resource.MustParse(nodeCPU)
	free := capacity.MilliValue() - podsPerNode*resident.MilliValue()
	full := builders.Pod(namespace, "probe-full").CPU(fmt.Sprintf("%dm", free+resident.MilliValue()/2)).Obj()
	return pollFeasible(ctx, url, full, names, func(feasible int) bool { return feasible == 0 })
}

func pollFeasible(ctx context.Context, url string, p *corev1.Pod, names []string, done func(feasible int) bool) error {
	body, err := json.Marshal(extenderv1.ExtenderArgs{Pod: p, NodeNames: &names})
	if err != nil {
		return err
	}
	return wait.PollUntilContextTimeout(ctx, 500*time.Millisecond, 5*time.Minute, true, func(context.Context) (bool, error) {
		resp, err := http.Post(url+"/filter", "application/json", bytes.NewReader(body))
		if err != nil {
			return false, nil
		}
		defer resp.Body.Close()
		var out extenderv1.ExtenderFilterResult
		if err := json.NewDecoder(resp.Body).Decode(&out); err != nil || out.NodeNames == nil {
			return false, nil
		}
		return done(len(*out.NodeNames)), nil
	})
}

var probe = pod("probe", 1)

func argsBody(names []string) []byte {
	b, _ := json.Marshal(extenderv1.ExtenderArgs{Pod: probe, NodeNames: &names})
	return b
}

// profile fetches a CPU profile of the lockstep process for d into file; the channel gives the
// outcome once the profile is written.
func profile(url, file string, d time.Duration) <-chan error {
	done := make(chan error, 1)
	go func() {
		done <- procstat.CPUProfile(context.Background(), http.DefaultClient, url, max(1, int(d.Seconds())), file)
	}()
	return done
}

func writeLatencies(size int, verb string, lat []time.Duration) error {
	if latencyDir == "" {
		return nil
	}
	var b strings.Builder
	for _, d := range lat {
		fmt.Fprintf(&b, "%d\n", d.Microseconds())
	}
	return os.WriteFile(filepath.Join(latencyDir, fmt.Sprintf("%d-%s.txt", size, verb)), []byte(b.String()), 0o644)
}

// inProcessHandler is lockstep's handler over a manager fed the same objects directly, plus
// 100 pending pods for bind.
func inProcessHandler(size int) (http.Handler, []string, func()) {
	m := gang.NewManager(gang.Config{Reader: dialect.Pods{}}, &schedsim.Binder{}, nil, nil, nil)
	names := nodeNames(size)
	if draGPUs {
		m.UpdateDevices("", func(inv *dra.Inventory) []string {
			var changed []string
			for _, dc := range builders.NVIDIADeviceClasses() {
				changed = append(changed, inv.SetClass(dc)...)
			}
			for _, name := range names {
				changed = append(changed, inv.SetSlice(builders.GPUSlice(name, 8).Obj())...)
			}
			return changed
		})
	}
	for i, name := range names {
		node := builders.Node(name).CPU(nodeCPU).Memory("256Gi").Pods(110)
		if !draGPUs {
			node.GPU(8)
		}
		m.UpsertNode(node.Obj())
		for j := range podsPerNode {
			p := pod(fmt.Sprintf("resident-%05d-%02d", i, j), 0)
			p.Spec.NodeName = name
			m.UpsertPod(p)
		}
	}
	for _, p := range allocPods(size) {
		m.UpsertPod(p)
	}
	return extender.NewHandler(m, extender.Options{}), names, m.Stop
}

func allocPods(size int) []*corev1.Pod {
	pods := make([]*corev1.Pod, 100)
	for i := range pods {
		pods[i] = pod(fmt.Sprintf("alloc-%d-%03d", size, i), 0)
	}
	return pods
}

// allocs measures allocations and bytes per call through the handler alone. Each bind binds a
// different pending pod once (a second bind of a bound pod takes a shorter path).
func allocs(h http.Handler, verb string, names []string, size int) (float64, float64) {
	if verb == "bind" {
		pods := allocPods(size)
		var before, after runtime.MemStats
		runtime.ReadMemStats(&before)
		for _, p := range pods {
			b, _ := json.Marshal(extenderv1.ExtenderBindingArgs{PodName: p.Name, PodNamespace: namespace, PodUID: p.UID, Node: names[0]})
			h.ServeHTTP(httptest.NewRecorder(), httptest.NewRequest(http.MethodPost, "/bind", bytes.NewReader(b)))
		}
		runtime.ReadMemStats(&after)
		n := float64(len(pods))
		return float64(after.Mallocs-before.Mallocs) / n, float64(after.TotalAlloc-before.TotalAlloc) / n / 1024
	}
	body := argsBody(names)
	r := testing.Benchmark(benchmarkVerb(h, verb, body))
	return float64(r.AllocsPerOp()), float64(r.AllocedBytesPerOp()) / 1024
}

// benchmarkVerb sends the same call through the handler b.N times, counting allocations.
func benchmarkVerb(h http.Handler, verb string, body []byte) func(*testing.B) {
	return func(b *testing.B) {
		b.ReportAllocs()
		for range b.N {
			serve(b, h, verb, body)
		}
	}
}

// serve runs one call through the handler and fails b unless it answers 200. The answer is
// dropped as it is written, as net/http's connection writer passes it on: a recorder would add its
// own copy of every answer to what is measured.
func serve(b *testing.B, h http.Handler, verb string, body []byte) {
	w := &discardWriter{header: http.Header{}}
	h.ServeHTTP(w, httptest.NewRequest(http.MethodPost, "/"+verb, bytes.NewReader(body)))
	if w.code != http.StatusOK {
		b.Fatalf("%s answered %d", verb, w.code)
	}
}

type discardWriter struct {
	header http.Header
	code   int
}

func (w *discardWriter) Header() http.Header { return w.header }

func (w *discardWriter) WriteHeader(code int) {
	if w.code == 0 {
		w.code = code
	}
}

func (w *discardWriter) Write(p []byte) (int, error) {
	w.WriteHeader(http.StatusOK)
	return len(p), nil
}

func pct(sorted []time.Duration, p int) time.Duration {
	return sorted[min(len(sorted)-1, len(sorted)*p/100)]
}

func ms(d time.Duration) string {
	return strconv.FormatFloat(float64(d.Microseconds())/1000, 'f', 3, 64) + "ms"
}
