package e2e

import (
	"bufio"
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"os"
	"regexp"
	"sort"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	schedulingv1 "k8s.io/api/scheduling/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/rand"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/tools/cache"

	"github.com/lockstep-sched/lockstep/dialect"
	"github.com/lockstep-sched/lockstep/placement"
	"github.com/lockstep-sched/lockstep/test/lib/builders"
	"github.com/lockstep-sched/lockstep/test/lib/cluster"
	"github.com/lockstep-sched/lockstep/test/lib/kubeletsim"
	"github.com/lockstep-sched/lockstep/test/lib/soak"
	"github.com/lockstep-sched/lockstep/views"
	"github.com/lockstep-sched/lockstep/wellknown"
)

// The soak plays scenarios drawn from a seed (package test/lib/soak) against the suite's control
// plane: each in its own namespace, on its own nodes, which only its pods select. While a scenario
// runs, an oracle of the soak's own reads the apiserver and /debug/gangs every soakTick and fails
// it on the first promise lockstep breaks:
//  1. no gang stays partly bound longer than a commit takes;
//  2. waiting work that fits the free capacity binds (soak.Walk says what fits), and a
//     reservation whose members all exist completes;
//  3. lockstep forgets a gang once its pods are gone;
//  4. lockstep's count of a gang's bound members agrees with the apiserver's;
//
// and, underneath them all, lockstep keeps answering.
//
// A failure prints the seed, the scenario, the transcript of what was done, the oracle's model and
// lines that replay the scenario: alone, and with the scenarios that ran beside it (lockstep
// sees every scenario's pods and nodes at once, so a neighbour can be part of a failure).

var (
	soakSeed      = flag.Int64("soak.seed", 1, "the first seed of the soak's scenarios")
	soakSeeds     = flag.Int("soak.seeds", 1, "how many consecutive seeds the soak plays")
	soakScenarios = flag.Int("soak.scenarios", 16, "how many scenarios the soak plays per seed")
	soakOnly      = flag.String("soak.only", "", "play only these scenario indices of each seed, comma-separated (a replay)")
	soakParallel  = flag.Int("soak.parallel", 2, "how many scenarios play at once")
	// soakTranscripts logs every scenario's transcript, not only a failed one's: to see what a
	// passing seed did.
	soakTranscripts = flag.Bool("soak.transcripts", false, "log the transcript of every scenario")
)

const (
	soakTick = 250 * time.Millisecond
	// soakCommitWindow: a commit binds a quorum in milliseconds; a gang partly bound longer than
	// this is not in the middle of one.
	soakCommitWindow = 5 * time.Second
	// soakOwedWithin: kube-scheduler retries a pod at most podMaxBackoffSeconds (10s) after it
	// was turned away.
	soakOwedWithin      = 10 * time.Second
	soakReservingWithin = 15 * time.Second
	soakForgetWithin    = 5 * time.Second
	soakAgreeWithin     = 5 * time.Second
	soakEndWithin       = 15 * time.Second
	// soakAnswerWithin: lockstep answers /debug/gangs in milliseconds; one that has not
	// answered for this long is hung.
	soakAnswerWithin = 15 * time.Second
	// soakCallTimeout bounds each call the soak makes, so that a hung lockstep fails the
	// scenario rather than hangs it.
	soakCallTimeout = 5 * time.Second
	// soakSettleAtMost bounds the quiet time after the last step: every job runs at most
	// soak.MaxRun once bound, so by then what could run has run.
	soakSettleAtMost = 25 * time.Second

	soakNodeLabel = "soak.lockstep.dev/scenario"
	soakGangLabel = "soak.lockstep.dev/gang"
)

// soakClasses are the PriorityClasses of soak.Low, soak.Mid and soak.High.
var soakClasses = [...]struct {
	name  string
	value int32
}{{"soak-low", 200}, {"soak-mid", 500}, {"soak-high", 800}}

func TestSoak(t *testing.T) {
	installCRDs(t)
	ensureSoakPriorityClasses(t)
	tally := &soakTally{failures: map[string]int{}, longest: map[string]soakSpell{}}
	began := time.Now()
	for seed := *soakSeed; seed < *soakSeed+int64(*soakSeeds); seed++ {
		t.Run(fmt.Sprintf("seed%d", seed), func(t *testing.T) { playSoakSeed(t, seed, tally) })
	}
	t.Logf("soak summary:\n%s", tally.table(time.Since(began)))
}

// playSoakSeed plays the seed's scenarios, soakParallel at a time. The subtests are started from
// worker goroutines rather than with t.Parallel: that one is capped by go test's -parallel
// (GOMAXPROCS, 2 on the suite's machines), and -soak.parallel must mean what it says.
func playSoakSeed(t *testing.T, seed int64, tally *soakTally) {
	indices := soakIndices(t)
	work := make(chan int)
	var wg sync.WaitGroup
	for range min(max(*soakParallel, 1), len(indices)) {
		wg.Go(func() {
			for k := range work {
				t.Run(fmt.Sprintf("scenario%d", k), func(t *testing.T) {
					playSoakScenario(t, soak.Generate(seed, k), tally)
				})
			}
		})
	}
	for _, k := range indices {
		work <- k
	}
	close(work)
	wg.Wait()
}

func soakIndices(t *testing.T) []int {
	if *soakOnly == "" {
		out := make([]int, *soakScenarios)
		for i := range out {
			out[i] = i
		}
		return out
	}
	var out []int
	for _, f := range strings.Split(*soakOnly, ",") {
		k, err := strconv.Atoi(strings.TrimSpace(f))
		require.NoError(t, err, "-soak.only=%q: a comma-separated list of scenario indices", *soakOnly)
		out = append(out, k)
	}
	return out
}

// soakRunning are the scenarios playing now; each run remembers which others played while it
// did, for its replay line.
var soakRunning struct {
	sync.Mutex
	runs map[*soakRun]bool
}

func (r *soakRun) register() {
	soakRunning.Lock()
	defer soakRunning.Unlock()
	if soakRunning.runs == nil {
		soakRunning.runs = map[*soakRun]bool{}
	}
	r.beside = map[int]bool{}
	for o := range soakRunning.runs {
		o.beside[r.sc.Index] = true
		r.beside[o.sc.Index] = true
	}
	soakRunning.runs[r] = true
}

func (r *soakRun) unregister() {
	soakRunning.Lock()
	defer soakRunning.Unlock()
	delete(soakRunning.runs, r)
}

// replays are the command lines that play the scenario again: alone, and with the scenarios
// that played beside it.
func (r *soakRun) replays() string {
	base := fmt.Sprintf("go test -race -run 'TestSoak' ./test/e2e/ -args -soak.seed=%d -soak.only=", r.sc.Seed)
	out := "replay alone:       " + base + strconv.Itoa(r.sc.Index) + "\n"
	soakRunning.Lock()
	indices := []int{r.sc.Index}
	for k := range r.beside {
		indices = append(indices, k)
	}
	soakRunning.Unlock()
	if len(indices) == 1 {
		return out
	}
	sort.Ints(indices)
	list := make([]string, len(indices))
	for i, k := range indices {
		list[i] = strconv.Itoa(k)
	}
	return out + fmt.Sprintf("replay with company: %s%s -soak.parallel=%d\n", base, strings.Join(list, ","), *soakParallel)
}

