package gang

import (
	"github.com/prometheus/client_golang/prometheus"
)

// Metrics are the gang manager's Prometheus series. A nil *Metrics records nothing, which keeps
// unit tests free of registries.
type Metrics struct {
	binds *prometheus.CounterVec
}

// NewMetrics registers the manager's counters, and gauges read from m at scrape time, on reg.
func NewMetrics(reg prometheus.Registerer) *Metrics {
	mt := &Metrics{
		binds: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "lockstep_binds_total",
			Help: "Bindings lockstep wrote, by kind (ordinary pod or gang member at commit) and result (committed or failed).",
		}, []string{"kind", "result"}),
	}
	reg.MustRegister(mt.binds)
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

// Collector exposes gang phases and held reservations, computed from the manager's state when
// Prometheus scrapes rather than kept in step on every change.
func (m *Manager) Collector() prometheus.Collector { return &gangCollector{m: m} }

var (
	gangsDesc = prometheus.NewDesc("lockstep_gangs", "Gangs lockstep knows, by phase.", []string{"phase"}, nil)
	slotsDesc = prometheus.NewDesc("lockstep_reservations_held", "Member places held in live gang reservations.", nil, nil)
	gpusDesc  = prometheus.NewDesc("lockstep_reserved_gpus", "GPUs held in live gang reservations.", nil, nil)
)

type gangCollector struct{ m *Manager }

func (c *gangCollector) Describe(ch chan<- *prometheus.Desc) {
	ch <- gangsDesc
	ch <- slotsDesc
	ch <- gpusDesc
}

func (c *gangCollector) Collect(ch chan<- prometheus.Metric) {
	counts := map[Phase]int{PhaseWaiting: 0, PhaseReserving: 0, PhaseBound: 0, PhaseTimedOut: 0}
	slots, gpus := 0, int64(0)
	for _, g := range c.m.Status("") {
		counts[g.Phase]++
		for _, mb := range g.Members {
			if mb.ReservationExpires != nil {
				slots++
				gpus += mb.gpus
			}
		}
	}
	for phase, n := range counts {
		ch <- prometheus.MustNewConstMetric(gangsDesc, prometheus.GaugeValue, float64(n), string(phase))
	}
	ch <- prometheus.MustNewConstMetric(slotsDesc, prometheus.GaugeValue, float64(slots))
	ch <- prometheus.MustNewConstMetric(gpusDesc, prometheus.GaugeValue, float64(gpus))
}
