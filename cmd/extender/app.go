package main

import (
	"context"
	"net/http"
	"runtime/debug"
	"sync/atomic"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes"
	typedcorev1 "k8s.io/client-go/kubernetes/typed/core/v1"
	"k8s.io/client-go/tools/cache"
	"k8s.io/client-go/tools/record"
	"k8s.io/klog/v2"

	"github.com/lockstep-sched/lockstep/dialect"
	"github.com/lockstep-sched/lockstep/drawatch"
	"github.com/lockstep-sched/lockstep/extender"
	"github.com/lockstep-sched/lockstep/gang"
	"github.com/lockstep-sched/lockstep/leadership"
	"github.com/lockstep-sched/lockstep/nominate"
	"github.com/lockstep-sched/lockstep/podgroup"
	"github.com/lockstep-sched/lockstep/serving"
	"github.com/lockstep-sched/lockstep/tenancy"
)

// app wires informers, the gang manager and the HTTP handler together.
type app struct {
	manager *gang.Manager
	// handler serves kube-scheduler; debugHandler serves people and Prometheus; metricsHandler
	// serves Prometheus alone.
	handler, debugHandler, metricsHandler http.Handler
	factory                               informers.SharedInformerFactory
	broadcaster                           record.EventBroadcaster
	// events writes lockstep's events; see clients.
	events kubernetes.Interface
	ready  atomic.Bool
	// handlersSynced reports when the manager has taken in the initial lists (see gang.Watch)
	// and the group and queue objects the apiserver served at start.
	handlersSynced func() bool
	groups         *podgroup.Syncer
	// nominations writes nominated nodes (--nominate-reserved); nil when off.
	nominations *nominate.Writer
	queues      *tenancy.Watcher
	// devices watches what DRA publishes (package drawatch).
	devices *drawatch.Watcher
	// leader says whether this replica's scheduler leads; only then does lockstep write on its
	// own initiative (see package leadership).
	leader *leadership.Follower
}

func newApp(c clients, opts options, reg *prometheus.Registry) (*app, error) {
	a := &app{events: c.events, factory: informers.NewSharedInformerFactory(c.main, 0), leader: leadership.Always()}
	if opts.leaderLease != "" {
		a.leader = leadership.New(c.main, opts.leaseNamespace, opts.leaseName, opts.leaderIdentity)
	}
	a.broadcaster = record.NewBroadcaster()
	recorder := a.broadcaster.NewRecorder(schemeForEvents(), corev1.EventSource{Component: "lockstep"})
	getPod := func(ctx context.Context, namespace, name string) (*corev1.Pod, error) {
		return c.bind.CoreV1().Pods(namespace).Get(ctx, name, metav1.GetOptions{}) // on the bind path
	}
	// The syncer needs the manager and the manager tells the syncer about gang changes; nothing
	// calls OnGangChange before the informers start, by which time both exist.
	var groups *podgroup.Syncer
	var evicter gang.Evicter
	if opts.gangPreemption || opts.queueReclaim || opts.takeBackExtras {
		evicter = gang.APIEvicter{Client: c.bind} // an eviction makes room for a gang to bind
	}
	var releaser gang.ClaimReleaser
	if opts.releaseDevices {
		// Like an eviction, it frees devices for a gang; only the leader's lockstep writes it.
		releaser = leaderOnlyReleaser{gang.APIClaimReleaser{Client: c.bind}, a.leader}
	}
	var nominator gang.Nominator
	if opts.nominate {
		a.nominations = nominate.New(c.nominate, nominateWorkers, reg)
		nominator = a.nominations
	}
	a.manager = gang.NewManager(gang.Config{
		Evicter:              evicter,
		NoPriorityPreemption: !opts.gangPreemption,
		NoExtrasTakeBack:     !opts.takeBackExtras,
		QueueReclaim:         opts.queueReclaim,
		StarvationThreshold:  opts.starvationThreshold,
		GatherWait:           opts.gatherWait,
		ScoreEveryNode:       !opts.shortlist,
		Tiers:                opts.tiers,
		DefaultWaitingTime:   opts.defaultWaitingTime,
		BindWait:             opts.bindWait,
		CommitTimeout:        opts.commitTimeout,
		Reader:               dialect.Pods{},
		OnGangChange:         func(key string) { groups.GangChanged(key) },
		OnQueuesChange:       func() { groups.Resync() },
		Nominator:            nominator,
		GPUClasses:           opts.gpuClasses,
		ClaimReleaser:        releaser,
	}, gang.NewAPIBinder(c.bind), getPod, recorder, gang.NewMetrics(reg))
	// Every replica reads DRA, as it reads queues: a standby must be ready to lead.
	a.devices = drawatch.New(c.main, c.discovery, a.manager, opts.groupDiscoveryInterval)
	groups = podgroup.New(c.groups, c.discovery, a.manager, opts.groupDiscoveryInterval)
	groups.SetWriteGate(a.leader.Leading)
	a.leader.OnStartedLeading(groups.Resync)
	a.groups = groups
	// Queues, like PodGroups, are read by every replica (a standby must be ready to lead with the
	// same accounting) and written back by the leader only.
	queues, err := tenancy.New(tenancy.Config{
		Client: c.groups, Discovery: c.discovery, Namespaces: a.factory.Core().V1().Namespaces(),
		Manager: a.manager, Recorder: recorder,
		DiscoveryInterval: opts.groupDiscoveryInterval, UsageInterval: queueUsageInterval, Ready: a.ready.Load,
		YuniKorn: c.main, YuniKornNamespace: opts.yunikornNamespace,
	})
	if err != nil {
		return nil, err
	}
	queues.SetWriteGate(a.leader.Leading)
	a.leader.OnStartedLeading(queues.Resync)
	a.queues = queues
	a.manager.SetConditionWriter(leaderOnly{gang.APIConditionWriter{Client: c.events}, a.leader})
	reg.MustRegister(prometheus.NewGaugeFunc(prometheus.GaugeOpts{
		Name: "lockstep_leading",
		Help: "1 when the scheduler this lockstep serves holds its leader-election Lease (always, without --leader-election-lease), else 0.",
	}, func() float64 {
		if a.leader.Leading() {
			return 1
		}
		return 0
	}))
	reg.MustRegister(a.manager.Collector())
	handlerOpts := extender.Options{
		MaxRequestBytes: opts.maxRequestBytes,
		Ready:           a.ready.Load,
		Registry:        reg,
		Profiling:       opts.profiling,
	}
	if opts.clientCAFile != "" {
		handlerOpts.Caller = serving.VerifiedClient
	}
	a.handler = extender.NewHandler(a.manager, handlerOpts)
	a.debugHandler = extender.NewDebugHandler(a.manager, handlerOpts)
	a.metricsHandler = extender.NewMetricsHandler(reg)
	synced, err := a.manager.Watch(a.factory)
	if err != nil {
		return nil, err
	}
	a.handlersSynced = func() bool { return synced() && groups.HasSynced() && queues.HasSynced() && a.devices.HasSynced() }
	return a, nil
}

