// Command queuebench is the team queues' part of `make bench`: what 100 Volcano queues and 1,000
// gangs waiting in them cost the scheduler's verbs, as the ratio to the same cluster without
// queues (issue 20: within 10%). It measures the gang manager in process, no apiserver and no
// HTTP: the verbs' own cost, which is where the queues' arithmetic runs.
//
// Two managers are built from the same objects: 5,000 nodes of 8 GPUs, 64 cpu and 512Gi, each
// holding a running Volcano gang of 7 or 8 one-GPU pods (36,250 bound pods; every node keeps at
// most one GPU free), and 1,000 waiting Volcano gangs of 4 members of 2 GPUs, whose quorum fits
// no node. Every gang's PodGroup names one of 100 queues. In the "queues" world the 100 queues
// are told to the manager (quota.Queue, weights 1 to 4, varied capabilities, a few guarantees and
// priorities); in the "no queues" world they are not, so nothing is enforced. The running gangs
// are spread over the queues in proportion to their weights and the capabilities leave room for
// one more quorum, so every waiting gang passes its queue's checks (capability, guarantees, fair
// share) and then fails placement: the admission path asks the quota book and still does all the
// planning work the other world does, the costliest path a waiting gang takes. The setup checks
// that, and that every gang is recorded waiting in its queue, before measuring.
//
// Measured, in both worlds, calls taking turns batch by batch (the first world of a batch
// alternating), so that the machine's noise and the garbage collector hit both alike:
//   - filter of an ordinary 1-GPU pod over all 5,000 node names;
//   - filter of a waiting gang's member over all 5,000 nodes (a different gang each call), the
//     admission path: quorum, the queue's question, the quorum plan that fails;
//   - prioritize of the ordinary pod over all 5,000 nodes.
//
// The table gives p50, p99 and mean per verb and world over all repetitions, each ratio
// queues/no-queues, and beside it the spread of that ratio over the repetitions (min–max), not
// the best of them; a second table gives each call's allocations. The verdicts hold the ratios of
// p50 and mean over all repetitions to 1.10.
//
// -cpuprofile profiles the measured calls of both worlds, each labelled with its world: see one
// with go tool pprof -tagfocus 'world=^queues$' (the anchors matter: "queues" alone also matches
// "no queues"). -control measures two worlds without queues against each other: the harness's own
// bias, which should show ratios about 1.00.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"os"
	"runtime"
	"runtime/pprof"
	"slices"
	"strconv"
	"strings"
	"text/tabwriter"
	"time"

	corev1 "k8s.io/api/core/v1"

	"github.com/lockstep-sched/lockstep/dialect"
	"github.com/lockstep-sched/lockstep/gang"
	"github.com/lockstep-sched/lockstep/gangspec"
	"github.com/lockstep-sched/lockstep/placement"
	"github.com/lockstep-sched/lockstep/quota"
	"github.com/lockstep-sched/lockstep/test/lib/builders"
	"github.com/lockstep-sched/lockstep/test/lib/schedsim"
	"github.com/lockstep-sched/lockstep/wellknown"
)

const (
	namespace   = "bench"
	queueKind   = "Volcano Queue"
	nodeGPUs    = 8
	nodeCPU     = "64"
	nodeMemory  = "512Gi"
	members     = 4 // per waiting gang, all of them its quorum
	memberGPUs  = 2 // more than any node has free: the quorum fits nowhere
	memberCPU   = "8"
	memberMem   = "64Gi"
	residentCPU = "4"
	residentMem = "32Gi"
	// target is issue 20's bound on queues/no-queues.
	target = 1.10
)

type config struct {
	nodes, queues, gangs int
	reps, calls, batch   int
}