// ensureSoakPriorityClasses creates the soak's classes and waits until the apiserver's Priority
// admission knows them (it reads classes from an informer): a dry-run pod naming each must pass.
func ensureSoakPriorityClasses(t *testing.T) {
	ctx := context.Background()
	for _, c := range soakClasses {
		pc := &schedulingv1.PriorityClass{ObjectMeta: metav1.ObjectMeta{Name: c.name}, Value: c.value}
		_, err := env.client.SchedulingV1().PriorityClasses().Create(ctx, pc, metav1.CreateOptions{})
		if !apierrors.IsAlreadyExists(err) {
			require.NoError(t, err, "creating PriorityClass %s", c.name)
		}
		probe := builders.Pod("default", "soak-priority-probe").UID("").Obj()
		probe.Spec.PriorityClassName = c.name
		err = wait.PollUntilContextTimeout(ctx, 250*time.Millisecond, 30*time.Second, true, func(ctx context.Context) (bool, error) {
			_, err := env.client.CoreV1().Pods("default").Create(ctx, probe, metav1.CreateOptions{DryRun: []string{metav1.DryRunAll}})
			return err == nil, nil
		})
		require.NoError(t, err, "PriorityClass %s known to admission", c.name)
	}
}

// soakTally adds up what every scenario did, for the table TestSoak ends with.
type soakTally struct {
	mu                                             sync.Mutex
	scenarios, steps, gangs, pods, evictions, fail int
	crossEvictions, notPlayed                      int
	failures                                       map[string]int
	// longest is the longest run of each of the oracle's conditions that ended well, over
	// every scenario: the margin left before the limits.
	longest map[string]soakSpell
}

func (t *soakTally) add(r *soakRun) {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.scenarios++
	t.steps += r.stats.steps
	t.gangs += r.stats.gangs
	t.pods += r.stats.pods
	t.evictions += r.stats.evictions
	t.crossEvictions += r.stats.crossEvictions
	if r.failedCheck != "" {
		t.fail++
		t.failures[r.failedCheck]++
	}
	for kind, l := range r.oracle.longest {
		if l.d > t.longest[kind].d {
			l.where = fmt.Sprintf("%s, seed %d scenario %d", l.where, r.sc.Seed, r.sc.Index)
			t.longest[kind] = l
		}
	}
}

func (t *soakTally) skipped() {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.notPlayed++
}

func (t *soakTally) table(took time.Duration) string {
	t.mu.Lock()
	defer t.mu.Unlock()
	var b strings.Builder
	row := func(what string, n any) { fmt.Fprintf(&b, "  %-26s %v\n", what, n) }
	row("scenarios played", t.scenarios)
	row("scenarios failed", t.fail)
	if t.notPlayed > 0 {
		row("not played (lockstep hung)", t.notPlayed)
	}
	row("steps", t.steps)
	row("gangs", t.gangs)
	row("pods created", t.pods)
	row("evictions seen", t.evictions)
	row("of them for another scenario", t.crossEvictions)
	for _, check := range soakChecks {
		row(check, t.failures[check])
	}
	for _, c := range []struct{ kind, what string }{
		{"owed", "longest wait of fitting work"}, {"partial", "longest partial gang"},
		{"reserving", "longest full reservation"}, {"agree", "longest disagreement"},
	} {
		l := t.longest[c.kind]
		if l.d == 0 {
			row(c.what, "none")
			continue
		}
		row(c.what, fmt.Sprintf("%s (%s)", l.d.Round(100*time.Millisecond), l.where))
	}
	row("time taken", took.Round(time.Second))
	return b.String()
}

// The oracle's checks, as failures name them.
const (
	checkPartial   = "partial gangs"
	checkStall     = "stalls"
	checkReserving = "reservations stuck"
	checkForgotten = "gangs not forgotten"
	checkDisagrees = "bound counts disagreeing"
	checkSilent    = "lockstep not answering"
	checkHarness   = "harness errors"
)

var soakChecks = []string{checkPartial, checkStall, checkReserving, checkForgotten, checkDisagrees, checkSilent, checkHarness}

// soakLockstepHung says why lockstep stopped answering, once a scenario found it so: the
// scenarios after it are not played against a process that no longer schedules.
var soakLockstepHung atomic.Pointer[string]

// soakRun is one scenario being played.
type soakRun struct {
	t     *testing.T
	s     *scenario
	sc    soak.Scenario
	dyn   dynamic.Interface
	began time.Time
	step  int
	log   []string

	nodes    []*soakNode
	gangs    map[string]*soakGang
	ordinary map[string]*soakPod
	// groupsDue are the group objects to create once their time comes.
	groupsDue []*soakGang

	// mu guards what the pod watch shares with the scenario's goroutine.
	mu     sync.Mutex
	ours   map[string]bool // pods the soak itself deleted
	gone   []*corev1.Pod   // pods someone else deleted, not yet handled
	ending bool

	oracle      soakOracle
	standin     *kubeletsim.Standin
	failedCheck string
	stats       struct{ steps, gangs, pods, evictions, crossEvictions int }
	// unattributed are evictions whose preemptor is yet to be read.
	unattributed []soakEviction
	// silentSince is when lockstep stopped answering /debug/gangs; zero while it answers.
	silentSince time.Time
	// beside are the scenarios that played while this one did (guarded by soakRunning).
	beside map[int]bool
}

// soakEviction is a pod lockstep evicted, whose Preempted event names the gang it was evicted
// for; lockstep writes events after it evicts, through a rate-limited client, so the event may
// come later than the pod goes.
type soakEviction struct {
	pod string
	at  time.Time
}

type soakNode struct {
	name     string
	cordoned bool
	removed  bool
}

type soakGang struct {
	soak.Gang
	next       int // the index the next member's name takes
	groupMade  bool
	deleting   bool // the soak began deleting it (the job ended, or it restarts)
	restarting bool // once its members are gone, the soak creates them anew
	gone       bool
	quorumAt   time.Time
}

type soakPod struct {
	soak.Pod
	boundAt  time.Time
	deleting bool
	gone     bool
}

func playSoakScenario(t *testing.T, sc soak.Scenario, tally *soakTally) {
	if why := soakLockstepHung.Load(); why != nil {
		tally.skipped()
		t.Fatalf("not played: %s", *why)
	}
	r := &soakRun{t: t, s: newSoakScenario(t), sc: sc, gangs: map[string]*soakGang{}, ordinary: map[string]*soakPod{},
		ours: map[string]bool{}, oracle: newSoakOracle()}
	defer tally.add(r)
	r.register()
	defer r.unregister()
	r.dyn = r.s.dyn()
	for _, n := range sc.Nodes {
		r.addNode(n)
	}
	var err error
	r.standin, err = kubeletsim.Start(r.s.ctx, env.client, r.s.ns)
	require.NoError(t, err)
	watchPods(t, r.s.ctx, r.s.ns, cache.ResourceEventHandlerFuncs{DeleteFunc: r.podGone})
	r.began = time.Now()
	r.play()
	r.settle()
	r.end()
	t.Logf("seed %d scenario %d: %d steps, %d gangs, %d pods, %d evictions in %s",
		sc.Seed, sc.Index, r.stats.steps, r.stats.gangs, r.stats.pods, r.stats.evictions, time.Since(r.began).Round(100*time.Millisecond))
	if *soakTranscripts {
		t.Logf("transcript (namespace %s):\n  %s", r.s.ns, strings.Join(r.log, "\n  "))
	}
}

