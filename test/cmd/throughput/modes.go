package main

import (
	"context"
	"errors"
	"fmt"
	"os"
	"time"

	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/kubernetes"

	"github.com/lockstep-sched/lockstep/test/lib/cluster"
	"github.com/lockstep-sched/lockstep/test/lib/harness"
	"github.com/lockstep-sched/lockstep/test/lib/procstat"
)

// mode is one scheduler set-up the same load runs through.
type mode struct {
	key   string // -modes name and profile file prefix
	label string // the table's row
	sched *metered
	// config is the scheduler's KubeSchedulerConfiguration, which lockstep reads too; "" for a
	// scheduler that has none.
	config string
	// lockstepBin is the lockstep binary the scheduler calls as its extender (this tree's, or
	// the -baseline revision's); "" when it calls none.
	lockstepBin string
	// companion runs for the whole mode beside the scheduler (Volcano's controller-manager), or
	// is nil.
	companion *metered
	// dialect is how the mode's pods name their scheduler and their gangs.
	dialect dialect
	// cyclic says the scheduler works on a timer whether or not anything is pending (Volcano
	// opens a session of the whole cluster every second), so it never goes quiet and settling
	// does not wait for it.
	cyclic bool
	// unavailable says why the mode cannot run (a binary that did not build), or is nil.
	unavailable error
}

// useExtender points the mode's kube-scheduler at lockstep.
func (m mode) useExtender(url string) {
	if k, ok := m.sched.process.(*kubeScheduler); ok {
		k.opts.ExtenderURL = url
	}
}

// pids are the mode's own processes by name (scheduler, lockstep, companion); 0 for one that
// does not run now.
func (m mode) pids(ls *harness.Lockstep) map[string]int {
	pids := map[string]int{"scheduler": m.sched.pid()}
	if ls != nil {
		pids["lockstep"] = ls.Pid()
	}
	if m.companion != nil {
		pids[m.companion.use.name] = m.companion.pid()
	}
	return pids
}

// bench is one run: one control plane, one node set, the modes one after another.
type bench struct {
	c      *cluster.Cluster
	client kubernetes.Interface // rate limits high enough that the client never sets the pace
	dyn    dynamic.Interface
	binds  *bindWatch
	w      workload
	stall  time.Duration
	prof   *profiler
	api    *apiMetrics
	// lockstepFlags follow the Deployment's arguments (-lockstep-flags).
	lockstepFlags []string
	// trace and items are the trace workload's; items is nil for the uniform one.
	trace traceOptions
	items []traceItem
}

// result is what one mode measured.
type result struct {
	mode           mode
	ordinary, gang rate
	gangDone       []time.Duration // per gang: scheduler ready to its last bind
	maxPartial     time.Duration   // longest time a gang spent partly bound
	maxPartialGang string          // and which gang that was
	// commitPartial and commitPartialGang are the same by lockstep's own record of each commit
	// (/debug/gangs lastCommit.partlyBoundFor): the bench sees binds through its watch, on a
	// machine it shares.
	commitPartial     time.Duration
	commitPartialGang string
	idle              []time.Duration // per idle gang: last member created to last member bound
	stalls            []string
	falseBinds        *int // lockstep's committed binds minus pods bound in the API; nil without lockstep
	// procs is what each of the mode's own processes cost over the mode: scheduler first.
	procs []usage
	costs []cost
	trace *traceResult // the trace workload's measures; nil for the uniform one
	err   error
}

// rate is a throughput measurement: pods bound over the time from the scheduler's start to the
// last bind.
type rate struct {
	bound, total int
	took         time.Duration
}

// notePartial keeps the longest time a gang spent partly bound.
func (r *result) notePartial(gang string, d time.Duration) {
	if d > r.maxPartial {
		r.maxPartial, r.maxPartialGang = d, gang
	}
}

func (r rate) perSecond() float64 {
	if r.took <= 0 {
		return 0
	}
	return float64(r.bound) / r.took.Seconds()
}

// runMode measures one mode and leaves the cluster as it found it: no scheduler, no lockstep and
// no pods.
func (b *bench) runMode(ctx context.Context, m mode) result {
	return b.withMode(ctx, m, func(ls *harness.Lockstep, res *result) error {
		apiBound, err := b.measureMode(ctx, m, ls, res)
		if err != nil || ls == nil {
			return err
		}
		var commitErr error
		res.falseBinds, err = b.falseBinds(ctx, ls, apiBound)
		res.commitPartial, res.commitPartialGang, commitErr = longestCommitPartial(ctx, ls)
		return errors.Join(err, commitErr)
	})
}