func main() {
	var c config
	flag.IntVar(&c.nodes, "nodes", 5000, "nodes")
	flag.IntVar(&c.queues, "queues", 100, "Volcano queues (the setup stops once a queue's fair share has no room left for a quorum: past about 140 at 5,000 nodes)")
	flag.IntVar(&c.gangs, "gangs", 1000, "waiting gangs, spread over the queues")
	flag.IntVar(&c.reps, "reps", 5, "repetitions; the ratios' spread is over them")
	flag.IntVar(&c.calls, "calls", 1000, "calls per verb, world and repetition")
	flag.IntVar(&c.batch, "batch", 5, "calls in a row before the other world takes its turn")
	cpuProfile := flag.String("cpuprofile", "", "write a CPU profile of the measured calls (both worlds) to FILE")
	control := flag.Bool("control", false, "measure a second world without queues in place of the queues world: the ratios then show the harness's own bias")
	flag.Parse()
	if err := run(c, *cpuProfile, *control); err != nil {
		fmt.Fprintln(os.Stderr, "queuebench:", err)
		os.Exit(1)
	}
}

func run(c config, cpuProfile string, control bool) error {
	if c.nodes < 1 || c.queues < 1 || c.gangs < 1 || c.reps < 1 || c.calls < 1 || c.batch < 1 {
		return errors.New("every count must be at least 1")
	}
	fmt.Printf("lockstep queue bench  %s  %s  GOMAXPROCS=%d  (in process; compare figures within one run)\n",
		time.Now().UTC().Format(time.RFC3339), runtime.Version(), runtime.GOMAXPROCS(0))
	start := time.Now()
	objs := build(c)
	worlds := []*world{{name: "no queues"}, {name: "queues", queues: true}}
	if control {
		worlds[1] = &world{name: "no queues (control)"}
	}
	err := setUp(worlds, objs)
	for _, w := range worlds {
		if w.m != nil {
			defer w.m.Stop()
		}
	}
	if err != nil {
		return err
	}
	fmt.Printf("set up both worlds in %s: %d nodes, %d bound pods in %d running gangs, %d waiting gangs of %d x %d GPUs\n",
		time.Since(start).Round(100*time.Millisecond), c.nodes, len(objs.residents), len(objs.running), c.gangs, members, memberGPUs)
	if control {
		fmt.Println("CONTROL RUN: the second world has no queues either; its ratios measure the harness's own bias and should be about 1.00")
	} else {
		fmt.Println(worlds[1].summary)
	}

	if cpuProfile != "" {
		f, err := os.Create(cpuProfile)
		if err != nil {
			return err
		}
		defer f.Close()
		if err := pprof.StartCPUProfile(f); err != nil {
			return err
		}
		defer pprof.StopCPUProfile()
	}
	start = time.Now()
	results := make([][]rep, len(verbs)) // [verb][rep]
	for r := range c.reps {
		runtime.GC()
		for v, verb := range verbs {
			lat, err := interleaved(worlds, verb, objs, c)
			if err != nil {
				return fmt.Errorf("%s: %w", verb.name, err)
			}
			results[v] = append(results[v], rep{noQueues: lat[0], queues: lat[1]})
		}
		fmt.Printf("repetition %d of %d done\n", r+1, c.reps)
	}
	fmt.Printf("measured in %s\n\n", time.Since(start).Round(100*time.Millisecond))
	allocs := make([][2][2]float64, len(verbs)) // [verb][world][allocs, KB]
	for v, verb := range verbs {
		for k, w := range worlds {
			a, kb, err := allocations(w, verb, objs, 20)
			if err != nil {
				return fmt.Errorf("%s: %w", verb.name, err)
			}
			allocs[v][k] = [2]float64{a, kb}
		}
	}
	report(c, results, allocs)
	return nil
}

// --- the cluster --------------------------------------------------------------------------------

// objects are what both worlds are built from, built once.
type objects struct {
	nodes     []*corev1.Node
	names     []string
	queues    []quota.Queue
	running   []gang.GroupRules
	residents []*corev1.Pod
	waiting   []gang.GroupRules
	// gangPods are the waiting gangs' members, by gang.
	gangPods [][]*corev1.Pod
	ordinary *corev1.Pod
	// quorum is what a waiting gang's quorum asks.
	quorum placement.Resources
}