// newSoakScenario is newScenarioWithNodes without nodes (the soak adds its own, labelled for its
// pods) and with a cleanup that cannot hang: the framework's reads /debug/gangs without a
// deadline once a test failed, and a lockstep that stopped answering is among the failures the
// soak is there to find.
func newSoakScenario(t *testing.T) *scenario {
	ctx, cancel := context.WithCancel(context.Background())
	s := &scenario{t: t, ctx: ctx, ns: "e2e-" + strings.ToLower(rand.String(5))}
	_, err := env.client.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: s.ns}}, metav1.CreateOptions{})
	require.NoError(t, err)
	t.Cleanup(func() {
		s.deleteAllPods()
		s.removeNodesAndNamespace()
		cancel()
	})
	return s
}

// play runs the steps at their times, tending the scenario (and checking it) in between.
func (r *soakRun) play() {
	due := r.began
	for i, st := range r.sc.Steps {
		due = due.Add(st.After)
		for time.Now().Before(due) {
			r.pause(due)
			r.tend()
		}
		r.step = i + 1
		r.stats.steps++
		r.do(st)
		r.tend()
	}
}

// pause waits for the next tick or until, whichever is sooner: the steps' gaps are the
// scenario's content, the ticks the oracle's pace.
func (r *soakRun) pause(until time.Time) {
	d := min(soakTick, time.Until(until))
	if d <= 0 {
		return
	}
	select {
	case <-time.After(d):
	case <-r.s.ctx.Done():
	}
}

// settle lets the jobs run out after the last step, until nothing is bound or owed any more.
func (r *soakRun) settle() {
	deadline := time.Now().Add(soakSettleAtMost)
	for time.Now().Before(deadline) {
		r.pause(time.Now().Add(soakTick))
		o := r.tend()
		if o != nil && o.quiet() && len(r.groupsDue) == 0 && !r.restartsPending() {
			return
		}
	}
}

// end deletes what is left and checks that lockstep forgets every gang of the namespace.
func (r *soakRun) end() {
	r.mu.Lock()
	r.ending = true
	r.mu.Unlock()
	r.note("end: delete every pod and group object")
	r.s.deleteAllPods()
	for _, g := range r.sortedGangs() {
		if g.groupMade {
			r.deleteGroup(g)
		}
	}
	var left []string
	var lastErr error
	err := wait.PollUntilContextTimeout(r.s.ctx, soakTick, soakEndWithin, true, func(ctx context.Context) (bool, error) {
		gangs, err := env.lockstep.Gangs(ctx, r.s.ns)
		left, lastErr = left[:0], err
		for _, g := range gangs {
			left = append(left, fmt.Sprintf("%s (%s, %d members, bound %d)", g.Name, g.Phase, len(g.Members), g.Bound))
		}
		return err == nil && len(gangs) == 0, nil
	})
	switch {
	case err != nil && lastErr != nil:
		r.fail(checkSilent, fmt.Sprintf("lockstep's /debug/gangs did not answer at the scenario's end: %v\n\nlockstep's last panic:\n%s", lastErr, soakLastPanic()), nil)
	case err != nil:
		r.fail(checkForgotten, fmt.Sprintf("%s after every pod of the namespace was deleted, lockstep still lists: %s",
			soakEndWithin, strings.Join(left, ", ")), nil)
	}
	if err := r.standin.Err(); err != nil {
		r.t.Logf("kubelet stand-in: %v", err)
	}
}

// tend is one round: handle what others deleted, create what is due, end the jobs whose time
// is up, then judge. It returns the round's observation, nil when the apiserver could not be read.
func (r *soakRun) tend() *soakObs {
	r.recreateGone()
	r.attributeEvictions()
	r.createDueGroups()
	o := r.observe()
	if o == nil {
		return nil
	}
	r.follow(o)
	r.judge(o)
	return o
}

// note adds a line to the transcript, stamped with the time since the scenario began.
func (r *soakRun) note(format string, args ...any) {
	line := fmt.Sprintf("t=%4.1fs ", time.Since(r.began).Seconds())
	if r.step > 0 {
		line += fmt.Sprintf("[step %d] ", r.step)
	}
	r.log = append(r.log, line+fmt.Sprintf(format, args...))
}

// --- steps ---

func (r *soakRun) do(st soak.Step) {
	switch st.Kind {
	case soak.CreateGang:
		r.createGang(st.Gang)
	case soak.CreatePods:
		for _, p := range st.Pods {
			r.createOrdinary(p)
		}
	case soak.DeleteGang:
		if g := soakPick(r.liveGangs(), st.Pick); g != nil {
			r.deleteGang(g, "delete gang "+g.Name)
		} else {
			r.note("delete gang: none left to delete")
		}
	case soak.DeletePod:
		if p := soakPick(r.liveOrdinary(), st.Pick); p != nil {
			r.note("delete pod %s", p.Name)
			p.deleting = true
			r.deletePod(p.Name, false)
		} else {
			r.note("delete pod: none left to delete")
		}
	case soak.AddNode:
		r.addNode(st.GPUs)
	case soak.Cordon:
		r.setCordon(soakPick(r.liveNodes(false), st.Pick), true)
	case soak.Uncordon:
		r.setCordon(soakPick(r.liveNodes(true), st.Pick), false)
	case soak.RemoveNode:
		if live := r.liveNodes(false); len(live)+len(r.liveNodes(true)) > 1 {
			r.removeNode(soakPick(append(live, r.liveNodes(true)...), st.Pick))
		} else {
			r.note("remove node: only one node left, kept")
		}
	}
}

// soakPick is the step's choice among what exists, nil when nothing does.
func soakPick[T any](list []*T, pick int) *T {
	if len(list) == 0 {
		return nil
	}
	return list[pick%len(list)]
}

func (r *soakRun) addNode(gpus int) {
	n := &soakNode{name: fmt.Sprintf("%s-n%d", strings.TrimPrefix(r.s.ns, "e2e-"), len(r.nodes))}
	_, err := env.cluster.CreateNode(r.s.ctx, cluster.NodeSpec{Name: n.name, GPUs: gpus, Labels: map[string]string{soakNodeLabel: r.s.ns}})
	require.NoError(r.t, err)
	r.s.nodes = append(r.s.nodes, n.name) // the scenario's cleanup deletes it
	r.nodes = append(r.nodes, n)
	if !r.began.IsZero() {
		r.note("add node %s (%d GPUs)", n.name, gpus)
	}
}

