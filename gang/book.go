package gang

import (
	"context"
	"fmt"
	"time"

	gocache "github.com/patrickmn/go-cache"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/klog/v2"

	"github.com/lockstep-sched/lockstep/decide"
	"github.com/lockstep-sched/lockstep/placement"
	"github.com/lockstep-sched/lockstep/wellknown"
)

// reservationBook holds the gangs' tentative reservations, one per gang key, in a go-cache TTL
// cache. go-cache hides an expired entry from Get and Items the moment it expires, so the capacity
// of a gang that never reached quorum is free for others at once; the sweep reports the expiry
// later (see the end of this file). Its methods expect the manager's lock, except sweep.
type reservationBook struct {
	cache      *gocache.Cache
	onReleased func(res *reservation)
	// touched are the gangs whose entry changed since the snapshot last looked (snapshot.go):
	// booked, kept, released, or a change to what decisions read of it (reservation.changed).
	touched map[string]bool
}

// newReservationBook makes a book that hands expired reservations to onExpired, on a goroutine of
// their own: go-cache calls back without its own lock but possibly while the caller of Delete
// holds the manager's.
// onReleased runs under the manager's lock as release drops a reservation.
func newReservationBook(onExpired func(gang string, res *reservation), onReleased func(res *reservation)) *reservationBook {
	// No janitor of go-cache's own: it would hold the callback, and with it the manager, for the
	// life of the process. The manager's sweep runs until Stop.
	b := &reservationBook{cache: gocache.New(gocache.NoExpiration, 0), onReleased: onReleased, touched: map[string]bool{}}
	b.cache.OnEvicted(func(gang string, v any) { go onExpired(gang, v.(*reservation)) })
	return b
}

// live is a gang's reservation or hold while it holds capacity: not expired, not released.
func (b *reservationBook) live(gang string) *reservation {
	v, ok := b.cache.Get(gang)
	if !ok {
		return nil
	}
	res := v.(*reservation)
	if res.state == decide.Released {
		return nil
	}
	return res
}

// reserving is the gang's reservation for members on their way, nil when it has none; a starving
// gang's hold is not one.
func (b *reservationBook) reserving(gang string) *reservation {
	if res := b.live(gang); res != nil && res.state != decide.Holding {
		return res
	}
	return nil
}

// hold is the gang's hold under the starvation rule, nil when it has none.
func (b *reservationBook) hold(gang string) *reservation {
	if res := b.live(gang); res != nil && res.state == decide.Holding {
		return res
	}
	return nil
}

// add books a new reservation for ttl.
func (b *reservationBook) add(res *reservation, ttl time.Duration) { b.set(res, ttl) }

// keepUntilReleased stops a committing reservation from expiring: a commit can outlive the
// waiting time when the apiserver is slow, and the capacity stays held until the last binding is
// answered so that nothing else is offered it meanwhile.
func (b *reservationBook) keepUntilReleased(res *reservation) { b.set(res, gocache.NoExpiration) }

// set puts res in the cache for ttl and remembers, in the reservation, the very instant go-cache
// will hide it (zero for never): the snapshot drops it then, without asking the cache again.
func (b *reservationBook) set(res *reservation, ttl time.Duration) {
	b.cache.Set(res.gang, res, ttl)
	_, res.hiddenAt, _ = b.cache.GetWithExpiration(res.gang)
	res.book = b
	res.changed()
}

// release drops a reservation, committed or not, and wakes the binds waiting on it.
func (b *reservationBook) release(res *reservation) {
	if res.state == decide.Released {
		return
	}
	res.state = decide.Released
	res.changed()
	b.cache.Delete(res.gang)
	close(res.done)
	if b.onReleased != nil {
		b.onReleased(res)
	}
}

// sweep evicts expired reservations, which reports each through the book's onExpired.
func (b *reservationBook) sweep() { b.cache.DeleteExpired() }

// empty reports whether the book holds nothing, expired entries not yet swept included: most
// calls then need no copy of it.
func (b *reservationBook) empty() bool { return b.cache.ItemCount() == 0 }

// view is the live reservations and holds as decisions read them, copied (keep as in
// reservation.view), and the live ones they were copied from, by gang. A decision names
// reservations by gang, and applying it must reach the very ones it read: go-cache hides an entry
// the moment it expires, so asking the book again even under the same lock can find one gone.
func (b *reservationBook) view(keep bool) (decide.Reservations, map[string]*reservation) {
	if b.empty() {
		return nil, nil // most calls of a cluster without gangs waiting: no copy to make
	}
	items := b.cache.Items()
	out, live := make(decide.Reservations, len(items)), make(map[string]*reservation, len(items))
	for key, item := range items {
		if res := item.Object.(*reservation); res.state != decide.Released {
			out[key], live[key] = res.view(keep), res
		}
	}
	return out, live
}