func build(c config) *objects {
	o := &objects{ordinary: builders.Pod("default", "ordinary").GPU(1).CPU("1").Memory("1Gi").Obj()}
	created := time.Now().Add(-time.Minute)
	weights := make([]int64, c.queues)
	var sumW int64
	for q := range weights {
		weights[q] = 1 + int64(q%4)
		sumW += weights[q]
	}
	// Node i's running gang belongs to the queue at i's place along the weights, so that each
	// queue runs on nodes in proportion to its weight and all are about as far below their share.
	queueOf := make([]int, c.nodes)
	used := make([]placement.Resources, c.queues)
	var cum int64
	q := 0
	for i := range c.nodes {
		for q < c.queues-1 && int64(i)*sumW >= (cum+weights[q])*int64(c.nodes) {
			cum += weights[q]
			q++
		}
		queueOf[i] = q
	}
	for i := range c.nodes {
		name := fmt.Sprintf("node-%05d", i)
		o.nodes = append(o.nodes, builders.Node(name).GPU(nodeGPUs).CPU(nodeCPU).Memory(nodeMemory).Pods(110).Obj())
		o.names = append(o.names, name)
		count := nodeGPUs - 1 // one GPU free: room for an ordinary 1-GPU pod, not for a 2-GPU member
		if i%4 == 0 {
			count = nodeGPUs // one node in four full
		}
		group := fmt.Sprintf("run-%05d", i)
		o.running = append(o.running, rules(group, count, queueName(queueOf[i])))
		for j := range count {
			p := builders.Pod(namespace, fmt.Sprintf("%s-%d", group, j)).GPU(1).CPU(residentCPU).Memory(residentMem).
				Annotation(wellknown.AnnotationGroupName, group).Created(created).Node(name).Phase(corev1.PodRunning).Obj()
			o.residents = append(o.residents, p)
			used[queueOf[i]] = used[queueOf[i]].Add(placement.PodRequests(p))
		}
	}
	for g := range c.gangs {
		group := fmt.Sprintf("wait-%04d", g)
		o.waiting = append(o.waiting, rules(group, members, queueName(g%c.queues)))
		pods := make([]*corev1.Pod, members)
		for j := range pods {
			pods[j] = builders.Pod(namespace, fmt.Sprintf("%s-%d", group, j)).GPU(memberGPUs).CPU(memberCPU).Memory(memberMem).
				Annotation(wellknown.AnnotationGroupName, group).Created(created.Add(time.Duration(g) * time.Millisecond)).Obj()
		}
		o.gangPods = append(o.gangPods, pods)
	}
	for _, p := range o.gangPods[0] {
		o.quorum = o.quorum.Add(placement.PodRequests(p))
	}
	for q := range c.queues {
		o.queues = append(o.queues, queueDef(q, weights[q], used[q], o.quorum))
	}
	return o
}

func queueName(q int) string { return fmt.Sprintf("team-%03d", q) }

// rules are a Volcano PodGroup's, as package dialect reads one naming queue.
func rules(group string, minMember int, queue string) gang.GroupRules {
	spec := &gangspec.Spec{Namespace: namespace, Name: group, MinAvailable: minMember,
		Source: "Volcano PodGroup " + namespace + "/" + group + " (scheduling.volcano.sh/v1beta1)",
		Queue:  quota.Ref{Kind: queueKind, Name: queue, Fallback: quota.DefaultName}}
	return gang.GroupRules{Key: dialect.GroupNameKey(namespace, group), Namespace: namespace, Name: group, Spec: spec}
}

// queueDef varies the queues as teams set them: a capability on GPUs for two in three (on cpu
// too for one in three), a guarantee a little above what it runs for one in ten, a higher
// priority for one in twenty. Every capability leaves room for at least one more quorum.
func queueDef(q int, weight int64, used, quorum placement.Resources) quota.Queue {
	name := queueName(q)
	d := quota.Queue{Kind: queueKind, Name: name, Source: queueKind + " " + name + " (scheduling.volcano.sh/v1beta1)",
		Weight: weight, State: quota.Open, Reclaimable: q%7 != 0}
	slack := int64(1 + q%10)
	switch q % 3 {
	case 0:
		d.Capability = quota.Limit{Named: quota.GPU, Amount: placement.Resources{GPU: used.GPU + slack*quorum.GPU}}
	case 1:
		d.Capability = quota.Limit{Named: quota.GPU | quota.CPU, Amount: placement.Resources{
			GPU: used.GPU + slack*quorum.GPU, MilliCPU: used.MilliCPU + slack*quorum.MilliCPU}}
	}
	if q%10 == 0 {
		d.Guarantee = placement.Resources{GPU: used.GPU + quorum.GPU/2}
	}
	if q%20 == 0 {
		d.Priority = 1
	}
	return d
}

