package gang

import (
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/lockstep-sched/lockstep/decide"
	"github.com/lockstep-sched/lockstep/placement"

	"github.com/lockstep-sched/lockstep/views"
)

// Metrics are the gang manager's Prometheus series. A nil *Metrics records nothing, which keeps
// unit tests free of registries.
type Metrics struct {
	binds       *prometheus.CounterVec
	commit      prometheus.Histogram
	partlyBound prometheus.Histogram
	// droppedConditions counts condition writes given up because too many were queued.
	droppedConditions prometheus.Counter
	// yields counts reservations given up to higher-priority work.
	yields prometheus.Counter
	// expiries counts reservations that ran out their waiting time before quorum: a gang that
	// can never complete shows here as a steady rate, one expiry per waiting time.
	expiries prometheus.Counter
	// wait is how long gangs waited for their quorum, the figure users ask about.
	wait prometheus.Histogram
	// evictions counts the evictions gangs made for their quorums, by cause and result.
	evictions *prometheus.CounterVec
	// shortlisted counts filter answers narrowed to the nodes lockstep ranks best.
	shortlisted prometheus.Counter
	// gathers is how long members waited at filter for the rest of their gang (filter.go,
	// gathering): time the scheduler's loop was paused.
	gathers *prometheus.HistogramVec
	// gathering counts the filter calls waiting now.
	gathering prometheus.Gauge
}

// commitBuckets span a commit on an idle apiserver (milliseconds) to one that retried through
// throttling up to the default --commit-timeout.
var commitBuckets = []float64{0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30}

// waitBuckets span a gang placed on an idle cluster (seconds) to one that queued for hours.
var waitBuckets = []float64{1, 5, 15, 30, 60, 120, 300, 600, 1800, 3600, 7200, 21600}

// NewMetrics registers the manager's counters, and gauges read from m at scrape time, on reg.
func NewMetrics(reg prometheus.Registerer) *Metrics {
	mt := &Metrics{
		binds: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "lockstep_binds_total",
			Help: "Bindings lockstep wrote, by kind (ordinary pod or gang member at commit) and result (committed or failed).",
		}, []string{"kind", "result"}),
		commit: prometheus.NewHistogram(prometheus.HistogramOpts{
			Name:    "lockstep_gang_commit_seconds",
			Help:    "Time from a gang reaching quorum to the apiserver's answer to its last binding.",
			Buckets: commitBuckets,
		}),
		partlyBound: prometheus.NewHistogram(prometheus.HistogramOpts{
			Name:    "lockstep_gang_partly_bound_seconds",
			Help:    "Per commit, how long the gang had some but fewer than min-available members bound (0 when none was bound before quorum); a commit that ended partial counts until its end.",
			Buckets: append([]float64{0}, commitBuckets...),
		}),
		droppedConditions: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "lockstep_condition_writes_dropped_total",
			Help: "Pod condition writes (lockstep.dev/GangScheduled) dropped because the apiserver could not keep up; binds never wait for them.",
		}),
		yields: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "lockstep_reservations_yielded_total",
			Help: "Gang reservations given up to higher-priority gangs or pods before any member was bound.",
		}),
		expiries: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "lockstep_reservations_expired_total",
			Help: "Gang reservations that expired before their quorum reached bind; each marks its gang TimedOut and gives its capacity back.",
		}),
		wait: prometheus.NewHistogram(prometheus.HistogramOpts{
			Name:    "lockstep_gang_wait_seconds",
			Help:    "Time from a gang's oldest member's creation to its quorum's commit, for gangs with no member bound before it.",
			Buckets: waitBuckets,
		}),
		evictions: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "lockstep_preemption_evictions_total",
			Help: "Pods lockstep evicted so that a waiting gang's quorum fits, by cause (priority: lower-priority pods; extras: members beyond other gangs' quorums; reclaim: for a queue below its fair share) and result (evicted or failed).",
		}, []string{"cause", "result"}),
		shortlisted: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "lockstep_filter_shortlisted_total",
			Help: "Filter answers for ordinary GPU pods that passed only the nodes lockstep's packing ranks best (see --shortlist).",
		}),
		gathers: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Name:    "lockstep_filter_gather_seconds",
			Help:    "How long a gang member's filter call waited for the next member of its gang to be created (see --gather-wait), by outcome: arrived, or gave_up (the member is then turned away).",
			Buckets: []float64{0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1},
		}, []string{"outcome"}),
		gathering: prometheus.NewGauge(prometheus.GaugeOpts{
			Name: "lockstep_filter_gathering",
			Help: "Gang members' filter calls waiting now for the next member of their gang; kube-scheduler's loop waits with them.",
		}),
	}
	reg.MustRegister(mt.binds, mt.commit, mt.partlyBound, mt.droppedConditions, mt.yields, mt.expiries, mt.wait, mt.evictions, mt.shortlisted, mt.gathers, mt.gathering)
	return mt
}

func (mt *Metrics) observeBind(kind string, err error) {
	if mt == nil {
		return
	}
	result := "committed"
	if err != nil {
		result = "failed"
	}
	mt.binds.WithLabelValues(kind, result).Inc()
}

func (mt *Metrics) observeYield() {
	if mt == nil {
		return
	}
	mt.yields.Inc()
}

