package gang

import (
	"fmt"
	"strings"

	"github.com/lockstep-sched/lockstep/decide"
	"github.com/lockstep-sched/lockstep/gangspec"
)

// A bundle (Koordinator's gang group) is several gangs that bind only together: no member of any
// binds until every gang has its quorum ready at bind. Each gang still plans and reserves on its
// own; what the bundle adds is that a gang whose quorum is ready holds its binds, and the last
// gang to become ready starts the commits of all.

// quorumReadyLocked is called when a reserving gang's quorum has reached bind. It commits the
// gang, and every gang of its bundle with it, or, while one of them is not ready, records which.
func (m *Manager) quorumReadyLocked(g *gangInfo, res *reservation, spec *gangspec.Spec) {
	if len(spec.Bundle) == 0 {
		m.startCommitLocked(g, res)
		return
	}
	var lagging []string
	type pending struct {
		g   *gangInfo
		res *reservation
	}
	commits := []pending{{g, res}}
	for _, key := range spec.Bundle {
		if key == g.key {
			continue
		}
		mate, mateRes, why := bundleMate(m.ledger, m.book, key)
		switch {
		case why != "":
			lagging = append(lagging, why)
		case mateRes != nil:
			commits = append(commits, pending{mate, mateRes})
		}
	}
	if len(lagging) > 0 {
		g.bundleWait = strings.Join(lagging, "; ")
		g.lastReason = fmt.Sprintf("gang %s: quorum ready at bind; binds held until every gang of its group %v is ready: %s", g.key, spec.Bundle, g.bundleWait)
		return
	}
	for _, c := range commits {
		c.g.bundleWait = ""
		m.startCommitLocked(c.g, c.res)
	}
}

// bundleMate says whether another gang of a bundle is ready: why is "" when it is, and res
// is its reservation to commit, nil when it needs no commit (bound, or committing already).
func bundleMate(l *ledger, book *reservationBook, key string) (g *gangInfo, res *reservation, why string) {
	g = l.gangs[key]
	if g == nil {
		return nil, nil, "gang " + key + " has no members yet"
	}
	view := g.view()
	spec, _ := view.Reference()
	switch {
	case spec == nil:
		return nil, nil, "gang " + key + "'s rules are not known yet"
	case view.Satisfied(spec):
		return g, nil, ""
	}
	res = book.reserving(key)
	switch {
	case res == nil:
		return nil, nil, "gang " + key + " has no reservation"
	case res.state == decide.Committing:
		return g, nil, ""
	}
	if ready := ready(g, spec, res); !ready.Meets(spec) {
		return nil, nil, fmt.Sprintf("gang %s has %s", key, ready.ReadyWords(spec))
	}
	return g, res, ""
}
