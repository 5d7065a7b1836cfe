package gang

import "time"

// Gathering. Operators create a gang's pods one after another, milliseconds apart, and
// kube-scheduler takes the first before the rest exist. Turned away, each costs the scheduler a
// status write that holds its loop, then a back-off and a second cycle, all on the way to the
// gang's commit. So while members keep arriving, a member that lacks nothing but the rest of its
// gang waits at filter for the next one instead: at most Config.GatherWait past the latest
// arrival, and gatherRounds times that in all before its gang reserves. The scheduler's loop is
// paused meanwhile, which is why both bounds are short: a gang created slowly, or never
// completed, costs other pods no more than a short pause and is then turned away as before.

// gatherRounds bounds a gang's gathering, in all, to this many GatherWaits before it reserves.
const gatherRounds = 5

// arrivals is when a gang's members were last first seen, and whom to tell of the next.
type arrivals struct {
	last time.Time
	// next is closed at the next arrival; nil until a filter call waits for one.
	next chan struct{}
	// gathered is how long its members have waited at filter since the gang last reserved.
	gathered time.Duration
}

// noteArrival records a member first seen at now and wakes the filter calls waiting for one.
func (a *arrivals) noteArrival(now time.Time) {
	a.last = now
	if a.next != nil {
		close(a.next)
		a.next = nil
	}
}

// gatherWait is a filter call's pause for the next member; a nil next is no pause.
type gatherWait struct {
	g       *gangInfo
	next    <-chan struct{}
	longest time.Duration
}

// gatherPause is how long a member of g lacking only members may wait for the next, given wait
// per arrival: what is left of wait since the latest one, within the gang's budget.
func (g *gangInfo) gatherPause(now time.Time, wait time.Duration) gatherWait {
	a := &g.arrivals
	longest := min(a.last.Add(wait).Sub(now), gatherRounds*wait-a.gathered)
	if longest <= 0 {
		return gatherWait{}
	}
	if a.next == nil {
		a.next = make(chan struct{})
	}
	return gatherWait{g: g, next: a.next, longest: longest}
}

// mayGather says whether a member lacking only members may wait for the next: not once the
// manager is stopping, which no arrival would end.
func (m *Manager) mayGather() bool {
	select {
	case <-m.stop:
		return false
	default:
		return m.cfg.GatherWait > 0
	}
}

// gather pauses a filter call until the next member arrives or the wait is over, and charges
// the pause to its gang's budget. Its time is measured on the wall clock, which the wait runs on,
// whatever clock the manager decides by.
func (m *Manager) gather(w gatherWait) {
	began := time.Now()
	m.metrics.gatherStarted()
	t := time.NewTimer(w.longest)
	defer t.Stop()
	outcome := "arrived"
	select {
	case <-w.next:
	case <-t.C:
		outcome = "gave_up"
	case <-m.stop:
		outcome = "gave_up"
	}
	waited := time.Since(began)
	m.locked(func() { w.g.arrivals.gathered += waited })
	m.metrics.observeGather(outcome, waited)
}
