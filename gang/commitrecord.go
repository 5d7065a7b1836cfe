package gang

import (
	"fmt"
	"time"
)

// commitRecord is what one commit of a gang did and how long the gang was partly bound while it
// ran: bindings cannot be written atomically, so between the first binding and the
// min-available-th the gang is partial, and that window is what lockstep promises to keep short.
type commitRecord struct {
	started  time.Time
	finished time.Time // zero while the commit runs
	// members is how many bindings the commit writes; bound and failed count their answers.
	members, bound, failed int
	minAvailable           int
	// gangBound is how many of the gang's members were bound at the last answer.
	gangBound int
	// partialSince is when the gang first had some but fewer than minAvailable members bound;
	// quorumAt when it reached minAvailable bound. Either is zero until it happens.
	partialSince, quorumAt time.Time
}

// newCommitRecord starts a record. boundBefore members are bound already (from an earlier,
// incomplete commit): such a gang is partial from the start.
func newCommitRecord(now time.Time, members, boundBefore, minAvailable int) *commitRecord {
	r := &commitRecord{started: now, members: members, minAvailable: minAvailable}
	r.track(now, boundBefore)
	return r
}

// bindingConfirmed notes one more binding the apiserver confirmed; gangBound is how many of the
// gang's members are bound now.
func (r *commitRecord) bindingConfirmed(now time.Time, gangBound int) {
	r.bound++
	r.track(now, gangBound)
}

// track runs the partly-bound clock.
func (r *commitRecord) track(now time.Time, gangBound int) {
	r.gangBound = gangBound
	switch {
	case gangBound >= r.minAvailable:
		if r.quorumAt.IsZero() {
			r.quorumAt = now
		}
	case gangBound > 0:
		if r.partialSince.IsZero() {
			r.partialSince = now
		}
	}
}

func (r *commitRecord) finish(now time.Time) { r.finished = now }

// duration is from quorum to the last answer, or until now while the commit runs.
func (r *commitRecord) duration() time.Duration {
	if r.finished.IsZero() {
		return time.Since(r.started)
	}
	return r.finished.Sub(r.started)
}

// partlyBoundFor is how long the gang had some but not min-available members bound during this
// commit; a gang still partial when the commit ended counts until then.
func (r *commitRecord) partlyBoundFor() time.Duration {
	if r.partialSince.IsZero() {
		return 0
	}
	end := r.quorumAt
	if end.IsZero() {
		end = r.finished
	}
	if end.IsZero() {
		end = time.Now()
	}
	return end.Sub(r.partialSince)
}

// stillPartial reports whether the commit ended with the gang below min-available but not empty.
func (r *commitRecord) stillPartial() bool {
	return !r.partialSince.IsZero() && r.quorumAt.IsZero()
}

// partialNote says in words where the gang stands after the commit.
func (r *commitRecord) partialNote() string {
	switch {
	case r.stillPartial():
		return fmt.Sprintf("the gang is partly bound (%d bound, min-available %d) since %s ago", r.gangBound, r.minAvailable, formatSpan(r.partlyBoundFor()))
	case r.partialSince.IsZero():
		return "no member was left bound alone"
	default:
		return fmt.Sprintf("min-available reached; the gang was partly bound for %s", formatSpan(r.partlyBoundFor()))
	}
}

// formatSpan rounds a duration for people: milliseconds below ten seconds, seconds above.
func formatSpan(d time.Duration) string {
	if d < 10*time.Second {
		return d.Round(time.Millisecond).String()
	}
	return d.Round(100 * time.Millisecond).String()
}