// --- the two worlds -----------------------------------------------------------------------------

type world struct {
	name    string
	queues  bool
	m       *gang.Manager
	summary string
	// labels mark the world's calls in a CPU profile: go tool pprof -tagfocus world=queues.
	labels context.Context
	// next is the waiting gang whose member filters next; prio is prioritize's buffer.
	next int
	prio []int64
}

// setUp feeds the managers the objects as informers would, then filters one member of every
// waiting gang once, which records it waiting (in its queue, where queues are enforced). The
// worlds take every object in turn, the first of them alternating: built one after the other,
// the second world's records would land in the holes the first one's setup left in the heap, and
// its verbs ran 20-50% slower than the first's with no queues in either.
func setUp(worlds []*world, o *objects) error {
	for _, w := range worlds {
		w.labels = pprof.WithLabels(context.Background(), pprof.Labels("world", w.name))
		w.m = gang.NewManager(gang.Config{Reader: dialect.Pods{}}, &schedsim.Binder{}, nil, nil, nil)
	}
	var firstErr error
	each := func(i int, f func(w *world) error) {
		for k := range worlds {
			if err := f(worlds[(i+k)%len(worlds)]); err != nil && firstErr == nil {
				firstErr = err
			}
		}
	}
	for i, n := range o.nodes {
		each(i, func(w *world) error { w.m.UpsertNode(n); return nil })
	}
	for i, q := range o.queues {
		each(i, func(w *world) error {
			if w.queues {
				w.m.SetQueue(q)
			}
			return nil
		})
	}
	for i, r := range append(slices.Clone(o.running), o.waiting...) {
		each(i, func(w *world) error { w.m.SetGroup(r); return nil })
	}
	for i, p := range o.residents {
		each(i, func(w *world) error { w.m.UpsertPod(p); return nil })
	}
	for i, p := range slices.Concat(o.gangPods...) {
		each(i, func(w *world) error { w.m.UpsertPod(p); return nil })
	}
	each(0, func(w *world) error {
		if r := w.m.Filter(o.ordinary, o.names); len(r.Passing(o.names)) == 0 {
			return fmt.Errorf("%s: an ordinary 1-GPU pod fits no node: %v", w.name, firstReason(r))
		}
		return nil
	})
	for i, pods := range o.gangPods {
		each(i, func(w *world) error {
			r := w.m.Filter(pods[0], o.names)
			if len(r.Passing(o.names)) > 0 {
				return fmt.Errorf("%s: waiting gang %s/%s was admitted: its quorum must not fit", w.name, pods[0].Namespace, pods[0].Annotations[wellknown.AnnotationGroupName])
			}
			// Every gang must get past its queue and fail placement: the path that asks the
			// quota book and still plans, as the other world does.
			if why := firstReason(r); strings.Contains(why, "waits for its queue") || !strings.Contains(why, "nvidia.com/gpu") {
				return fmt.Errorf("%s: waiting gang must wait for capacity alone, not for its queue: %s", w.name, why)
			}
			return nil
		})
	}
	if firstErr != nil {
		return firstErr
	}
	for _, w := range worlds {
		if err := w.check(o); err != nil {
			return fmt.Errorf("%s: %w", w.name, err)
		}
	}
	return nil
}