// withMode runs measure with the mode's lockstep and companion running, then stops everything,
// reads what each process cost, and cleans up.
func (b *bench) withMode(ctx context.Context, m mode, measure func(*harness.Lockstep, *result) error) (res result) {
	res.mode = m
	if m.unavailable != nil {
		res.err = m.unavailable
		return res
	}
	m.sched.use = usage{name: m.sched.use.name}
	var ls *harness.Lockstep
	var lsUse *metered
	defer func() {
		m.sched.stop()
		res.procs = append(res.procs, m.sched.use)
		for _, p := range []*metered{lsUse, m.companion} {
			if p != nil {
				p.stop()
				res.procs = append(res.procs, p.use)
			}
		}
		res.err = errors.Join(res.err, b.cleanUp(ctx, m))
	}()
	if m.companion != nil {
		m.companion.use = usage{name: m.companion.use.name}
		if err := m.companion.start(ctx); err != nil {
			res.err = err
			return res
		}
	}
	if m.lockstepBin != "" {
		var err error
		if ls, err = startLockstep(ctx, b.c, m, b.prof != nil, b.lockstepFlags); err != nil {
			res.err = err
			return res
		}
		lsUse = newMetered("lockstep", &lockstepProcess{ls})
		lsUse.startTicks = procstat.CPUTicks(ls.Pid())
		m.useExtender(ls.URL)
	}
	res.err = measure(ls, &res)
	return res
}

// lockstepProcess meters a lockstep that is already running.
type lockstepProcess struct{ ls *harness.Lockstep }

func (l *lockstepProcess) start(context.Context) error { return nil }
func (l *lockstepProcess) stop()                       { l.ls.Kill() }
func (l *lockstepProcess) pid() int                    { return l.ls.Pid() }
func (l *lockstepProcess) url() string                 { return l.ls.DebugURL }

// longestCommitPartial is the longest partly-bound window among lockstep's records of its gangs'
// latest commits.
func longestCommitPartial(ctx context.Context, ls *harness.Lockstep) (time.Duration, string, error) {
	gangs, err := ls.Gangs(ctx, namespace)
	if err != nil {
		return 0, "", err
	}
	var longest time.Duration
	var which string
	for _, g := range gangs {
		if g.LastCommit == nil {
			continue
		}
		d, err := time.ParseDuration(g.LastCommit.PartlyBoundFor)
		if err != nil {
			return 0, "", fmt.Errorf("gang %s: partlyBoundFor %q: %w", g.Name, g.LastCommit.PartlyBoundFor, err)
		}
		if d > longest {
			longest, which = d, g.Name
		}
	}
	return longest, which, nil
}

// measureMode runs the three phases and returns how many pods the apiserver showed bound in them
// (for comparison with lockstep's own count).
func (b *bench) measureMode(ctx context.Context, m mode, ls *harness.Lockstep, res *result) (int, error) {
	if err := b.ordinaryPhase(ctx, m, ls, res); err != nil {
		return 0, fmt.Errorf("ordinary pods: %w", err)
	}
	if err := b.gangPhase(ctx, m, ls, res); err != nil {
		return 0, fmt.Errorf("gangs: %w", err)
	}
	idleBound, err := b.idlePhase(ctx, m, ls, res)
	if err != nil {
		return 0, fmt.Errorf("idle gangs: %w", err)
	}
	m.sched.stop()
	bound, err := boundInAPI(ctx, b.client, "")
	return bound + idleBound, err
}

// falseBinds compares lockstep's committed binds with the pods the apiserver bound. The scheduler
// is stopped by now; lockstep may still be finishing a commit, so wait for it to go quiet first.
func (b *bench) falseBinds(ctx context.Context, ls *harness.Lockstep, apiBound int) (*int, error) {
	procstat.WaitUntilQuiet(ctx, 15*time.Second, ls.Pid())
	counts, err := ls.BindCounts(ctx)
	if err != nil {
		return nil, err
	}
	diff := counts.Committed - apiBound
	return &diff, nil
}

// cleanUp deletes the mode's pods (and PodGroups) and waits until the informer has seen them go.
func (b *bench) cleanUp(ctx context.Context, m mode) error {
	err := deleteAll(ctx, b.client, b.dyn, m.dialect)
	if err == nil {
		err = b.binds.awaitEmpty(ctx)
	}
	b.binds.reset()
	return err
}

// startScheduler starts the mode's scheduler and returns when it answered ready.
func (b *bench) startScheduler(ctx context.Context, m mode) (time.Time, error) {
	if err := m.sched.start(ctx); err != nil {
		return time.Time{}, err
	}
	return time.Now(), nil
}

// settle waits until kube-apiserver, etcd and the mode's processes that run have digested what
// was just created or deleted, so that every measurement starts on a quiet machine.
func (b *bench) settle(ctx context.Context, m mode, ls *harness.Lockstep) {
	pids := []int{b.c.Pid(cluster.KubeAPIServer), b.c.Pid(cluster.Etcd)}
	for name, pid := range m.pids(ls) {
		if pid != 0 && !(m.cyclic && name == "scheduler") {
			pids = append(pids, pid)
		}
	}
	if !procstat.WaitUntilQuiet(ctx, time.Minute, pids...) {
		fmt.Fprintln(os.Stderr, "throughput: the control plane is still busy after a minute; measuring anyway")
	}
}