func (mt *Metrics) gatherStarted() {
	if mt != nil {
		mt.gathering.Inc()
	}
}

func (mt *Metrics) observeGather(outcome string, d time.Duration) {
	if mt != nil {
		mt.gathering.Dec()
		mt.gathers.WithLabelValues(outcome).Observe(d.Seconds())
	}
}

func (mt *Metrics) observeExpiry() {
	if mt != nil {
		mt.expiries.Inc()
	}
}

func (mt *Metrics) observeWait(d time.Duration) {
	if mt != nil {
		mt.wait.Observe(d.Seconds())
	}
}

func (mt *Metrics) observeEviction(cause decide.CauseKind, err error) {
	if mt == nil {
		return
	}
	result := "evicted"
	if err != nil {
		result = "failed"
	}
	mt.evictions.WithLabelValues(string(cause), result).Inc()
}

func (mt *Metrics) observeShortlist() {
	if mt != nil {
		mt.shortlisted.Inc()
	}
}

func (mt *Metrics) observeCommit(r *commitRecord) {
	if mt == nil {
		return
	}
	mt.commit.Observe(r.duration().Seconds())
	mt.partlyBound.Observe(r.partlyBoundFor().Seconds())
}

func (mt *Metrics) conditionDropped() {
	if mt != nil {
		mt.droppedConditions.Inc()
	}
}

// Collector exposes gang phases and held reservations, computed from the manager's state when
// Prometheus scrapes rather than kept in step on every change.
func (m *Manager) Collector() prometheus.Collector { return &gangCollector{m: m} }

var (
	gangsDesc = prometheus.NewDesc("lockstep_gangs", "Gangs lockstep knows, by phase.", []string{"phase"}, nil)
	slotsDesc = prometheus.NewDesc("lockstep_reservations_held", "Member places held in live gang reservations.", nil, nil)
	gpusDesc  = prometheus.NewDesc("lockstep_reserved_gpus", "GPUs held in live gang reservations.", nil, nil)

	queueLabels       = []string{"queue", "resource"}
	queueAllocDesc    = prometheus.NewDesc("lockstep_queue_allocated", "What a team queue's bound pods and gang reservations hold, by queue and resource (cpu in cores, memory in bytes).", queueLabels, nil)
	queueDeservedDesc = prometheus.NewDesc("lockstep_queue_deserved", "A team queue's fair share of the capacity the queues share, by queue and resource.", queueLabels, nil)
	queueWaitingDesc  = prometheus.NewDesc("lockstep_queue_waiting_gangs", "Gangs of a team queue waiting for capacity or for the queue.", []string{"queue"}, nil)
	queueParentDesc   = prometheus.NewDesc("lockstep_queue_parent", "1 for each team queue nested under another, labelled with the parent's key: join on queue to read the tree.", []string{"queue", "parent"}, nil)
)

type gangCollector struct{ m *Manager }

func (c *gangCollector) Describe(ch chan<- *prometheus.Desc) {
	ch <- gangsDesc
	ch <- slotsDesc
	ch <- gpusDesc
	ch <- queueAllocDesc
	ch <- queueDeservedDesc
	ch <- queueWaitingDesc
	ch <- queueParentDesc
}

func (c *gangCollector) Collect(ch chan<- prometheus.Metric) {
	counts := map[views.Phase]int{}
	for _, phase := range views.Phases {
		counts[phase] = 0
	}
	var gangs []views.GangStatus
	var gpus int64
	c.m.reading(func() { gangs, gpus = c.m.report().gangs("", nil) })
	slots := 0
	for _, g := range gangs {
		counts[g.Phase]++
		for _, mb := range g.Members {
			if mb.ReservationExpires != nil {
				slots++
			}
		}
	}
	for phase, n := range counts {
		ch <- prometheus.MustNewConstMetric(gangsDesc, prometheus.GaugeValue, float64(n), string(phase))
	}
	ch <- prometheus.MustNewConstMetric(slotsDesc, prometheus.GaugeValue, float64(slots))
	ch <- prometheus.MustNewConstMetric(gpusDesc, prometheus.GaugeValue, float64(gpus))
	for _, q := range c.m.Queues() {
		ch <- prometheus.MustNewConstMetric(queueWaitingDesc, prometheus.GaugeValue, float64(q.Waiting), q.Key)
		if q.Parent != "" {
			ch <- prometheus.MustNewConstMetric(queueParentDesc, prometheus.GaugeValue, 1, q.Key, q.Parent)
		}
		for _, r := range queueResources {
			ch <- prometheus.MustNewConstMetric(queueAllocDesc, prometheus.GaugeValue, r.value(q.Allocated), q.Key, r.name)
			ch <- prometheus.MustNewConstMetric(queueDeservedDesc, prometheus.GaugeValue, r.value(q.Deserved), q.Key, r.name)
		}
	}
}

// queueResources are the resources queue series are kept for, in Prometheus' base units.
var queueResources = []struct {
	name  string
	value func(placement.Resources) float64
}{
	{"nvidia.com/gpu", func(r placement.Resources) float64 { return float64(r.GPU) }},
	{"cpu", func(r placement.Resources) float64 { return float64(r.MilliCPU) / 1000 }},
	{"memory", func(r placement.Resources) float64 { return float64(r.Memory) }},
}