// check confirms that the queues are enforced and every waiting gang is counted in its queue,
// or, without queues, that nothing is.
func (w *world) check(o *objects) error {
	views := w.m.Queues()
	defined, waiting := 0, 0
	var wanted placement.Resources
	for _, v := range views {
		if v.Defined {
			defined++
		}
		waiting += v.Waiting
		wanted = wanted.Add(v.Wanted)
	}
	if !w.queues {
		if defined != 0 || waiting != 0 {
			return fmt.Errorf("%d queues defined and %d gangs waiting in them where none should be", defined, waiting)
		}
		return nil
	}
	if defined != len(o.queues) || waiting != len(o.gangPods) {
		return fmt.Errorf("%d of %d queues defined, %d of %d gangs recorded waiting in them", defined, len(o.queues), waiting, len(o.gangPods))
	}
	var deserved, allocated placement.Resources
	for _, v := range views {
		deserved, allocated = deserved.Add(v.Deserved), allocated.Add(v.Allocated)
	}
	w.summary = fmt.Sprintf("queues world: %d queues defined, %d gangs waiting in them (asking %d GPUs), allocated %d GPUs, deserved %d GPUs in all",
		defined, waiting, wanted.GPU, allocated.GPU, deserved.GPU)
	return nil
}

func firstReason(r gang.FilterResult) string {
	for _, why := range r.Failed {
		return why
	}
	return ""
}

// --- measuring ----------------------------------------------------------------------------------

type verb struct {
	name string
	call func(w *world, o *objects) error
}

var verbs = []verb{
	{"filter, ordinary 1-GPU pod", func(w *world, o *objects) error {
		if r := w.m.Filter(o.ordinary, o.names); len(r.Passing(o.names)) == 0 {
			return fmt.Errorf("%s: the ordinary pod fits no node: %s", w.name, firstReason(r))
		}
		return nil
	}},
	{"filter, waiting gang member", func(w *world, o *objects) error {
		pods := o.gangPods[w.next%len(o.gangPods)]
		w.next++
		if r := w.m.Filter(pods[0], o.names); len(r.Passing(o.names)) > 0 {
			return fmt.Errorf("%s: pod %s passed: its gang must wait", w.name, pods[0].Name)
		}
		return nil
	}},
	{"prioritize, ordinary 1-GPU pod", func(w *world, o *objects) error {
		w.prio = w.m.Prioritize(o.ordinary, o.names, w.prio)
		if len(w.prio) != len(o.names) {
			return fmt.Errorf("%s: %d scores for %d nodes", w.name, len(w.prio), len(o.names))
		}
		return nil
	}},
}

// interleaved makes calls calls of verb in every world, the worlds taking turns batch by batch,
// which world goes first alternating; it returns each world's latencies.
func interleaved(worlds []*world, v verb, o *objects, c config) ([][]time.Duration, error) {
	lat := make([][]time.Duration, len(worlds))
	for k := range lat {
		lat[k] = make([]time.Duration, 0, c.calls)
	}
	for b := 0; b*c.batch < c.calls; b++ {
		n := min(c.batch, c.calls-b*c.batch)
		for i := range worlds {
			k := (i + b) % len(worlds)
			pprof.SetGoroutineLabels(worlds[k].labels)
			for range n {
				start := time.Now()
				err := v.call(worlds[k], o)
				lat[k] = append(lat[k], time.Since(start))
				if err != nil {
					return nil, err
				}
			}
		}
	}
	return lat, nil
}

// allocations measures what one call of verb allocates in world w: the least over a few rounds
// of n calls, since the process's count also takes in the managers' own sweeps, which now and
// then plan every waiting gang.
func allocations(w *world, v verb, o *objects, n int) (allocs, kb float64, err error) {
	pprof.SetGoroutineLabels(w.labels)
	allocs, kb = -1, -1
	for range 5 {
		var before, after runtime.MemStats
		runtime.ReadMemStats(&before)
		for range n {
			if err := v.call(w, o); err != nil {
				return 0, 0, err
			}
		}
		runtime.ReadMemStats(&after)
		a, b := float64(after.Mallocs-before.Mallocs)/float64(n), float64(after.TotalAlloc-before.TotalAlloc)/float64(n)/1024
		if allocs < 0 || a < allocs {
			allocs, kb = a, b
		}
	}
	return allocs, kb, nil
}

// rep is one repetition's latencies of one verb in both worlds.
type rep struct{ noQueues, queues []time.Duration }

type stats struct{ p50, p99, mean time.Duration }

func statsOf(lat []time.Duration) stats {
	s := slices.Clone(lat)
	slices.Sort(s)
	var sum time.Duration
	for _, d := range s {
		sum += d
	}
	return stats{p50: pct(s, 50), p99: pct(s, 99), mean: sum / time.Duration(len(s))}
}