// queueUsageInterval is how often a queue's changed usage is written back to its object: often
// enough for `kubectl get` to follow a job starting, rarely enough that usage moving with every
// reservation costs the apiserver little.
const queueUsageInterval = 5 * time.Second

// leaderOnly drops a standby's condition writes. They wake pods the scheduler parked; a standby's
// scheduler parks none, and the leader's lockstep writes its own.
type leaderOnly struct {
	gang.ConditionWriter
	leader *leadership.Follower
}

func (l leaderOnly) SetCondition(ctx context.Context, namespace, name string, cond corev1.PodCondition) error {
	if !l.leader.Leading() {
		return nil
	}
	return l.ConditionWriter.SetCondition(ctx, namespace, name, cond)
}

// leaderOnlyReleaser drops a standby's releases: the leader's lockstep decides the reservations
// they follow.
type leaderOnlyReleaser struct {
	gang.ClaimReleaser
	leader *leadership.Follower
}

func (l leaderOnlyReleaser) Release(ctx context.Context, namespace, name string, uid types.UID, pods []types.UID) error {
	if !l.leader.Leading() {
		return nil
	}
	return l.ClaimReleaser.Release(ctx, namespace, name, uid, pods)
}

func (a *app) start(ctx context.Context) {
	a.broadcaster.StartStructuredLogging(3)
	a.broadcaster.StartRecordingToSink(&typedcorev1.EventSinkImpl{Interface: a.events.CoreV1().Events("")})
	defer a.broadcaster.Shutdown()
	a.factory.Start(ctx.Done())
	leaseSynced := a.leader.Run(ctx)
	go a.groups.Run(ctx)
	go a.queues.Run(ctx)
	go a.devices.Run(ctx)
	if a.nominations != nil {
		go a.nominations.Run(ctx)
	}
	start := time.Now()
	if !cache.WaitForCacheSync(ctx.Done(), a.handlersSynced, leaseSynced) {
		klog.InfoS("Informers did not sync before shutdown")
		return
	}
	// The initial lists are the largest allocation lockstep ever makes and are garbage now;
	// hand their pages back so resident memory reflects the steady state.
	debug.FreeOSMemory()
	a.ready.Store(true)
	klog.InfoS("Informers synced; lockstep is ready", "after", time.Since(start).Round(time.Millisecond))
	<-ctx.Done()
	a.factory.Shutdown()
}
