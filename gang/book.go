package gang

import (
	"sort"
	"strings"
	"time"

	gocache "github.com/patrickmn/go-cache"

	"github.com/lockstep-sched/lockstep/placement"
)

// reservationBook holds the gangs' tentative reservations, one per gang key, in a go-cache TTL
// cache. go-cache hides an expired entry from Get and Items the moment it expires, so the capacity
// of a gang that never reached quorum is free for others at once; the sweep reports the expiry
// later (see expiry.go). Its methods expect the manager's lock, except sweep.
type reservationBook struct {
	cache      *gocache.Cache
	onReleased func(res *reservation)
}

// newReservationBook makes a book that hands expired reservations to onExpired, on a goroutine of
// their own: go-cache calls back without its own lock but possibly while the caller of Delete
// holds the manager's.
// onReleased runs under the manager's lock as release drops a reservation.
func newReservationBook(onExpired func(gang string, res *reservation), onReleased func(res *reservation)) *reservationBook {
	// No janitor of go-cache's own: it would hold the callback, and with it the manager, for the
	// life of the process. The manager's sweep runs until Stop.
	b := &reservationBook{cache: gocache.New(gocache.NoExpiration, 0), onReleased: onReleased}
	b.cache.OnEvicted(func(gang string, v any) { go onExpired(gang, v.(*reservation)) })
	return b
}

// live is a gang's reservation while it holds capacity: not expired, not released.
func (b *reservationBook) live(gang string) *reservation {
	v, ok := b.cache.Get(gang)
	if !ok {
		return nil
	}
	res := v.(*reservation)
	if res.state == released {
		return nil
	}
	return res
}

// add books a new reservation for ttl.
func (b *reservationBook) add(res *reservation, ttl time.Duration) { b.cache.Set(res.gang, res, ttl) }

// keepUntilReleased stops a committing reservation from expiring: a commit can outlive the
// waiting time when the apiserver is slow, and the capacity stays held until the last binding is
// answered so that nothing else is offered it meanwhile.
func (b *reservationBook) keepUntilReleased(res *reservation) {
	b.cache.Set(res.gang, res, gocache.NoExpiration)
}

// release drops a reservation, committed or not, and wakes the binds waiting on it.
func (b *reservationBook) release(res *reservation) {
	if res.state == released {
		return
	}
	res.state = released
	b.cache.Delete(res.gang)
	close(res.done)
	if b.onReleased != nil {
		b.onReleased(res)
	}
}

// sweep evicts expired reservations, which reports each through the book's onExpired.
func (b *reservationBook) sweep() { b.cache.DeleteExpired() }

// A view is which reservations a decision must respect: every live one but the deciding gang's
// own (its members may use what their gang holds), less those that yield to the decider's
// priority and those a takeover plan releases.
type view struct {
	own string
	// priority, when takeover is set, is the decider's: reservations still reserving at a lower
	// priority yield to it. Committing ones never yield: their bindings are being written.
	priority int32
	takeover bool
	// released are reservations a takeover plan gives up.
	released map[*reservation]bool
	// quorums is capacity, per node, that members beyond their gang's quorum leave to the
	// quorums of waiting gangs (protectedQuorums); quorumsOf names those gangs per node.
	quorums   map[string]placement.Resources
	quorumsOf map[string][]string
}

// everyOther is the view that respects every live reservation but own's.
func everyOther(own string) view { return view{own: own} }

// above is the view of a decider at priority: lower-priority reservations yield to it.
func above(own string, priority int32) view {
	return view{own: own, priority: priority, takeover: true}
}

// counts reports whether the view respects a reservation.
func (v view) counts(key string, res *reservation) bool {
	switch {
	case key == v.own || res.state == released || v.released[res]:
		return false
	case v.takeover && res.yieldsTo(v.priority):
		return false
	}
	return true
}

// held sums what the reservations the view respects hold per node, and the same per gang, for
// reasons.
func (b *reservationBook) held(v view) (byNode, byGang map[string]placement.Resources) {
	byNode, byGang = map[string]placement.Resources{}, map[string]placement.Resources{}
	for key, item := range b.cache.Items() {
		res := item.Object.(*reservation)
		if !v.counts(key, res) {
			continue
		}
		for _, s := range res.slots {
			if s.holdsCapacity() {
				byNode[s.node] = byNode[s.node].Add(s.requests)
				byGang[key] = byGang[key].Add(s.requests)
			}
		}
	}
	return byNode, byGang
}

// heldByQueue sums what live reservations hold per team queue: what a queue holds besides its
// bound pods. A starving gang's hold is left out: it is a claim on capacity as it frees, mostly
// on capacity others still use, and counted as its queue's it would make a queue that waits
// below its share look served, so that a queue above its share took what frees elsewhere.
func (b *reservationBook) heldByQueue() map[string]placement.Resources {
	out := map[string]placement.Resources{}
	for _, item := range b.cache.Items() {
		res := item.Object.(*reservation)
		if res.queue == "" || res.state == released || res.state == holding {
			continue
		}
		for _, s := range res.slots {
			if s.holdsCapacity() {
				out[res.queue] = out[res.queue].Add(s.requests)
			}
		}
	}
	return out
}

// holders names, sorted, the gangs holding capacity on a node that the view respects: the same
// message every time, so that the scheduler folds identical node reasons and lockstep's event
// de-duplication holds.
func (b *reservationBook) holders(node string, v view) string {
	var names []string
	for key, item := range b.cache.Items() {
		res := item.Object.(*reservation)
		if !v.counts(key, res) {
			continue
		}
		for _, s := range res.slots {
			if s.node == node && s.holdsCapacity() {
				names = append(names, key)
				break
			}
		}
	}
	sort.Strings(names)
	return strings.Join(names, ", ")
}

// holder is the gang holding capacity under the starvation rule, "" for none.
func (b *reservationBook) holder() string {
	for key, item := range b.cache.Items() {
		if item.Object.(*reservation).state == holding {
			return key
		}
	}
	return ""
}

// yielding lists the reservations that yield to a decider at priority (other than own's), the
// lowest priority first and, among equals, the newest first: it has waited least.
func (b *reservationBook) yielding(own string, priority int32) []*reservation {
	var out []*reservation
	for key, item := range b.cache.Items() {
		if res := item.Object.(*reservation); key != own && res.yieldsTo(priority) {
			out = append(out, res)
		}
	}
	sort.Slice(out, func(i, j int) bool {
		if out[i].priority != out[j].priority {
			return out[i].priority < out[j].priority
		}
		if !out[i].created.Equal(out[j].created) {
			return out[i].created.After(out[j].created)
		}
		return out[i].gang < out[j].gang
	})
	return out
}