// reservations is view for questions that only read, under the shared lock.
func (b *reservationBook) reservations() decide.Reservations {
	rs, _ := b.view(false)
	return rs
}

// holder is the gang holding capacity under the starvation rule, "" for none.
func (b *reservationBook) holder() string {
	for key, item := range b.cache.Items() {
		if item.Object.(*reservation).state == decide.Holding {
			return key
		}
	}
	return ""
}

// --- reservations --------------------------------------------------------------------------

// A reservation is a gang's tentative hold on capacity: one slot per member it plans to bind. It
// lives in a go-cache TTL cache under the gang's key (book.go), so capacity held by a gang that
// never reaches quorum comes back on its own after the gang's waiting time. This is the live one,
// whose slots binds and commits move along; decisions read its view (decide.Reservation).

type slot struct {
	// pod is the member holding the slot; nil while Planned.
	pod *podInfo
	// plannedFor is the member the plan had in mind (by UID: podInfo records are replaced on every
	// informer update); it gets the slot first when it arrives.
	plannedFor types.UID
	node       string
	requests   placement.Resources
	state      decide.SlotState
	// settled: the informer reported the member bound on node, so the ledger counts its
	// capacity and the slot no longer does (ledger.settleSlot). Read and written under the
	// manager's lock only; the commit goroutine never looks at it.
	settled bool
	err     error
	// gpuIDs are the GPU indices chosen for the member when the gang commits.
	gpuIDs []int
	// cancel stops the member's binding while the gang commits; nil before.
	cancel context.CancelFunc
	// nominated is the node the member the slot was planned for was nominated to
	// (apply.go); "" when no nomination stands.
	nominated string
}

// holdsCapacity reports whether the slot's capacity is still set aside (a bound member's capacity
// is counted on its node instead).
func (s *slot) holdsCapacity() bool { return s.state < decide.SlotBound && !s.settled }

type reservation struct {
	gang     string
	priority int32
	// queue is the key of the team queue the gang's capacity counts toward, "" for none.
	queue   string
	created time.Time
	expires time.Time
	slots   []*slot
	state   decide.ReservationState
	// expired tells waiters why the reservation ended without a commit.
	expired bool
	// yieldedTo, when set, says which higher-priority work took the reservation's capacity.
	yieldedTo string
	// done is closed when the reservation is released, by commit or expiry.
	done chan struct{}
	// changes counts the changes to what decisions read of it (its state, its slots); copy is its
	// view as of copied changes (view).
	changes, copied uint64
	copy            *decide.Reservation
	// book is the one it is booked in, which hides it from hiddenAt on (zero: never); nil
	// before it is booked.
	book     *reservationBook
	hiddenAt time.Time
}

// changed notes that what decisions read of the reservation changed: its state, or a slot's
// member, node, requests, state or settling. Every such change calls it, or decisions would read
// the reservation as it was (the tests compare every view kept with a fresh one).
func (r *reservation) changed() {
	r.changes++
	if r.book != nil {
		r.book.touched[r.gang] = true
	}
}

// hidden reports whether go-cache hides the reservation at now: it expired, and the sweep has not
// reported it yet.
func (r *reservation) hidden(now time.Time) bool {
	return !r.hiddenAt.IsZero() && now.After(r.hiddenAt)
}

// newReservation makes a decision's planned reservation live; the member at filter, if its slot
// names one, holds its slot already.
func newReservation(plan *decide.Reservation, member *podInfo) *reservation {
	res := &reservation{gang: plan.Gang, priority: plan.Priority, queue: plan.Queue, created: plan.Created,
		expires: plan.Expires, state: plan.State, done: make(chan struct{})}
	for _, s := range plan.Slots {
		live := &slot{plannedFor: s.PlannedFor, node: s.Node, requests: s.Requests, state: s.State}
		if s.Pod != "" && member != nil && s.Pod == member.UID {
			live.pod = member
		}
		res.slots = append(res.slots, live)
	}
	return res
}

// view is the reservation as decisions read it, its slots copied. The copy is kept until the
// reservation next changes when keep says the caller holds the lock for writing: a burst of gangs
// holds hundreds of reservations, and each member's filter would copy them all again.
func (r *reservation) view(keep bool) *decide.Reservation {
	if r.copy != nil && r.copied == r.changes {
		return r.copy
	}
	out := r.copyView()
	if keep {
		r.copy, r.copied = out, r.changes
	}
	return out
}

