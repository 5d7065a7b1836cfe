// Package gang makes kube-scheduler place gangs all-or-nothing. It owns lockstep's live picture
// of the cluster and its lock: it takes in what the informers and watchers report, keeps the
// snapshot decisions read, asks package decide, makes the decisions true, binds and commits, and
// says what happened. What to decide is package decide's; what fits on a node is package
// placement's; what a queue may take is package quota's.
//
// Every verb has one shape (manager.go): lock, bring the snapshot up to date, decide (package
// decide, on the snapshot), apply the decision, unlock, emit the effects collected meanwhile
// (Events, pod conditions, nominations, evictions). Nothing waits on the apiserver under the lock.
//
// The locking rule, which TestLockingRule checks on this package's source:
//   - the manager's lock is taken through Manager.locked or Manager.reading, or by a function that
//     defers its unlock on the very next line: no path leaves it taken, a panic included;
//   - a name ending in Locked means one thing: it runs with the manager's lock held for writing
//     and may change the live state. It is called only from another such function, from inside
//     m.locked, or from a function that begins by taking the lock. The methods of the state's
//     parts (ledger, reservationBook, snapshots, waker, nominations) expect the lock too, held for
//     writing by those that change the state, as their types' comments say, and carry no suffix.
//
// Files:
//   - manager.go: Config, the Manager and its lock; what the informers and the group watcher
//     report (pods, nodes, group objects).
//   - filter.go: the filter verb: ordinary pods on free capacity, the shortlist of the nodes
//     lockstep's packing ranks best, gang members through decide.Admit, and the pause for the
//     rest of a gang being created (gathering).
//   - score.go: the prioritize verb.
//   - bind.go: the bind verb: ordinary binds, and members held for their gang's quorum.
//   - commit.go, commitrecord.go: a gang's bindings written once its quorum reached bind, and how
//     long the gang was partly bound; bundle.go: gangs that commit only together.
//   - binder.go: the Binder that writes pods/binding and settles lost answers.
//   - preempt.go: the preempt verb: the review of kube-scheduler's preemption, and the planning of
//     a gang no node took.
//   - apply.go: applyAdmissionLocked, the one place an admission is made true (reservations
//     booked, taken over, holds, evictions marked); and the effects decisions have (Events, the
//     pod conditions that wake parked members, nominations), sent after the lock.
//   - evict.go: evictions carried out through the Eviction API, after the lock.
//   - snapshot.go: the snapshot decisions read, kept in step with the ledger and the book.
//   - ledger.go: the ledger of pods, nodes and gangs, and its records; gpus.go: the GPUs bound pods
//     hold on each node, by index.
//   - devices.go: the DRA side of the ledger (package dra): devices folded into the counts, a
//     reservation's plan held to the allocator, and UpdateDevices, which package drawatch calls.
//   - releases.go: the devices of a waiting gang given back once no reservation holds it.
//   - book.go: the reservations, the go-cache book that holds them, and how they end by expiring.
//   - sweep.go: the periodic sweep: expiries reported, a starving gang's hold, stranded gangs
//     woken.
//   - queues.go: team queues as the watchers report them, and /debug/queues.
//   - status.go, nodes.go: /debug/gangs, the group objects' standing, /debug/nodes.
//   - metrics.go: the Prometheus series.
//   - informers.go: the pod and node informers feeding the manager.
//   - core.go: the interfaces the rest of lockstep uses the manager through.
//
// It must not know HTTP or the extender's wire format (package extender does), nor change what it
// is handed: it records what it needs in its own types, and may keep any string it is given.
package gang