func pct(sorted []time.Duration, p int) time.Duration {
	return sorted[min(len(sorted)-1, len(sorted)*p/100)]
}

// spread is a ratio over all repetitions' calls together, and its lowest and highest in single
// repetitions.
type spread struct{ all, lo, hi float64 }

func (s spread) String() string {
	return strconv.FormatFloat(s.all, 'f', 2, 64) + " (" + strconv.FormatFloat(s.lo, 'f', 2, 64) + "–" + strconv.FormatFloat(s.hi, 'f', 2, 64) + ")"
}

func ratioSpread(reps []rep, all float64, pick func(stats) time.Duration) spread {
	s := spread{all: all, lo: -1}
	for _, r := range reps {
		x := ratio(pick(statsOf(r.queues)), pick(statsOf(r.noQueues)))
		if s.lo < 0 || x < s.lo {
			s.lo = x
		}
		s.hi = max(s.hi, x)
	}
	return s
}

func ratio(a, b time.Duration) float64 {
	if b == 0 {
		return 0
	}
	return float64(a) / float64(b)
}

func report(c config, results [][]rep, allocs [][2][2]float64) {
	fmt.Printf("%d nodes, %d queues, %d waiting gangs; %d repetitions of %d calls per verb and world, in batches of %d taking turns.\n",
		c.nodes, c.queues, c.gangs, c.reps, c.calls, c.batch)
	fmt.Println("Each figure is over every repetition's calls; q/nq is queues / no queues, with its lowest and highest in a single repetition.")
	w := tabwriter.NewWriter(os.Stdout, 0, 0, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintln(w, "verb\tp50 no queues\tp50 queues\tq/nq (min–max)\tp99 no queues\tp99 queues\tq/nq (min–max)\tmean no queues\tmean queues\tq/nq (min–max)\t")
	type verdict struct {
		name      string
		p50, mean spread
	}
	var verdicts []verdict
	for v, reps := range results {
		var nq, q []time.Duration
		for _, r := range reps {
			nq, q = append(nq, r.noQueues...), append(q, r.queues...)
		}
		a, b := statsOf(nq), statsOf(q)
		p50 := ratioSpread(reps, ratio(b.p50, a.p50), func(s stats) time.Duration { return s.p50 })
		p99 := ratioSpread(reps, ratio(b.p99, a.p99), func(s stats) time.Duration { return s.p99 })
		mean := ratioSpread(reps, ratio(b.mean, a.mean), func(s stats) time.Duration { return s.mean })
		fmt.Fprintf(w, "%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t\n", verbs[v].name,
			ms(a.p50), ms(b.p50), p50, ms(a.p99), ms(b.p99), p99, ms(a.mean), ms(b.mean), mean)
		verdicts = append(verdicts, verdict{verbs[v].name, p50, mean})
	}
	_ = w.Flush()
	fmt.Println()
	w = tabwriter.NewWriter(os.Stdout, 0, 0, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintln(w, "verb\tallocs/call no queues\tallocs/call queues\tKB/call no queues\tKB/call queues\t")
	for v, a := range allocs {
		fmt.Fprintf(w, "%s\t%.0f\t%.0f\t%.1f\t%.1f\t\n", verbs[v].name, a[0][0], a[1][0], a[0][1], a[1][1])
	}
	_ = w.Flush()
	fmt.Println()
	for _, v := range verdicts {
		ok := v.p50.all <= target && v.mean.all <= target
		word := "PASS"
		if !ok {
			word = "MISS"
		}
		note := ""
		if ok && max(v.p50.hi, v.mean.hi) > target {
			note = fmt.Sprintf("; single repetitions reach %.2f", max(v.p50.hi, v.mean.hi))
		}
		fmt.Printf("%s  %s within 10%% of no queues (ratio <= %.2f): p50 %.2f, mean %.2f%s\n", word, v.name, target, v.p50.all, v.mean.all, note)
	}
}

func ms(d time.Duration) string {
	return strconv.FormatFloat(float64(d.Nanoseconds())/1e6, 'f', 3, 64) + "ms"
}