// liveNodes are the nodes not removed, cordoned or not as asked.
func (r *soakRun) liveNodes(cordoned bool) []*soakNode {
	var out []*soakNode
	for _, n := range r.nodes {
		if !n.removed && n.cordoned == cordoned {
			out = append(out, n)
		}
	}
	return out
}

func (r *soakRun) setCordon(n *soakNode, on bool) {
	if n == nil {
		r.note("cordon=%t: no node to change", on)
		return
	}
	patch := fmt.Sprintf(`{"spec":{"unschedulable":%t}}`, on)
	_, err := env.client.CoreV1().Nodes().Patch(r.s.ctx, n.name, types.MergePatchType, []byte(patch), metav1.PatchOptions{})
	require.NoError(r.t, err)
	n.cordoned = on
	r.note("%s node %s", map[bool]string{true: "cordon", false: "uncordon"}[on], n.name)
}

// removeNode takes a node away as its loss would: its pods are force-deleted first, and every
// gang with a member there restarts whole, as a job controller restarts a job that lost a worker.
func (r *soakRun) removeNode(n *soakNode) {
	list, err := env.client.CoreV1().Pods(r.s.ns).List(r.s.ctx, metav1.ListOptions{FieldSelector: "spec.nodeName=" + n.name})
	require.NoError(r.t, err)
	var forced []string
	hit := map[string]bool{}
	for _, p := range list.Items {
		forced = append(forced, p.Name)
		r.deletePod(p.Name, true)
		if name := p.Labels[soakGangLabel]; name != "" {
			hit[name] = true
		} else if op := r.ordinary[p.Name]; op != nil {
			op.deleting = true
		}
	}
	sort.Strings(forced)
	r.note("remove node %s: force-deleted %s", n.name, strings.Join(forced, ", "))
	for _, g := range r.sortedGangs() {
		if hit[g.Name] && !g.gone {
			r.restartGang(g)
		}
	}
	require.NoError(r.t, env.client.CoreV1().Nodes().Delete(r.s.ctx, n.name, metav1.DeleteOptions{}))
	n.removed = true
}

// --- gangs and pods ---

func (r *soakRun) createGang(spec soak.Gang) {
	g := &soakGang{Gang: spec}
	r.gangs[g.Name] = g
	r.stats.gangs++
	r.note("create %s", spec)
	if spec.Dialect.HasGroup() && spec.GroupAfter == 0 {
		r.createGroup(g)
	}
	r.createMembers(g, spec.Members)
	if spec.Dialect.HasGroup() && spec.GroupAfter > 0 {
		r.groupsDue = append(r.groupsDue, g)
	}
	r.oracle.sawMembers(g.Name, time.Now())
}

func (r *soakRun) createMembers(g *soakGang, n int) []string {
	names := make([]string, 0, n)
	for range n {
		name := fmt.Sprintf("%s-%d", g.Name, g.next)
		g.next++
		r.createPod(r.memberPod(g, name), g.Priority)
		names = append(names, name)
	}
	return names
}

// memberPod is a member in its gang's dialect, on the scenario's nodes only.
func (r *soakRun) memberPod(g *soakGang, name string) *corev1.Pod {
	b := r.podBuilder(name, g.GPUs).Label(soakGangLabel, g.Name)
	switch g.Dialect {
	case soak.Koordinator:
		b.Gang(g.Name, g.MinAvailable)
	case soak.Lightweight:
		b.Label(wellknown.LabelLightweightGangName, g.Name).Label(wellknown.LabelLightweightMinAvailable, strconv.Itoa(g.MinAvailable))
	case soak.SchedulerPlugins:
		b.Label(wellknown.LabelCoschedulingPodGroup, g.Name)
	case soak.Volcano:
		b.Annotation(wellknown.AnnotationGroupName, g.Name)
	}
	if g.KeepExtras {
		b.Annotation(wellknown.AnnotationKeepExtras, "true")
	}
	return b.Obj()
}

func (r *soakRun) podBuilder(name string, gpus int) *builders.PodBuilder {
	b := builders.Pod(r.s.ns, name).UID("").CPU("100m").Memory("64Mi").NodeSelector(soakNodeLabel, r.s.ns)
	if gpus > 0 {
		b.GPU(int64(gpus))
	}
	return b
}

func (r *soakRun) createPod(p *corev1.Pod, prio soak.Priority) {
	p.Spec.PriorityClassName = soakClasses[prio].name
	_, err := env.client.CoreV1().Pods(r.s.ns).Create(r.s.ctx, p, metav1.CreateOptions{})
	require.NoError(r.t, err, "creating pod %s", p.Name)
	r.stats.pods++
}

// soakOrdinaryPriority spreads ordinary pods over the classes by name, so that the generator
// needs no field for it and the choice still replays.
func soakOrdinaryPriority(p soak.Pod) soak.Priority {
	n, _ := strconv.Atoi(strings.TrimPrefix(p.Name, "p"))
	return soak.Priority(n % 3)
}

func (r *soakRun) createOrdinary(p soak.Pod) {
	r.ordinary[p.Name] = &soakPod{Pod: p}
	r.note("create pod %s, priority %s", p, soakOrdinaryPriority(p))
	r.createPod(r.podBuilder(p.Name, p.GPUs).Obj(), soakOrdinaryPriority(p))
}

func soakGroupAPI(d soak.Dialect) dialect.API {
	if d == soak.Volcano {
		return dialect.Volcano
	}
	return dialect.Coscheduling
}

func (r *soakRun) createGroup(g *soakGang) {
	api := soakGroupAPI(g.Dialect)
	obj := &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": api.Resource.GroupVersion().String(), "kind": "PodGroup",
		"metadata": map[string]any{"name": g.Name, "namespace": r.s.ns},
		"spec":     map[string]any{"minMember": int64(g.MinAvailable)},
	}}
	_, err := r.dyn.Resource(api.Resource).Namespace(r.s.ns).Create(r.s.ctx, obj, metav1.CreateOptions{})
	require.NoError(r.t, err, "creating %s PodGroup %s", g.Dialect, g.Name)
	g.groupMade = true
	if g.GroupAfter > 0 {
		r.note("create %s PodGroup %s, after its pods", g.Dialect, g.Name)
	}
}

func (r *soakRun) deleteGroup(g *soakGang) {
	err := r.dyn.Resource(soakGroupAPI(g.Dialect).Resource).Namespace(r.s.ns).Delete(context.Background(), g.Name, metav1.DeleteOptions{})
	if err != nil && !apierrors.IsNotFound(err) {
		r.t.Logf("deleting PodGroup %s: %v", g.Name, err)
	}
}

func (r *soakRun) createDueGroups() {
	keep := r.groupsDue[:0]
	for _, g := range r.groupsDue {
		switch {
		case g.deleting && !g.restarting:
		case time.Since(r.began) >= r.createdAt(g)+g.GroupAfter:
			r.createGroup(g)
		default:
			keep = append(keep, g)
		}
	}
	r.groupsDue = keep
}

// createdAt is when the step that created the gang ran, relative to the scenario's start.
func (r *soakRun) createdAt(g *soakGang) time.Duration {
	var at time.Duration
	for _, st := range r.sc.Steps {
		at += st.After
		if st.Kind == soak.CreateGang && st.Gang.Name == g.Name {
			return at
		}
	}
	return 0
}

