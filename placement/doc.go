// Package placement decides where pods fit: the per-node checks behind filter's node reasons, the
// all-at-once planner that places a gang's quorum member by member, and the explanation a user
// reads when a gang does not fit. Every reason a user sees for "does not fit" is worded here.
//
// It is pure: it is handed snapshots (free capacity per node, what reservations hold, a scoring
// function) and answers from them alone. It takes no locks, reads no informers, keeps nothing
// between calls and never talks to the apiserver; the gang package owns all of that.
package placement
