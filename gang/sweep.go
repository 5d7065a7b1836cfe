package gang

import (
	"time"

	"k8s.io/klog/v2"

	"github.com/lockstep-sched/lockstep/decide"
	"github.com/lockstep-sched/lockstep/wellknown"
)

// The sweep: every ExpiryCheckInterval the book's expired reservations are reported (book.go),
// a starving gang gets its hold, a gang left stranded is woken, the members new reservations
// wait for are recalled, and the devices of members no reservation holds are given back
// (releases.go).

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

// checkWaitingGangs gives a starving gang its hold when no filter call did, wakes a gang left
// stranded, and recalls the members new reservations wait for.
func (m *Manager) checkWaitingGangs() {
	var fx effects
	m.locked(func() {
		m.holdForStarvingLocked(&fx)
		m.wakeStrandedLocked(&fx)
		m.wake.recallParked(m.now(), &fx)
		if m.cfg.ClaimReleaser != nil {
			fx.releases = m.ledger.releases(m.book, m.now(), &fx)
		}
	})
	m.emit(&fx)
}

// holdForStarvingLocked gives the first starving gang in line its hold (decide's
// HoldForStarving), unless some gang holds already.
func (m *Manager) holdForStarvingLocked(fx *effects) {
	if h := m.snapshots.current().HoldForStarving(); h != nil {
		m.holdLocked(m.ledger.gangs[h.Gang], h.Hold, h.Reason)
		fx.touched(h.Gang)
	}
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
// gang once per refusal. On the way it records every plannable gang's wait, and lets one of the
// first in line evict what the scheduler's preemption cannot see (evictForLocked). Each step
// decides on the snapshot as the steps before it left the state.
func (m *Manager) wakeStrandedLocked(fx *effects) {
	now := m.now()
	if now.Sub(m.strandedLook) < strandedAfter {
		return
	}
	m.strandedLook = now
	checked, planned, tries := 0, false, 0
	for _, w := range m.snapshots.current().Line() {
		g := m.ledger.gangs[w.Gang.Key]
		if w.Plannable {
			first := m.ledger.pods[w.Quorum[0].UID]
			m.ledger.want(g.key, first.Queue, decide.QuorumRequests(w.Quorum))
			// One eviction a look, among the first in line: a member's refusal plans it at once
			// (noteTurnedAwayLocked); this is the net for a plan that could not evict enough then.
			if !planned && tries < strandedChecks {
				tries++
				if planned = m.evictForLocked(g, first, fx); planned {
					continue
				}
			}
		}
		// Once per refusal: a gang woken since it was last turned away either came back (and was
		// turned away again, or reserved) or the scheduler's own filters keep it from lockstep,
		// and waking it again would only hold up the gangs behind it.
		if !w.Plannable || g.turnedAway.IsZero() || now.Sub(g.turnedAway) < strandedAfter || g.woken.After(g.turnedAway) {
			continue
		}
		if checked++; checked > strandedChecks {
			return
		}
		if !m.snapshots.current().QuorumFits(w) {
			continue
		}
		g.woken = now
		klog.V(2).InfoS("Waking a gang whose quorum fits", "gang", g.key, "lastTurnedAway", g.turnedAway)
		m.wake.gang(g, wellknown.ConditionReasonQuorumFits, "gang "+g.key+"'s quorum fits free capacity; it is being planned again", fx)
		return
	}
}
