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
	key    string // -modes name and profile file prefix
	label  string // the table's row
	binary string // the scheduler's file name in bin/
	config string
	// lockstep runs the lockstep binary as the scheduler's extender.
	lockstep bool
	// podGroups gives gangs scheduler-plugins PodGroups instead of lockstep's annotations.
	podGroups bool
	// unavailable says why the mode cannot run (a binary that did not build), or is nil.
	unavailable error
}

// bench is one run: one control plane, one node set, the modes one after another.
type bench struct {
	c        *cluster.Cluster
	client   kubernetes.Interface // rate limits high enough that the client never sets the pace
	dyn      dynamic.Interface
	binds    *bindWatch
	w        workload
	stall    time.Duration
	prof     *profiler
	api      *apiMetrics
	lockstep string // the lockstep binary, built at the start of the run
	// lockstepFlags follow the Deployment's arguments (-lockstep-flags).
	lockstepFlags []string
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
	commitPartial       time.Duration
	commitPartialGang   string
	idle                []time.Duration // per idle gang: last member created to last member bound
	stalls              []string
	falseBinds          *int // lockstep's committed binds minus pods bound in the API; nil without lockstep
	lockstepCPU, peakMB float64
	costs               []cost
	err                 error
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
func (b *bench) runMode(ctx context.Context, m mode) (res result) {
	res.mode = m
	if m.unavailable != nil {
		res.err = m.unavailable
		return res
	}
	var ls *harness.Lockstep
	defer func() {
		b.c.StopScheduler()
		if ls != nil {
			ls.Kill()
		}
		res.err = errors.Join(res.err, b.cleanUp(ctx, m))
	}()
	var lockstepStart int64
	if m.lockstep {
		var err error
		if ls, err = startLockstep(ctx, b.c, b.lockstep, m.config, b.prof != nil, b.lockstepFlags); err != nil {
			res.err = err
			return res
		}
		lockstepStart = procstat.CPUTicks(ls.Pid())
	}
	apiBound, err := b.measureMode(ctx, m, ls, &res)
	if err != nil {
		res.err = err
		return res
	}
	if ls != nil {
		res.lockstepCPU = float64(procstat.CPUTicks(ls.Pid())-lockstepStart) / procstat.TicksPerSecond
		res.peakMB = procstat.PeakResidentMB(ls.Pid())
		res.falseBinds, res.err = b.falseBinds(ctx, ls, apiBound)
		res.commitPartial, res.commitPartialGang, err = longestCommitPartial(ctx, ls)
		res.err = errors.Join(res.err, err)
	}
	return res
}

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
	b.c.StopScheduler()
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
	err := deleteAll(ctx, b.client, b.dyn, m.podGroups)
	if err == nil {
		err = b.binds.awaitEmpty(ctx)
	}
	b.binds.reset()
	return err
}

// startScheduler starts the mode's scheduler and returns when it answered ready.
func (b *bench) startScheduler(ctx context.Context, m mode, ls *harness.Lockstep) (time.Time, error) {
	opts := cluster.SchedulerOptions{Binary: m.binary, ConfigPath: m.config, Profiling: b.prof != nil}
	if ls != nil {
		opts.ExtenderURL = ls.URL
	}
	if err := b.c.StartSchedulerWith(ctx, opts); err != nil {
		return time.Time{}, err
	}
	return time.Now(), nil
}

// settle waits until kube-apiserver, etcd, lockstep and the scheduler (those running) have
// digested what was just created or deleted, so that every measurement starts on a quiet machine.
func (b *bench) settle(ctx context.Context, ls *harness.Lockstep) {
	pids := []int{b.c.Pid(cluster.KubeAPIServer), b.c.Pid(cluster.Etcd)}
	if pid := b.c.Pid(cluster.KubeScheduler); pid != 0 {
		pids = append(pids, pid)
	}
	if ls != nil {
		pids = append(pids, ls.Pid())
	}
	if !procstat.WaitUntilQuiet(ctx, time.Minute, pids...) {
		fmt.Fprintln(os.Stderr, "throughput: the control plane is still busy after a minute; measuring anyway")
	}
}
