package quota

import (
	"fmt"

	"github.com/lockstep-sched/lockstep/placement"
)

// Reclaim is the arithmetic of taking capacity back for a queue below its share from queues
// above theirs. Its owner picks the victims (whole gangs, or members beyond their gang's quorum)
// and places the gang; Reclaim says which queue may lose how much. Two rules keep it from
// ping-pong (Volcano #4947, #561): the reclaiming queue ends no higher than its share, and a
// queue it takes from ends no lower than its own, so neither can take the capacity back again.
type Reclaim struct {
	book   *Book
	held   map[string]Resources
	shares map[string]Resources
	// taken is what the plan takes from each queue so far.
	taken map[string]Resources
	// scarce are the resources the gang asks more of than the queues have free: a queue keeps its
	// share of these. Of the others nobody is short, and their shares (what each asks, when
	// there is room for all) say nothing of who should give way.
	scarce ResourceSet
	// queue is the reclaiming queue: a parent it shares with a victim loses nothing by the move.
	queue string
}

// StartReclaim opens a reclaim for q (its queue, its gang's whole quorum), or says why its queue
// may not reclaim: it would end above its fair share, or no queue is enforced.
func (b *Book) StartReclaim(q Question) (*Reclaim, string) {
	if !b.enforced(q.Queue) {
		return nil, "no team queue is enforced"
	}
	shares, why := b.withinShare(q)
	if why != "" {
		return nil, why + "; it takes nothing back from other queues"
	}
	return &Reclaim{book: b, held: q.Held, shares: shares, taken: map[string]Resources{}, scarce: b.scarce(q), queue: q.Queue}, ""
}

// WithinShare says why q would take its queue above its fair share, "" when it would not (or no
// queue is enforced). A claim on capacity before it frees (a starving gang's hold) is granted
// only within the share: what frees later may be owed to a queue that is below its own by then.
func (b *Book) WithinShare(q Question) string {
	if !b.enforced(q.Queue) {
		return ""
	}
	_, why := b.withinShare(q)
	return why
}

func (b *Book) withinShare(q Question) (map[string]Resources, string) {
	shares := b.Shares(q.Capacity, q.Held, q.Queue, b.unrecorded(q))
	alloc := b.allocated(q.Queue, q.Held)
	for _, res := range countedNames {
		if need := q.Request.Get(res); need > 0 && alloc.Get(res)+need > shares[q.Queue].Get(res) {
			return shares, fmt.Sprintf("%s would end above its fair share of %s (deserves %s, holds %s, %s asks %s more)",
				q.Queue, res, placement.Amount(res, shares[q.Queue].Get(res)), placement.Amount(res, alloc.Get(res)), asker(q), placement.Amount(res, need))
		}
	}
	return shares, ""
}

// scarce are the resources q asks more of than the queues have free in all; when none is (the
// free capacity lies in pieces too small), every resource it asks.
func (b *Book) scarce(q Question) ResourceSet {
	free := q.Capacity.Sub(b.totalAllocated(q.Held))
	var short, asked ResourceSet
	for _, res := range countedNames {
		if need := q.Request.Get(res); need > 0 {
			asked |= SetOf(res)
			if need > free.Get(res) {
				short |= SetOf(res)
			}
		}
	}
	if short == 0 {
		return asked
	}
	return short
}

// MayTake reports whether the plan may take r more from queue: the queue lets others reclaim
// from it, and what it keeps stays at or above its share, its guarantee and its min. In a tree
// the same holds for each of its parents that is not also the reclaiming queue's: reclaim takes
// back along the tree, from a subtree above its share for one below.
func (rc *Reclaim) MayTake(queue string, r Resources) bool {
	e := rc.book.queues[queue]
	if e == nil || !e.defined || !e.q.Reclaimable {
		return false
	}
	for _, key := range rc.book.tree.lineage(queue) {
		if rc.book.tree.contains(key, rc.queue) {
			return true // from here up, the reclaiming queue's own parents: they keep what they had
		}
		if !rc.keeps(key, r) {
			return false
		}
	}
	return true
}

// keeps reports whether queue key, losing r more, keeps at least what it is due.
func (rc *Reclaim) keeps(key string, r Resources) bool {
	var taken Resources
	for _, k := range rc.book.tree.subtree(key) {
		taken = taken.Add(rc.taken[k])
	}
	left := rc.book.subtreeAllocated(key, rc.held).Sub(taken).Sub(r)
	for _, res := range countedNames {
		if r.Get(res) == 0 {
			continue
		}
		keep := rc.book.floor(key, res)
		if rc.scarce.Has(SetOf(res)) {
			keep = max(keep, rc.shares[key].Get(res))
		}
		if left.Get(res) < keep {
			return false
		}
	}
	return true
}

// Take records that the plan takes r from queue; Give puts it back.
func (rc *Reclaim) Take(queue string, r Resources) { rc.taken[queue] = rc.taken[queue].Add(r) }

func (rc *Reclaim) Give(queue string, r Resources) { rc.taken[queue] = rc.taken[queue].Sub(r) }
