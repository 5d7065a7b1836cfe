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
	cache *gocache.Cache
}

// newReservationBook makes a book that hands expired reservations to onExpired, on a goroutine of
// their own: go-cache calls back without its own lock but possibly while the caller of Delete
// holds the manager's.
func newReservationBook(onExpired func(gang string, res *reservation)) *reservationBook {
	// No janitor of go-cache's own: it would hold the callback, and with it the manager, for the
	// life of the process. The manager's sweep runs until Stop.
	b := &reservationBook{cache: gocache.New(gocache.NoExpiration, 0)}
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
}

// sweep evicts expired reservations, which reports each through the book's onExpired.
func (b *reservationBook) sweep() { b.cache.DeleteExpired() }

// held sums what live reservations hold per node, leaving out one gang's own (its members may use
// what their gang holds), and the same per gang, for reasons.
func (b *reservationBook) held(excludeGang string) (byNode, byGang map[string]placement.Resources) {
	byNode, byGang = map[string]placement.Resources{}, map[string]placement.Resources{}
	for key, item := range b.cache.Items() {
		res := item.Object.(*reservation)
		if key == excludeGang || res.state == released {
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

// holders names, sorted, the gangs other than excludeGang holding capacity on a node: the same
// message every time, so that the scheduler folds identical node reasons and lockstep's event
// de-duplication holds.
func (b *reservationBook) holders(node, excludeGang string) string {
	var names []string
	for key, item := range b.cache.Items() {
		if key == excludeGang {
			continue
		}
		for _, s := range item.Object.(*reservation).slots {
			if s.node == node && s.holdsCapacity() {
				names = append(names, key)
				break
			}
		}
	}
	sort.Strings(names)
	return strings.Join(names, ", ")
}