// copyView is a copy of the reservation as decisions read it, made now.
func (r *reservation) copyView() *decide.Reservation {
	out := &decide.Reservation{Gang: r.gang, Priority: r.priority, Queue: r.queue, Created: r.created,
		Expires: r.expires, State: r.state, Slots: make([]decide.Slot, len(r.slots))}
	for i, s := range r.slots {
		out.Slots[i] = decide.Slot{PlannedFor: s.plannedFor, Node: s.node, Requests: s.requests, State: s.state, Settled: s.settled}
		if s.pod != nil {
			out.Slots[i].Pod = s.pod.UID
		}
	}
	return out
}

func (r *reservation) slotOf(uid types.UID) *slot {
	for _, s := range r.slots {
		if s.pod != nil && s.pod.UID == uid {
			return s
		}
	}
	return nil
}

// slotFor is the slot a member holds or, failing that, the one still planned for it.
func (r *reservation) slotFor(uid types.UID) *slot {
	if s := r.slotOf(uid); s != nil {
		return s
	}
	for _, s := range r.slots {
		if s.plannedFor == uid && s.state == decide.SlotPlanned {
			return s
		}
	}
	return nil
}

// take gives a slot to a member.
func (r *reservation) take(s *slot, p *podInfo) {
	r.changed()
	s.pod, s.state = p, decide.SlotReserved
	s.requests = p.Requests
}

// unclaim returns a departed member's slot to the pool so a replacement can take it.
func (r *reservation) unclaim(uid types.UID) {
	if s := r.slotOf(uid); s != nil && s.holdsCapacity() {
		r.changed()
		s.pod, s.state = nil, decide.SlotPlanned
	}
}

func (r *reservation) countState(state decide.SlotState) int {
	n := 0
	for _, s := range r.slots {
		if s.state == state {
			n++
		}
	}
	return n
}

// --- how reservations end by expiring -------------------------------------------------------

// A reservation that expires before quorum gives its capacity back at once (the book stops
// offering it), but its gang, its waiting binds and the gangs waiting behind it learn of it here:
// from the sweep, or from the gang's next filter when that comes first.

// onExpired runs when the book evicts an expired reservation (or after its own release, which it
// then ignores because the reservation is already released).
func (m *Manager) onExpired(gang string, res *reservation) {
	var fx effects
	m.locked(func() { m.expireLocked(gang, res, &fx) })
	m.emit(&fx)
}

// expireLocked ends a reservation that expired before quorum: its waiting binds wake, its gang is
// marked TimedOut with a reason, and the gangs waiting behind it are woken.
func (m *Manager) expireLocked(key string, res *reservation, fx *effects) {
	if res.state != decide.Reserving {
		return
	}
	res.state = decide.Released
	res.changed()
	res.expired = true
	close(res.done)
	m.nominations.withdrawReleased(res)
	m.metrics.observeExpiry()
	g, ok := m.ledger.gangs[key]
	if !ok {
		return
	}
	view := g.view()
	ready := res.countState(decide.SlotWaiting) + view.BoundCount()
	h := g.History
	h.TimedOut, h.TimedOutAt = true, m.now()
	m.ledger.setHistory(g, h)
	g.lastReason = fmt.Sprintf("gang %s: reservation expired after %s with %d of %d members ready to bind; capacity released, the gang plans again when a member is retried",
		key, res.expires.Sub(res.created).Round(time.Second), ready, view.MinAvailable())
	klog.InfoS("Gang reservation expired", "gang", key, "ready", ready)
	m.wake.capacityFreed(key, fx)
	for _, p := range g.sortedMembers() {
		fx.podEvent(p, corev1.EventTypeWarning, wellknown.ReasonGangTimedOut, g.lastReason)
		if !p.Holds() && !p.Terminal {
			m.wake.write(p, wellknown.ConditionReasonTimedOut, g.lastReason, fx)
		}
	}
}

// catchUpExpiryLocked reports, for a gang the book holds no live reservation for, its last one
// if that expired but was not swept yet, and says whether it did. The book hides it at once, but
// a new reservation would replace it unreported: its waiters would not wake, and the gang's
// time-out and cool-down would be skipped.
func (m *Manager) catchUpExpiryLocked(g *gangInfo, fx *effects) bool {
	if old := g.reservation; old != nil && old.state == decide.Reserving {
		m.expireLocked(g.key, old, fx)
		return true
	}
	return false
}
