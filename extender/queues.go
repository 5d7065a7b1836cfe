package extender

import (
	"net/http"

	corev1 "k8s.io/api/core/v1"

	"github.com/lockstep-sched/lockstep/gang"
	"github.com/lockstep-sched/lockstep/placement"
	"github.com/lockstep-sched/lockstep/quota"
	"github.com/lockstep-sched/lockstep/wellknown"
)

// QueueStatus is one team queue as /debug/queues shows it: quantities as Kubernetes writes them
// ("4", "3500m", "12Gi"), so that they read like the object they came from.
type QueueStatus struct {
	Key       string `json:"key"`
	Kind      string `json:"kind"`
	Name      string `json:"name"`
	Namespace string `json:"namespace,omitempty"`
	Source    string `json:"source,omitempty"`
	// Defined is false for a queue no object defines: an implicit default, or one gangs name
	// that does not exist.
	Defined     bool        `json:"defined"`
	State       quota.State `json:"state,omitempty"`
	Weight      int64       `json:"weight,omitempty"`
	Priority    int32       `json:"priority"`
	Reclaimable bool        `json:"reclaimable"`
	Error       string      `json:"error,omitempty"`
	Capability  Quantities  `json:"capability,omitempty"`
	Guarantee   Quantities  `json:"guarantee,omitempty"`
	Min         Quantities  `json:"min,omitempty"`
	Deserved    Quantities  `json:"deserved"`
	// Used is what its bound pods request, Held what reservations hold for its gangs, Allocated
	// both.
	Used      Quantities `json:"used"`
	Held      Quantities `json:"held"`
	Allocated Quantities `json:"allocated"`
	// Waiting are its gangs waiting for capacity or for the queue, with what each asks and why.
	Waiting []WaitingGang `json:"waiting"`
}

// WaitingGang is a gang waiting in a queue: what it asks and why it waits.
type WaitingGang struct {
	Gang   string     `json:"gang"`
	Asks   Quantities `json:"asks"`
	Reason string     `json:"reason"`
}

// Quantities are amounts by resource name, as Kubernetes writes them.
type Quantities map[corev1.ResourceName]string

var quotaResources = []corev1.ResourceName{wellknown.ResourceGPU, corev1.ResourceCPU, corev1.ResourceMemory}

// amounts writes the resources of r that are not zero, or those named when named is not zero.
func amounts(r placement.Resources, named quota.ResourceSet) Quantities {
	out := Quantities{}
	for _, name := range quotaResources {
		if (named != 0 && named.Has(quota.SetOf(name))) || (named == 0 && r.Get(name) != 0) {
			out[name] = placement.Amount(name, r.Get(name))
		}
	}
	return out
}

func queueToJSON(v gang.QueueView) QueueStatus {
	q := v.Queue
	out := QueueStatus{Key: v.Key, Kind: q.Kind, Name: q.Name, Namespace: q.Namespace, Source: q.Source, Defined: v.Defined,
		State: q.State, Weight: q.Weight, Priority: q.Priority, Reclaimable: q.Reclaimable,
		Capability: amounts(q.Capability.Amount, q.Capability.Named), Guarantee: amounts(q.Guarantee, 0), Min: amounts(q.Min, 0),
		Deserved: amounts(v.Deserved, 0), Used: amounts(v.Used, 0), Held: amounts(v.Held, 0), Allocated: amounts(v.Allocated, 0),
		Waiting: []WaitingGang{}}
	if q.Err != nil {
		out.Error = q.Err.Error()
	}
	for _, g := range v.Gangs {
		out.Waiting = append(out.Waiting, WaitingGang{Gang: g.Gang, Asks: amounts(g.Asks, 0), Reason: g.Reason})
	}
	return out
}

// QueueList is the answer of /debug/queues; `kubectl lockstep queues` reads it.
type QueueList struct {
	Queues []QueueStatus `json:"queues"`
}

// queues lists every team queue lockstep knows with its share, what it holds and who waits.
func (s *server) queues(w http.ResponseWriter, _ *http.Request) {
	views := s.sched.Queues()
	out := QueueList{Queues: make([]QueueStatus, 0, len(views))}
	for _, v := range views {
		out.Queues = append(out.Queues, queueToJSON(v))
	}
	writeJSON(w, http.StatusOK, out)
}