// deletePod deletes a pod the soak is done with: gracefully, as a job ending does (the stand-in
// finishes bound ones), or at once, as for a node that is lost.
func (r *soakRun) deletePod(name string, force bool) {
	r.mu.Lock()
	r.ours[name] = true
	r.mu.Unlock()
	opts := metav1.DeleteOptions{}
	if force {
		opts.GracePeriodSeconds = new(int64)
	}
	err := env.client.CoreV1().Pods(r.s.ns).Delete(r.s.ctx, name, opts)
	if err != nil && !apierrors.IsNotFound(err) {
		require.NoError(r.t, err, "deleting pod %s", name)
	}
}

func (r *soakRun) memberNames(g *soakGang) []string {
	list, err := env.client.CoreV1().Pods(r.s.ns).List(r.s.ctx, metav1.ListOptions{LabelSelector: soakGangLabel + "=" + g.Name})
	require.NoError(r.t, err)
	var names []string
	for _, p := range list.Items {
		names = append(names, p.Name)
	}
	sort.Strings(names)
	return names
}

// deleteGang ends a job: every member and its group object go.
func (r *soakRun) deleteGang(g *soakGang, why string) {
	names := r.memberNames(g)
	r.note("%s: delete %s", why, strings.Join(names, ", "))
	g.deleting = true
	for _, name := range names {
		r.deletePod(name, false)
	}
	if g.groupMade {
		r.deleteGroup(g)
		g.groupMade = false
	}
}

// restartGang deletes the gang's members and, once they are gone, creates them anew under the
// same gang (recreateRestarted).
func (r *soakRun) restartGang(g *soakGang) {
	names := r.memberNames(g)
	r.note("gang %s lost a member with the node: restart, delete %s", g.Name, strings.Join(names, ", "))
	g.deleting, g.restarting, g.quorumAt = true, true, time.Time{}
	for _, name := range names {
		r.deletePod(name, false)
	}
}

func (r *soakRun) restartsPending() bool {
	for _, g := range r.gangs {
		if g.restarting {
			return true
		}
	}
	return false
}

func (r *soakRun) liveGangs() []*soakGang {
	var out []*soakGang
	for _, g := range r.sortedGangs() {
		if !g.deleting && !g.gone {
			out = append(out, g)
		}
	}
	return out
}

func (r *soakRun) sortedGangs() []*soakGang {
	out := make([]*soakGang, 0, len(r.gangs))
	for _, g := range r.gangs {
		out = append(out, g)
	}
	sort.Slice(out, func(i, j int) bool { return soakNameLess(out[i].Name, out[j].Name) })
	return out
}

func (r *soakRun) liveOrdinary() []*soakPod {
	var out []*soakPod
	for _, p := range r.ordinary {
		if !p.deleting && !p.gone {
			out = append(out, p)
		}
	}
	sort.Slice(out, func(i, j int) bool { return soakNameLess(out[i].Name, out[j].Name) })
	return out
}

// soakNameLess orders g2 before g10.
func soakNameLess(a, b string) bool {
	if len(a) != len(b) {
		return len(a) < len(b)
	}
	return a < b
}

// --- what others deleted ---

