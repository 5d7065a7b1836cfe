package extender

import (
	"net/http"

	corev1 "k8s.io/api/core/v1"

	"github.com/lockstep-sched/lockstep/gang"
	"github.com/lockstep-sched/lockstep/placement"
	"github.com/lockstep-sched/lockstep/quota"
	"github.com/lockstep-sched/lockstep/views"
	"github.com/lockstep-sched/lockstep/wellknown"
)

var quotaResources = []corev1.ResourceName{wellknown.ResourceGPU, corev1.ResourceCPU, corev1.ResourceMemory}

// amounts writes the resources of r that are not zero, or those named when named is not zero.
func amounts(r placement.Resources, named quota.ResourceSet) views.Quantities {
	out := views.Quantities{}
	for _, name := range quotaResources {
		if (named != 0 && named.Has(quota.SetOf(name))) || (named == 0 && r.Get(name) != 0) {
			out[name] = placement.Amount(name, r.Get(name))
		}
	}
	return out
}

func queueToJSON(v gang.QueueView) views.QueueStatus {
	q := v.Queue
	out := views.QueueStatus{Key: v.Key, Kind: q.Kind, Name: q.Name, Namespace: q.Namespace, Source: q.Source, Defined: v.Defined,
		State: string(q.State), Weight: q.Weight, Priority: q.Priority, Reclaimable: q.Reclaimable,
		Capability: amounts(q.Capability.Amount, q.Capability.Named), Guarantee: amounts(q.Guarantee, 0), Min: amounts(q.Min, 0),
		Deserved: amounts(v.Deserved, 0), Used: amounts(v.Used, 0), Held: amounts(v.Held, 0), Allocated: amounts(v.Allocated, 0),
		Waiting: []views.WaitingGang{}, Parent: v.Parent, Children: v.Children}
	switch {
	case q.Err != nil:
		out.Error = q.Err.Error()
	case v.Problem != "":
		out.Error = v.Problem
	}
	for _, g := range v.Gangs {
		out.Waiting = append(out.Waiting, views.WaitingGang{Gang: g.Gang, Asks: amounts(g.Asks, 0), Reason: g.Reason})
	}
	return out
}

// queues lists every team queue lockstep knows with its share, what it holds and who waits.
func (s *server) queues(w http.ResponseWriter, _ *http.Request) {
	list := s.sched.Queues()
	out := views.QueueList{Queues: make([]views.QueueStatus, 0, len(list))}
	for _, v := range list {
		out.Queues = append(out.Queues, queueToJSON(v))
	}
	writeJSON(w, http.StatusOK, out)
}
