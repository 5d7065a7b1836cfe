// Package decide makes lockstep's gang decisions: whether a waiting gang's quorum may be reserved
// now and where, what its team queue says, which lower-priority reservations it takes over, which
// members beyond other gangs' quorums it takes back, which lower-priority pods it preempts, what it
// reclaims for a queue below its fair share, which starving gang holds capacity as it frees, and
// the line of waiting gangs.
//
// Every decision reads a Snapshot (the ledger of pods and nodes, the reservations, the quota book
// and each gang's members, as values) and returns a value that says what to do: reserve these
// slots, evict these pods, hold these nodes, or wait with this reason. It changes nothing. Package
// gang, which owns the live state and its lock, keeps the snapshot in step, asks, and makes the
// answer true in one place (its applyAdmission).
//
// It must not import client-go or sync, read a clock (the snapshot carries the time), keep state
// between calls, or hold a pointer into the live state: what it is handed is a copy its owner
// replaces, never changes, while a decision runs. What fits on a node is package placement's
// arithmetic, what a queue may take package quota's; the words a user reads about gangs are
// composed here.
//
// Files: snapshot.go (the values, and which reservations a decision respects), quorum.go
// (counting toward a quorum, extras, the quorums extras leave room for, member checks), admit.go
// (the admission of a member), plan.go (planning a quorum: free capacity, node rules, network
// tiers), queue.go (the queue question), evict.go (takeover, taking back, preemption, reclaim),
// hold.go (the starvation rule), line.go (the line of waiting gangs). GPU scores are package gpu's (FreeSet, Memo).
package decide