// podGone sees a pod leave the apiserver. One the soak did not delete was evicted (by lockstep's
// gang preemption or eviction of members beyond a quorum) or preempted by kube-scheduler.
func (r *soakRun) podGone(obj any) {
	if d, ok := obj.(cache.DeletedFinalStateUnknown); ok {
		obj = d.Obj
	}
	p, ok := obj.(*corev1.Pod)
	if !ok {
		return
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	if !r.ours[p.Name] && !r.ending {
		r.gone = append(r.gone, p)
	}
}

// recreateGone replaces each evicted gang member under a new name with the same markers, as a
// job controller would; an evicted ordinary pod has no controller and stays gone.
func (r *soakRun) recreateGone() {
	r.mu.Lock()
	gone := r.gone
	r.gone = nil
	r.mu.Unlock()
	for _, p := range gone {
		r.stats.evictions++
		how := soakDeletedHow(p)
		if strings.Contains(how, "EvictionByEvictionAPI") {
			r.unattributed = append(r.unattributed, soakEviction{pod: p.Name, at: time.Now()})
		}
		g := r.gangs[p.Labels[soakGangLabel]]
		switch {
		case g != nil && !g.deleting && !g.gone:
			r.note("pod %s (on %s) %s; recreated as %s", p.Name, p.Spec.NodeName, how, strings.Join(r.createMembers(g, 1), ""))
		case g != nil:
			r.note("pod %s (on %s) %s; its gang is being deleted", p.Name, p.Spec.NodeName, how)
		default:
			if op := r.ordinary[p.Name]; op != nil {
				op.gone = true
			}
			r.note("pod %s (on %s) %s", p.Name, p.Spec.NodeName, how)
		}
	}
}

// attributeEvictions reads whom each eviction was for. The scenario's pods select its own nodes
// only, so an eviction for a gang of another scenario freed nothing that gang could use.
func (r *soakRun) attributeEvictions() {
	keep := r.unattributed[:0]
	for _, e := range r.unattributed {
		by := r.preemptor(e.pod)
		switch {
		case by != "" && !strings.HasPrefix(by, r.s.ns+"/"):
			r.stats.crossEvictions++
			r.note("pod %s was evicted for gang %s of another scenario, whose pods cannot use this scenario's nodes", e.pod, by)
		case by == "" && time.Since(e.at) < soakForgetWithin:
			keep = append(keep, e)
		}
	}
	r.unattributed = keep
}

var soakPreemptorRE = regexp.MustCompile(`(?:preempted by|reclaimed for) gang (\S+)`)

// preemptor is the gang the pod's Preempted event says it was evicted for, "" when none says.
func (r *soakRun) preemptor(pod string) string {
	list, err := env.client.CoreV1().Events(r.s.ns).List(r.s.ctx, metav1.ListOptions{
		FieldSelector: "involvedObject.name=" + pod + ",reason=" + wellknown.ReasonPreempted,
	})
	if err != nil {
		return ""
	}
	for _, e := range list.Items {
		if m := soakPreemptorRE.FindStringSubmatch(e.Message); m != nil {
			return m[1]
		}
	}
	return ""
}

// soakDeletedHow reads who deleted a pod from the DisruptionTarget condition the eviction or
// the scheduler's preemption wrote.
func soakDeletedHow(p *corev1.Pod) string {
	for _, c := range p.Status.Conditions {
		if c.Type == corev1.DisruptionTarget {
			return "deleted (" + c.Reason + ": " + c.Message + ")"
		}
	}
	return "deleted by someone else"
}

// --- observation ---

// soakObs is one reading of the scenario's state: the apiserver's and lockstep's.
type soakObs struct {
	at       time.Time
	pods     []corev1.Pod
	nodes    []corev1.Node
	statuses map[string]views.GangStatus
	raw      string
	byGang   map[string]*soakGangPods
	verdicts []soak.Verdict
	model    []soak.Node
	extras   []soak.Extra
}

// soakGangPods are a gang's pods as the apiserver has them.
type soakGangPods struct {
	all         []*corev1.Pod
	live        []*corev1.Pod // bound and not terminating, oldest first
	pending     []*corev1.Pod // neither bound nor terminating
	bound       int           // bound, terminating or not: what lockstep counts
	terminating int
}

func (r *soakRun) observe() *soakObs {
	o := &soakObs{at: time.Now()}
	ctx, cancel := context.WithTimeout(r.s.ctx, soakCallTimeout)
	defer cancel()
	pods, err := env.client.CoreV1().Pods(r.s.ns).List(ctx, metav1.ListOptions{})
	if err != nil {
		return nil
	}
	nodes, err := env.client.CoreV1().Nodes().List(ctx, metav1.ListOptions{LabelSelector: soakNodeLabel + "=" + r.s.ns})
	if err != nil {
		return nil
	}
	raw, err := r.gangsJSON()
	if err != nil {
		r.silent(err)
		return nil
	}
	r.silentSince = time.Time{}
	var list []views.GangStatus
	if err := json.Unmarshal(raw, &list); err != nil {
		r.fail(checkHarness, fmt.Sprintf("/debug/gangs does not decode: %v", err), nil)
	}
	o.pods, o.nodes, o.raw = pods.Items, nodes.Items, string(raw)
	o.index(list)
	return o
}

// index sorts the pods by age as lockstep does (creation, then name: decide.OlderThan)
// and files them and lockstep's statuses by gang.
func (o *soakObs) index(list []views.GangStatus) {
	sort.Slice(o.pods, func(i, j int) bool {
		a, b := &o.pods[i], &o.pods[j]
		if !a.CreationTimestamp.Equal(&b.CreationTimestamp) {
			return a.CreationTimestamp.Before(&b.CreationTimestamp)
		}
		return a.Name < b.Name
	})
	o.statuses = map[string]views.GangStatus{}
	for _, st := range list {
		o.statuses[st.Name] = st
	}
	o.byGang = map[string]*soakGangPods{}
	for i := range o.pods {
		p := &o.pods[i]
		name := p.Labels[soakGangLabel]
		if name == "" {
			continue
		}
		if o.byGang[name] == nil {
			o.byGang[name] = &soakGangPods{}
		}
		o.byGang[name].add(p)
	}
}

// gangsJSON is /debug/gangs for the namespace, read within soakCallTimeout.
func (r *soakRun) gangsJSON() (json.RawMessage, error) {
	ctx, cancel := context.WithTimeout(r.s.ctx, soakCallTimeout)
	defer cancel()
	return env.lockstep.GangsJSON(ctx, r.s.ns)
}

// silent notes that lockstep did not answer, and fails the scenario once it has not for
// soakAnswerWithin.
func (r *soakRun) silent(err error) {
	if r.silentSince.IsZero() {
		r.silentSince = time.Now()
	}
	if d := time.Since(r.silentSince); d > soakAnswerWithin {
		why := fmt.Sprintf("lockstep's /debug/gangs has not answered for %s (seed %d scenario %d): %v", d.Round(time.Second), r.sc.Seed, r.sc.Index, err)
		soakLockstepHung.CompareAndSwap(nil, &why)
		r.fail(checkSilent, why+"\n\nlockstep's last panic:\n"+soakLastPanic(), nil)
	}
}

func (gp *soakGangPods) add(p *corev1.Pod) {
	gp.all = append(gp.all, p)
	bound, terminating := p.Spec.NodeName != "", p.DeletionTimestamp != nil
	switch {
	case bound && !terminating:
		gp.live = append(gp.live, p)
	case !bound && !terminating:
		gp.pending = append(gp.pending, p)
	}
	if bound {
		gp.bound++
	}
	if terminating {
		gp.terminating++
	}
}

func (o *soakObs) gang(name string) *soakGangPods {
	if gp := o.byGang[name]; gp != nil {
		return gp
	}
	return &soakGangPods{}
}

// quiet: nothing bound runs any more and nothing is owed a binding.
func (o *soakObs) quiet() bool {
	for _, p := range o.pods {
		if p.Spec.NodeName != "" {
			return false
		}
	}
	for _, v := range o.verdicts {
		if v.Owed {
			return false
		}
	}
	return true
}

// follow moves the soak's own records on from an observation: quorums and pods that bound, jobs
// whose time is up, gangs whose members are all gone.
func (r *soakRun) follow(o *soakObs) {
	for _, g := range r.sortedGangs() {
		gp := o.gang(g.Name)
		if len(gp.all) > 0 {
			r.oracle.sawMembers(g.Name, o.at)
		}
		switch {
		case g.restarting && len(gp.all) == 0:
			g.deleting, g.restarting = false, false
			r.note("gang %s restarts: created %s", g.Name, strings.Join(r.createMembers(g, g.Members), ", "))
		case g.deleting && !g.restarting && !g.gone && len(gp.all) == 0:
			g.gone = true
		case !g.deleting && g.quorumAt.IsZero() && len(gp.live) >= g.MinAvailable:
			g.quorumAt = o.at
			r.note("gang %s quorum bound (%d of min %d): %s", g.Name, len(gp.live), g.MinAvailable, soakWhere(gp.live))
		case !g.deleting && !g.quorumAt.IsZero() && o.at.Sub(g.quorumAt) >= g.RunFor:
			r.deleteGang(g, fmt.Sprintf("gang %s finished (ran %s)", g.Name, g.RunFor))
		}
	}
	r.followOrdinary(o)
}

func (r *soakRun) followOrdinary(o *soakObs) {
	present := map[string]*corev1.Pod{}
	for i := range o.pods {
		present[o.pods[i].Name] = &o.pods[i]
	}
	for _, op := range r.liveOrdinary() {
		p := present[op.Name]
		switch {
		case p == nil:
		case op.boundAt.IsZero() && p.Spec.NodeName != "":
			op.boundAt = o.at
			r.note("pod %s bound on %s", op.Name, p.Spec.NodeName)
		case !op.boundAt.IsZero() && o.at.Sub(op.boundAt) >= op.RunFor:
			r.note("pod %s finished (ran %s): delete", op.Name, op.RunFor)
			op.deleting = true
			r.deletePod(op.Name, false)
		}
	}
}

func soakWhere(pods []*corev1.Pod) string {
	parts := make([]string, len(pods))
	for i, p := range pods {
		parts[i] = p.Name + "@" + p.Spec.NodeName
	}
	return strings.Join(parts, " ")
}

// --- the oracle ---

// soakOracle remembers, per condition, since when it has held without a break.
type soakOracle struct {
	since map[string]time.Time
	seen  map[string]bool
	// longest is, per kind of condition (the key's prefix), its longest run that ended: how
	// close the scenario came to failing.
	longest map[string]soakSpell
	// lastMembers is when each gang last had a pod in the apiserver.
	lastMembers map[string]time.Time
}

// soakSpell is how long a condition held, and of what.
type soakSpell struct {
	d     time.Duration
	where string
}

func newSoakOracle() soakOracle {
	return soakOracle{since: map[string]time.Time{}, seen: map[string]bool{}, longest: map[string]soakSpell{}, lastMembers: map[string]time.Time{}}
}

// holds records that the condition key holds at now and says for how long it has.
func (o *soakOracle) holds(key string, now time.Time) time.Duration {
	o.seen[key] = true
	if _, ok := o.since[key]; !ok {
		o.since[key] = now
	}
	return now.Sub(o.since[key])
}

// round forgets the conditions that did not hold in the round just judged: only an unbroken
// run counts.
func (o *soakOracle) round(now time.Time) {
	for key, since := range o.since {
		if !o.seen[key] {
			kind, what, _ := strings.Cut(key, "/")
			if d := now.Sub(since); d > o.longest[kind].d {
				o.longest[kind] = soakSpell{d: d, where: what}
			}
			delete(o.since, key)
		}
	}
	clear(o.seen)
}

func (o *soakOracle) sawMembers(gang string, at time.Time) { o.lastMembers[gang] = at }

func (r *soakRun) judge(o *soakObs) {
	r.buildLine(o)
	r.checkPartial(o)
	r.checkOwed(o)
	r.checkReserving(o)
	r.checkForgotten(o)
	r.checkAgreement(o)
	r.oracle.round(o.at)
}

// checkPartial: a gang with some but fewer than min-available members bound, none of them
// terminating and not being deleted by the soak, is partial; it may be so only within a commit.
func (r *soakRun) checkPartial(o *soakObs) {
	for _, g := range r.sortedGangs() {
		gp := o.gang(g.Name)
		if g.deleting || gp.terminating > 0 || len(gp.live) == 0 || len(gp.live) >= g.MinAvailable {
			continue
		}
		if d := r.oracle.holds("partial/"+g.Name, o.at); d > soakCommitWindow {
			r.fail(checkPartial, fmt.Sprintf("gang %s has %d of min-available %d members bound (%s) for %s, with no member terminating",
				g.Name, len(gp.live), g.MinAvailable, soakWhere(gp.live), d.Round(100*time.Millisecond)), o)
		}
	}
}

// checkOwed: a unit the line owes a binding gets it within soakOwedWithin.
func (r *soakRun) checkOwed(o *soakObs) {
	for _, v := range o.verdicts {
		if !v.Owed {
			continue
		}
		d := r.oracle.holds("owed/"+v.Unit.Name, o.at)
		if d <= soakOwedWithin {
			continue
		}
		lockstep := "lockstep does not list it"
		if st, ok := o.statuses[v.Unit.Gang]; ok && v.Unit.Gang != "" {
			lockstep = fmt.Sprintf("lockstep says phase %s: %s", st.Phase, st.Reason)
		} else if v.Unit.Gang == "" {
			lockstep = "the scheduler says: " + r.s.schedulingMessage(strings.TrimPrefix(v.Unit.Name, "pod "))
		}
		r.fail(checkStall, fmt.Sprintf("STALL: %s has fit for %s and is not bound: %d members of %d GPU fit on %s; %s",
			v.Unit.Name, d.Round(100*time.Millisecond), len(v.Unit.Members), soakFirstGPU(v.Unit.Members), strings.Join(v.Nodes, ","), lockstep), o)
	}
}

func soakFirstGPU(members []soak.Res) int64 {
	if len(members) == 0 {
		return 0
	}
	return members[0].GPU
}

// checkReserving: a reservation whose members all exist is bound or gone within
// soakReservingWithin.
func (r *soakRun) checkReserving(o *soakObs) {
	for name, st := range o.statuses {
		g := r.gangs[name]
		if st.Phase != views.PhaseReserving || g == nil || len(o.gang(name).all)-o.gang(name).terminating < g.Members {
			continue
		}
		if d := r.oracle.holds("reserving/"+name, o.at); d > soakReservingWithin {
			r.fail(checkReserving, fmt.Sprintf("gang %s has been Reserving for %s with all %d members there: %s", name, d.Round(100*time.Millisecond), g.Members, st.Reason), o)
		}
	}
}

// checkForgotten: lockstep lists no gang whose pods have all been gone for soakForgetWithin.
func (r *soakRun) checkForgotten(o *soakObs) {
	for name, st := range o.statuses {
		if len(o.gang(name).all) > 0 {
			continue
		}
		last, ok := r.oracle.lastMembers[name]
		if !ok {
			last = r.began
		}
		if d := o.at.Sub(last); d > soakForgetWithin {
			r.fail(checkForgotten, fmt.Sprintf("lockstep still lists gang %s (%s, %d members, bound %d) %s after its last pod was gone",
				name, st.Phase, len(st.Members), st.Bound, d.Round(100*time.Millisecond)), o)
		}
	}
}

// checkAgreement: /debug/gangs' bound equals the apiserver's count of the gang's pods on a node.
func (r *soakRun) checkAgreement(o *soakObs) {
	names := map[string]bool{}
	for name := range o.statuses {
		names[name] = true
	}
	for name := range o.byGang {
		names[name] = true
	}
	for name := range names {
		api, ls := o.gang(name).bound, o.statuses[name].Bound
		if api == ls {
			continue
		}
		if d := r.oracle.holds("agree/"+name, o.at); d > soakAgreeWithin {
			r.fail(checkDisagrees, fmt.Sprintf("gang %s: /debug/gangs says bound %d, the apiserver has %d of its pods on a node, for %s",
				name, ls, api, d.Round(100*time.Millisecond)), o)
		}
	}
}

// buildLine models the scenario's schedulable nodes and walks the line of waiting work on them.
func (r *soakRun) buildLine(o *soakObs) {
	used := map[string]placement.Resources{}
	for i := range o.pods {
		if p := &o.pods[i]; p.Spec.NodeName != "" {
			used[p.Spec.NodeName] = used[p.Spec.NodeName].Add(placement.PodRequests(p))
		}
	}
	o.model = nil
	for i := range o.nodes {
		n := &o.nodes[i]
		if n.Spec.Unschedulable {
			continue
		}
		o.model = append(o.model, soak.Node{Name: n.Name, Free: soakRes(placement.NodeAllocatable(n).Sub(used[n.Name]))})
	}
	sort.Slice(o.model, func(i, j int) bool { return o.model[i].Name < o.model[j].Name })
	o.extras = r.extras(o)
	var holds []soak.Hold
	for _, st := range o.statuses {
		if st.Phase == views.PhaseHolding {
			holds = append(holds, soak.Hold{Gang: st.Name, Priority: st.Priority})
		}
	}
	o.verdicts = soak.Walk(o.model, o.extras, r.units(o), holds)
}

func soakRes(r placement.Resources) soak.Res {
	return soak.Res{GPU: r.GPU, MilliCPU: r.MilliCPU, Memory: r.Memory}
}

// extras are the bound members beyond each gang's min-available, the youngest, of the gangs that
// did not opt out: lockstep may evict them for another gang's quorum.
func (r *soakRun) extras(o *soakObs) []soak.Extra {
	var out []soak.Extra
	for _, g := range r.sortedGangs() {
		gp := o.gang(g.Name)
		if g.KeepExtras || len(gp.live) <= g.MinAvailable {
			continue
		}
		for _, p := range gp.live[g.MinAvailable:] {
			out = append(out, soak.Extra{Pod: p.Name, Gang: g.Name, Node: p.Spec.NodeName, Priority: soakPriority(p),
				Created: p.CreationTimestamp.Time, Requests: soakRes(placement.PodRequests(p))})
		}
	}
	return out
}

func soakPriority(p *corev1.Pod) int32 {
	if p.Spec.Priority != nil {
		return *p.Spec.Priority
	}
	return 0
}

// units are the line's waiting work: each gang short of its quorum, with the members it lacks,
// once its group object exists; each pending ordinary pod.
func (r *soakRun) units(o *soakObs) []soak.Unit {
	var out []soak.Unit
	for _, g := range r.sortedGangs() {
		gp := o.gang(g.Name)
		missing := g.MinAvailable - len(gp.live)
		if g.deleting || missing <= 0 || len(gp.pending) < missing || (g.Dialect.HasGroup() && !g.groupMade) {
			continue
		}
		u := soak.Unit{Name: "gang " + g.Name, Gang: g.Name, Priority: soakPriority(gp.pending[0]), Since: gp.all[0].CreationTimestamp.Time}
		for _, p := range gp.pending[:missing] {
			u.Members = append(u.Members, soakRes(placement.PodRequests(p)))
		}
		if st, ok := o.statuses[g.Name]; ok && (st.Phase == views.PhaseReserving || st.Phase == views.PhaseBinding) {
			u.Reserving, u.Held = true, soakHeldNodes(st, missing)
		}
		out = append(out, u)
	}
	for i := range o.pods {
		p := &o.pods[i]
		op := r.ordinary[p.Name]
		if op == nil || op.deleting || p.Spec.NodeName != "" || p.DeletionTimestamp != nil {
			continue
		}
		out = append(out, soak.Unit{Name: "pod " + p.Name, Priority: soakPriority(p), Since: p.CreationTimestamp.Time,
			Members: []soak.Res{soakRes(placement.PodRequests(p))}})
	}
	return out
}

// soakHeldNodes are the nodes a gang's reservation holds for its unbound members.
func soakHeldNodes(st views.GangStatus, n int) []string {
	var out []string
	for _, m := range st.Members {
		switch m.State {
		case "Planned", "Reserved", "WaitingForQuorum":
			if m.Node != "" && len(out) < n {
				out = append(out, m.Node)
			}
		}
	}
	return out
}

// --- failure ---

// fail stops the scenario with everything needed to understand and replay it.
func (r *soakRun) fail(check, what string, o *soakObs) {
	r.t.Helper()
	r.failedCheck = check
	var b strings.Builder
	fmt.Fprintf(&b, "%s\n\nseed %d, scenario %d, step %d of %d\n", what, r.sc.Seed, r.sc.Index, r.step, len(r.sc.Steps))
	fmt.Fprintf(&b, "%s\n", r.replays())
	fmt.Fprintf(&b, "transcript (namespace %s):\n  %s\n\n", r.s.ns, strings.Join(r.log, "\n  "))
	if o != nil {
		if foreign := r.foreignPlaces(o); foreign != "" {
			fmt.Fprintf(&b, "lockstep holds places for this scenario's gangs on nodes their pods cannot use (not the scenario's):\n%s\n", foreign)
		}
		fmt.Fprintf(&b, "oracle's model at t=%.1fs:\n%s\n", o.at.Sub(r.began).Seconds(), soak.Describe(o.model, o.extras, o.verdicts))
		fmt.Fprintf(&b, "pods:\n%s\n", soakDescribePods(o))
	}
	fmt.Fprintf(&b, "scheduler's word on pending pods:\n%s\n", r.s.describePods())
	raw, err := r.gangsJSON()
	gangs := soakIndent(string(raw))
	if err != nil {
		gangs = "(lockstep did not answer: " + err.Error() + ")"
	}
	fmt.Fprintf(&b, "/debug/gangs:\n%s\n\n", gangs)
	fmt.Fprintf(&b, "lockstep's log about namespace %s (last lines):\n%s\n", r.s.ns, soakLogAbout(r.s.ns, 80))
	fmt.Fprintf(&b, "the scenario as drawn:\n%s", r.sc.Transcript())
	r.t.Fatal(b.String())
}

// foreignPlaces lists the members /debug/gangs places on nodes outside the scenario: every pod
// of the scenario selects the scenario's nodes, so such a place can never be used.
func (r *soakRun) foreignPlaces(o *soakObs) string {
	own := map[string]bool{}
	for _, n := range r.nodes {
		own[n.name] = true
	}
	var b strings.Builder
	for _, g := range r.sortedGangs() {
		st, ok := o.statuses[g.Name]
		if !ok {
			continue
		}
		for _, m := range st.Members {
			if m.Node != "" && !own[m.Node] {
				fmt.Fprintf(&b, "  gang %s (%s): %s %s on %s\n", g.Name, st.Phase, m.Pod, m.State, m.Node)
			}
		}
	}
	return b.String()
}

func soakDescribePods(o *soakObs) string {
	var b strings.Builder
	for i := range o.pods {
		p := &o.pods[i]
		state := "pending"
		if p.Spec.NodeName != "" {
			state = "bound on " + p.Spec.NodeName
		}
		if p.DeletionTimestamp != nil {
			state += ", terminating"
		}
		fmt.Fprintf(&b, "  %-10s %-26s prio %4d %d GPU created %s\n", p.Name, state, soakPriority(p),
			placement.PodRequests(p).GPU, p.CreationTimestamp.Format("15:04:05"))
	}
	return b.String()
}

func soakIndent(raw string) string {
	var v any
	if json.Unmarshal([]byte(raw), &v) != nil {
		return raw
	}
	out, err := json.MarshalIndent(v, "", "  ")
	if err != nil {
		return raw
	}
	return string(out)
}

// soakLastPanic is lockstep's log from the last panic it recovered from, "none" without one.
func soakLastPanic() string {
	raw, err := os.ReadFile(env.lockstep.LogPath)
	if err != nil {
		return err.Error()
	}
	log := string(raw)
	at := strings.LastIndex(log, "http: panic serving")
	if at < 0 {
		at = strings.LastIndex(log, "panic: ")
	}
	if at < 0 {
		return "none"
	}
	start := strings.LastIndex(log[:at], "\n") + 1
	return log[start:min(len(log), at+6000)]
}

// soakLogAbout is the last n lines of lockstep's log that name the namespace.
func soakLogAbout(ns string, n int) string {
	f, err := os.Open(env.lockstep.LogPath)
	if err != nil {
		return err.Error()
	}
	defer f.Close()
	var lines []string
	sc := bufio.NewScanner(f)
	sc.Buffer(make([]byte, 64<<10), 4<<20)
	for sc.Scan() {
		if strings.Contains(sc.Text(), ns) {
			lines = append(lines, sc.Text())
		}
	}
	if len(lines) > n {
		lines = lines[len(lines)-n:]
	}
	return strings.Join(lines, "\n")
}
