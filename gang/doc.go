// Package gang makes kube-scheduler place gangs all-or-nothing. It owns lockstep's picture of the
// cluster and every gang decision: which members to reserve capacity for, when a held bind may
// commit, and what to tell the user.
//
// Its parts, each a type with one job:
//   - ledger (ledger.go, records.go, gpus.go): pods, nodes and the GPUs bound pods take, fed by
//     the informers (informers.go) and by bindings the apiserver confirmed;
//   - reservationBook (book.go, reservation.go): the gangs' tentative holds, in a go-cache TTL
//     cache, and what they hold per node and per gang; expiry.go reports the ones that lapse;
//   - admission (admission.go): filter's decision for a member before quorum (reserve these
//     slots, wait with this reason, pass only this node), made by reading, then applied;
//   - priority (takeover.go, line.go, victims.go, evict.go, starvation.go, preempt.go): lower
//     reservations yield to higher work, the line of waiting gangs and the quorums members beyond
//     their own quorum leave alone, gang preemption by whole units through the Eviction API, the
//     starving gang's hold, and the review of kube-scheduler's own preemption;
//   - the quorum bind and commit (bind.go, commit.go, commitrecord.go, binder.go);
//   - effects (effects.go, conditions.go, metrics.go): Events and pod conditions collected under
//     the lock and written after it is released.
//
// Manager (manager.go) holds the lock and the verbs (filter.go, score.go, bind.go), each with one
// shape: lock, decide, unlock, apply effects. shortlist.go narrows an ordinary GPU pod's filter
// answer to the nodes its packing ranks best. What fits where is decided by package placement;
// the debug views are status.go (/debug/gangs) and nodes.go (/debug/nodes).
//
// It must not know HTTP or the extender's wire format (package extender does), nor change what it
// is handed: it records what it needs in its own types, and may keep any string it is given.
package gang
