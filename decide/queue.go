package decide

import (
	"fmt"

	"github.com/lockstep-sched/lockstep/placement"
	"github.com/lockstep-sched/lockstep/quota"
)

// The queue question. Before a gang's quorum is reserved, its team queue (package quota) is asked
// whether it takes the quorum now; a member beyond its gang's quorum and an ordinary pod ask it
// for themselves. Which ecosystem a queue came from is never known here.

// Queues is what the queue question reads: the quota book, what reservations and ordinary binds
// on their way hold per queue beside the bound pods' use, and the capacity the queues share.
type Queues struct {
	Book *quota.Book
	// Held is what each queue holds beside its bound pods: its gangs' reservations and its
	// ordinary binds on their way.
	Held     map[string]placement.Resources
	Capacity placement.Resources
	// Reservations are read to leave a gang's own reservation out of what its queue holds.
	Reservations Reservations
}

// QueuesOf is the queue question's part of the state: the book, what reservations and the binds
// on their way (binding, per queue) hold, and the schedulable capacity less what pods of no queue
// hold.
func QueuesOf(book *quota.Book, rs Reservations, binding map[string]placement.Resources, capacity placement.Resources) Queues {
	held := rs.HeldByQueue()
	for q, r := range binding {
		held[q] = held[q].Add(r)
	}
	return Queues{Book: book, Held: held, Capacity: capacity, Reservations: rs}
}

// queues is the snapshot's Queues.
func (s *Snapshot) queues() Queues {
	return QueuesOf(s.Quota, s.Reservations, s.QueueBinding, s.Schedulable.Sub(s.Unqueued))
}

// heldBesides is Held less what gang's own reservation sets aside: a gang asking for its quorum
// must not be counted twice, once in what it asks and once in what it holds. (A starving gang's
// hold is in neither: HeldByQueue leaves holds out.)
func (q Queues) heldBesides(gang string) map[string]placement.Resources {
	held := make(map[string]placement.Resources, len(q.Held))
	for k, r := range q.Held {
		held[k] = r
	}
	if res := q.Reservations[gang]; res != nil && res.Queue != "" && res.State != Holding {
		for i := range res.Slots {
			if s := &res.Slots[i]; s.HoldsCapacity() {
				held[res.Queue] = held[res.Queue].Sub(s.Requests)
			}
		}
	}
	return held
}

// gangWait asks whether the gang's quorum, asking req in all, may be admitted into queue now;
// "" when it may.
func (q Queues) gangWait(gang, queue string, req placement.Resources) string {
	if !q.Book.Enforcing() || queue == "" {
		return ""
	}
	why := q.Book.Admit(quota.Question{Queue: queue, Gang: gang, Request: req, Held: q.heldBesides(gang),
		Capacity: q.Capacity, Fair: true})
	if why != "" {
		return fmt.Sprintf("gang %s waits for its queue: %s", gang, why)
	}
	return ""
}

// mayHold reports whether a starving gang's queue lets it claim capacity before it frees: its
// queue takes the quorum now, and would stay within its fair share with it. What frees later may
// by then be owed to a queue below its share, which a hold granted past the share would keep.
func (q Queues) mayHold(gang, queue string, req placement.Resources) bool {
	if q.gangWait(gang, queue, req) != "" {
		return false
	}
	if !q.Book.Enforcing() || queue == "" {
		return true
	}
	return q.Book.WithinShare(quota.Question{Queue: queue, Gang: gang, Request: req,
		Held: q.heldBesides(gang), Capacity: q.Capacity}) == ""
}

// PodWait asks for one pod that needs no quorum (an ordinary pod, or a member beyond its gang's
// quorum) whether queue takes it now: only the queue's hard limits and others' guarantees apply.
// "" when it does.
func (q Queues) PodWait(namespace, name, queue string, req placement.Resources) string {
	if !q.Book.Enforcing() || queue == "" {
		return ""
	}
	why := q.Book.Admit(quota.Question{Queue: queue, Request: req, Held: q.Held, Capacity: q.Capacity})
	if why != "" {
		return fmt.Sprintf("pod %s/%s waits for its queue: %s", namespace, name, why)
	}
	return ""
}

// Takes reports whether the queue ref names, for a gang of namespace, could take a gang asking req
// now by its state, its limits and the others' guarantees: Volcano's enqueue test, made before a
// PodGroup goes Inqueue and its job controller creates the pods. Fairness is left to admission: a
// gang must exist to wait its turn. A gang with a reservation was admitted already.
func (q Queues) Takes(namespace, name string, ref quota.Ref, req placement.Resources) (bool, string) {
	key := namespace + "/" + name
	if !q.Book.Enforcing() || q.Reservations.Live(key) != nil {
		return true, ""
	}
	why := q.Book.Admit(quota.Question{Queue: q.Book.Resolve(namespace, ref), Gang: key, Request: req,
		Held: q.heldBesides(key), Capacity: q.Capacity})
	return why == "", why
}

// ranker ranks team queues for the line, computing the shares once for all; it ranks every queue
// alike where none is enforced.
func (q Queues) ranker() func(queue string) quota.Rank {
	if !q.Book.Enforcing() {
		return func(string) quota.Rank { return quota.Rank{} }
	}
	shares := q.Book.Shares(q.Capacity, q.Held, "", placement.Resources{})
	return func(queue string) quota.Rank { return q.Book.Rank(queue, shares, q.Held) }
}

// QuorumRequests is what pods ask in all: a quorum's members, or a unit reclaim takes.
func QuorumRequests(members []*Pod) placement.Resources {
	var sum placement.Resources
	for _, p := range members {
		sum = sum.Add(p.Requests)
	}
	return sum
}

// QueueWait is the queue question for a member past its gang's quorum: as for an ordinary pod.
func (s *Snapshot) QueueWait(p *Pod) string {
	return s.queues().PodWait(p.Namespace, p.Name, p.Queue, p.Requests)
}
