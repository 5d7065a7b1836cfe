package gang

import (
	"fmt"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/klog/v2"

	"github.com/lockstep-sched/lockstep/gangspec"
	"github.com/lockstep-sched/lockstep/wellknown"
)

// A reservation that expires before quorum gives its capacity back at once (the book stops
// offering it), but its gang, its waiting binds and the gangs waiting behind it learn of it here:
// from the sweep, or from the gang's next filter when that comes first.

// sweepExpired evicts expired reservations every ExpiryCheckInterval until Stop.
func (m *Manager) sweepExpired() {
	tick := time.NewTicker(m.cfg.ExpiryCheckInterval)
	defer tick.Stop()
	for {
		select {
		case <-tick.C:
			m.book.sweep()
			m.checkWaitingGangs()
		case <-m.stop:
			return
		}
	}
}

// checkWaitingGangs gives a starving gang its hold when no filter call did, and wakes a gang left
// stranded.
func (m *Manager) checkWaitingGangs() {
	var fx effects
	m.locked(func() {
		m.holdForStarvingLocked(&fx)
		m.wakeStrandedLocked(&fx)
		m.recallParkedLocked(&fx)
	})
	m.apply(&fx)
}

// strandedAfter is how long a gang whose quorum fits free capacity may go without a member at
// filter before lockstep wakes it. The scheduler retries a parked pod only on cluster events it
// deems relevant, or after five minutes; lockstep's own changes of mind (capacity that another
// gang's commit stops counting, say) are no such event, and the wake-ups lockstep writes can be
// dropped under pressure. This is the net under all of them.
const strandedAfter = 10 * time.Second

// strandedChecks bounds the gangs planned per look: the first in line are the ones that matter,
// and a look runs under the manager's lock.
const strandedChecks = 4

// wakeStrandedLocked wakes the first gang in line whose quorum fits free capacity now, though no
// member of it has been to filter for strandedAfter. It looks once per strandedAfter, and wakes a
// gang once per refusal.
func (m *Manager) wakeStrandedLocked(fx *effects) {
	now := m.now()
	if now.Sub(m.strandedLook) < strandedAfter {
		return
	}
	m.strandedLook = now
	checked, planned, tries := 0, false, 0
	for _, w := range m.lineLocked() {
		g := w.g
		if w.waiting {
			m.wantLocked(g, w.quorum[0], quorumRequests(w.quorum))
			// One eviction a look, among the first in line: a member's refusal plans it at once
			// (noteTurnedAwayLocked); this is the net for a plan that could not evict enough then.
			if !planned && tries < strandedChecks {
				tries++
				if planned = m.evictForLocked(g, w.quorum[0], fx); planned {
					continue
				}
			}
		}
		// Once per refusal: a gang woken since it was last turned away either came back (and was
		// turned away again, or reserved) or the scheduler's own filters keep it from lockstep,
		// and waking it again would only hold up the gangs behind it.
		if !w.waiting || g.turnedAway.IsZero() || now.Sub(g.turnedAway) < strandedAfter || g.woken.After(g.turnedAway) {
			continue
		}
		if checked++; checked > strandedChecks {
			return
		}
		if _, plan, _ := m.planQuorum(g, m.planMembers(w.quorum, nil), everyOther(g.key)); !plan.OK {
			continue
		}
		g.woken = now
		klog.V(2).InfoS("Waking a gang whose quorum fits", "gang", g.key, "lastTurnedAway", g.turnedAway)
		m.wakeLocked(g, wellknown.ConditionReasonQuorumFits, "gang "+g.key+"'s quorum fits free capacity; it is being planned again", fx)
		return
	}
}

// onExpired runs when the book evicts an expired reservation (or after its own release, which it
// then ignores because the reservation is already released).
func (m *Manager) onExpired(gang string, res *reservation) {
	var fx effects
	m.mu.Lock()
	m.expireLocked(gang, res, &fx)
	m.mu.Unlock()
	m.apply(&fx)
}

// expireLocked ends a reservation that expired before quorum: its waiting binds wake, its gang is
// marked TimedOut with a reason, and the gangs waiting behind it are woken.
func (m *Manager) expireLocked(key string, res *reservation, fx *effects) {
	if res.state != reserving {
		return
	}
	res.state = released
	res.expired = true
	close(res.done)
	m.withdrawReleasedLocked(res)
	m.metrics.observeExpiry()
	g, ok := m.ledger.gangs[key]
	if !ok {
		return
	}
	ready := res.countState(slotWaiting) + g.boundCount()
	g.timedOut, g.timedOutAt = true, m.now()
	g.lastReason = fmt.Sprintf("gang %s: reservation expired after %s with %d of %d members ready to bind; capacity released, the gang plans again when a member is retried",
		key, res.expires.Sub(res.created).Round(time.Second), ready, g.minAvailable())
	klog.InfoS("Gang reservation expired", "gang", key, "ready", ready)
	m.capacityFreedLocked(key, fx)
	for _, p := range g.sortedMembers() {
		fx.podEvent(p, corev1.EventTypeWarning, wellknown.ReasonGangTimedOut, g.lastReason)
		if !p.holds() && !p.terminal {
			m.writeConditionLocked(p, wellknown.ConditionReasonTimedOut, g.lastReason, fx)
		}
	}
}

// catchUpExpiryLocked reports, for a gang the book holds no live reservation for, its last one
// if that expired but was not swept yet. The book hides it at once, but a new reservation would
// replace it unreported: its waiters would not wake, and the gang's time-out and cool-down would
// be skipped.
func (m *Manager) catchUpExpiryLocked(g *gangInfo, fx *effects) {
	if old := g.reservation; old != nil && old.state == reserving {
		m.expireLocked(g.key, old, fx)
	}
}

// coolDown is how long a gang whose reservation expired must wait before reserving again. Without
// it a gang that can never complete (a member the scheduler cannot place) would take the capacity
// back on its next retry, every time, and starve the gangs waiting behind it. It lasts one waiting
// time, long enough for every waiting pod to be retried (the scheduler's backoff is at most 10s by
// default).
func (m *Manager) coolDown(g *gangInfo, spec *gangspec.Spec) time.Duration {
	if !g.timedOut {
		return 0
	}
	return g.timedOutAt.Add(m.waitingTime(spec)).Sub(m.now())
}
