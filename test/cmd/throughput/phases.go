package main

import (
	"context"
	"fmt"
	"os"
	"slices"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/lockstep-sched/lockstep/test/lib/cluster"
	"github.com/lockstep-sched/lockstep/test/lib/harness"
	"github.com/lockstep-sched/lockstep/test/lib/procstat"
)

// stretch is one stretch of scheduling: which pods bound when, and which did not.
type stretch struct {
	start   time.Time // the scheduler's readiness, or the first bind if one came before it
	end     time.Time // when waiting stopped: the last bind, or the stall
	at      map[string]time.Time
	unbound []string
	cost    cost
}

func (r stretch) rate(total int) rate {
	last := r.start
	for _, t := range r.at {
		if t.After(last) {
			last = t
		}
	}
	return rate{bound: len(r.at), total: total, took: last.Sub(r.start)}
}

// ordinaryPhase: ordinary pods created while no scheduler runs, then the scheduler starts and binds
// them; pods/s from its readiness to the last bind.
func (b *bench) ordinaryPhase(ctx context.Context, m mode, ls *harness.Lockstep, res *result) error {
	r, err := b.createAndSchedule(ctx, m, ls, "ordinary", b.w.ordinaryPods(m.dialect))
	if err != nil {
		return err
	}
	m.sched.stop()
	res.ordinary = r.rate(b.w.ordinary)
	res.costs = append(res.costs, r.cost)
	return b.dropUnbound(ctx, "ordinary pods", r, res)
}

// gangPhase: the scheduler stops, the gangs are created (with their PodGroups in the dialects that
// have them), and the scheduler starts again. It keeps running for the idle phase.
func (b *bench) gangPhase(ctx context.Context, m mode, ls *harness.Lockstep, res *result) error {
	gangs := b.w.gangNames()
	if err := b.w.createPodGroups(ctx, b.dyn, m.dialect, gangs); err != nil {
		return err
	}
	r, err := b.createAndSchedule(ctx, m, ls, "gangs", b.w.gangPods(m.dialect))
	if err != nil {
		return err
	}
	res.gang = r.rate(b.w.gangs * b.w.gangSize)
	res.costs = append(res.costs, r.cost)
	for _, g := range gangs {
		times := memberTimes(r.at, b.w.members(g))
		if len(times) == b.w.gangSize {
			res.gangDone = append(res.gangDone, times[len(times)-1].Sub(r.start))
		}
		res.notePartial(g, partialTime(times, b.w.gangSize, r.end))
	}
	return b.dropUnbound(ctx, "gangs", r, res)
}

// createAndSchedule creates pods while no scheduler runs and waits until this program's informer
// has them all (in Volcano's dialect, with the PodGroups its controller makes for pods outside a
// gang), then schedules them (see scheduleAll).
func (b *bench) createAndSchedule(ctx context.Context, m mode, ls *harness.Lockstep, phase string, pods []*corev1.Pod) (stretch, error) {
	names := make([]string, len(pods))
	for i, p := range pods {
		names[i] = p.Name
	}
	if err := createPods(ctx, b.client, pods); err != nil {
		return stretch{}, err
	}
	if err := b.binds.awaitStore(ctx, names, true); err != nil {
		return stretch{}, err
	}
	if m.dialect == volcanoPodGroup {
		if err := b.binds.awaitAnnotated(ctx, names, volcanoGroupAnnotation); err != nil {
			return stretch{}, err
		}
	}
	return b.scheduleAll(ctx, m, ls, phase, names)
}

// scheduleAll starts the scheduler on a settled cluster and waits until the named pods are bound
// or none binds for the stall time. The scheduler is left running.
func (b *bench) scheduleAll(ctx context.Context, m mode, ls *harness.Lockstep, phase string, names []string) (stretch, error) {
	b.settle(ctx, m, ls)
	ready, err := b.startScheduler(ctx, m)
	if err != nil {
		return stretch{}, err
	}
	meter := b.meter(ctx, m, ls)
	profiles := b.prof.start(ctx, m.key+"-"+phase, b.profileURLs(m, ls))
	at, unbound := b.binds.awaitBound(ctx, names, ready, b.stall)
	r := stretch{start: ready, end: time.Now(), at: at, unbound: unbound, cost: meter.stop(ctx, m.key, phase, len(at))}
	for _, t := range at {
		if t.Before(r.start) {
			r.start = t
		}
	}
	if err := profiles.wait(); err != nil {
		fmt.Fprintf(os.Stderr, "throughput: %s %s: profile: %v\n", m.key, phase, err)
	}
	return r, nil
}

// dropUnbound records a stall, with what was left unbound, and deletes those pods so that the
// next phase starts with nothing pending.
func (b *bench) dropUnbound(ctx context.Context, what string, r stretch, res *result) error {
	if len(r.unbound) == 0 {
		return nil
	}
	res.stalls = append(res.stalls, fmt.Sprintf("%s: no bind for %s: %s", what, b.stall, b.binds.whyUnbound(r.unbound)))
	return b.deletePods(ctx, r.unbound)
}

func (b *bench) deletePods(ctx context.Context, names []string) error {
	err := parallel(len(names), func(i int) error {
		return b.client.CoreV1().Pods(namespace).Delete(ctx, names[i], *metav1.NewDeleteOptions(0))
	})
	if err != nil {
		return err
	}
	return b.binds.awaitStore(ctx, names, false)
}

// idlePhase measures gang latency with nothing else pending: one gang at a time is created, its
// members back to back, and timed from the last member's Create returning to its last member
// seen bound; then it is deleted. It returns how many pods the apiserver showed bound.
func (b *bench) idlePhase(ctx context.Context, m mode, ls *harness.Lockstep, res *result) (int, error) {
	meter := b.meter(ctx, m, ls)
	profiles := b.prof.start(ctx, m.key+"-idle", b.profileURLs(m, ls))
	defer func() {
		if err := profiles.wait(); err != nil {
			fmt.Fprintf(os.Stderr, "throughput: %s idle: profile: %v\n", m.key, err)
		}
	}()
	bound := 0
	for s := range b.w.idleSamples {
		gang := b.w.idleGangName(s)
		n, stalled, err := b.idleSample(ctx, m, ls, gang, res)
		bound += n
		if err != nil || stalled {
			res.costs = append(res.costs, meter.stop(ctx, m.key, "idle", bound))
			return bound, err
		}
	}
	res.costs = append(res.costs, meter.stop(ctx, m.key, "idle", bound))
	return bound, nil
}

func (b *bench) idleSample(ctx context.Context, m mode, ls *harness.Lockstep, gang string, res *result) (bound int, stalled bool, err error) {
	b.settle(ctx, m, ls)
	members := b.w.members(gang)
	if err := b.w.createPodGroups(ctx, b.dyn, m.dialect, []string{gang}); err != nil {
		return 0, false, err
	}
	for _, name := range members {
		if _, err := b.client.CoreV1().Pods(namespace).Create(ctx, b.w.gangPod(name, gang, m.dialect), metav1.CreateOptions{}); err != nil {
			return 0, false, err
		}
	}
	created := time.Now()
	at, unbound := b.binds.awaitBound(ctx, members, created, b.stall)
	times := memberTimes(at, members)
	res.notePartial(gang, partialTime(times, b.w.gangSize, time.Now()))
	if len(unbound) == 0 {
		res.idle = append(res.idle, max(0, times[len(times)-1].Sub(created)))
	} else {
		res.stalls = append(res.stalls, fmt.Sprintf("idle gang %s: no bind for %s: %s", gang, b.stall, b.binds.whyUnbound(unbound)))
	}
	if bound, err = boundInAPI(ctx, b.client, gangLabel+"="+gang); err != nil {
		return 0, false, err
	}
	if err := b.deletePods(ctx, members); err != nil {
		return bound, false, err
	}
	return bound, len(unbound) > 0, m.dialect.deletePodGroup(ctx, b.dyn, gang)
}

// memberTimes are the bind times of a gang's bound members, earliest first.
func memberTimes(at map[string]time.Time, members []string) []time.Time {
	var times []time.Time
	for _, name := range members {
		if t, ok := at[name]; ok {
			times = append(times, t)
		}
	}
	slices.SortFunc(times, time.Time.Compare)
	return times
}

// partialTime is how long a gang was partly bound: from its first bind to its need-th, or to end
// when it never got that far.
func partialTime(sorted []time.Time, need int, end time.Time) time.Duration {
	switch {
	case len(sorted) == 0:
		return 0
	case len(sorted) >= need:
		return sorted[need-1].Sub(sorted[0])
	default:
		return end.Sub(sorted[0])
	}
}

// profileURLs are the processes a phase profiles: the scheduler (those that serve profiles),
// kube-apiserver, and lockstep when it runs.
func (b *bench) profileURLs(m mode, ls *harness.Lockstep) map[string]string {
	urls := map[string]string{"scheduler": m.sched.url(), apiserverProfile: b.c.Server}
	if ls != nil {
		urls["lockstep"] = ls.DebugURL
	}
	return urls
}

// cost is what a phase cost each process, in CPU seconds, over its wall time.
type cost struct {
	mode, phase string
	pods        int
	wall        time.Duration
	cpu         map[string]float64
	api         apiWork // nil when the apiserver's metrics could not be read
}

// costMeter measures a phase's cost from its start.
type costMeter struct {
	began time.Time
	pids  map[string]int
	ticks map[string]int64
	api   *apiMetrics
	// apiBefore is the apiserver's counters at the start; nil when unread.
	apiBefore apiWork
}

// costComponents are the processes a cost is reported for, in the table's order.
var costComponents = []string{"scheduler", "lockstep", floorExtender, vcControllerManager, "kube-apiserver", "etcd", "bench client"}

func (b *bench) meter(ctx context.Context, m mode, ls *harness.Lockstep) *costMeter {
	mt := &costMeter{began: time.Now(), ticks: map[string]int64{}, api: b.api, pids: map[string]int{
		"kube-apiserver": b.c.Pid(cluster.KubeAPIServer),
		"etcd":           b.c.Pid(cluster.Etcd),
		"bench client":   os.Getpid(),
	}}
	for name, pid := range m.pids(ls) {
		mt.pids[name] = pid
	}
	for name, pid := range mt.pids {
		mt.ticks[name] = procstat.CPUTicks(pid)
	}
	mt.apiBefore = mt.readAPI(ctx)
	return mt
}

func (mt *costMeter) stop(ctx context.Context, mode, phase string, pods int) cost {
	c := cost{mode: mode, phase: phase, pods: pods, wall: time.Since(mt.began), cpu: map[string]float64{}}
	for name, pid := range mt.pids {
		c.cpu[name] = float64(procstat.CPUTicks(pid)-mt.ticks[name]) / procstat.TicksPerSecond
	}
	if after := mt.readAPI(ctx); after != nil && mt.apiBefore != nil {
		c.api = after.since(mt.apiBefore)
	}
	return c
}

// readAPI is the apiserver's counters now, nil (and said on stderr) when unread: the table then
// leaves the phase out rather than stop the run.
func (mt *costMeter) readAPI(ctx context.Context) apiWork {
	if mt.api == nil {
		return nil
	}
	w, err := mt.api.read(ctx)
	if err != nil {
		fmt.Fprintln(os.Stderr, "throughput: reading kube-apiserver's metrics:", err)
	}
	return w
}
