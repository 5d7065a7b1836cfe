package gang

import (
	"fmt"
	"maps"
	"os"
	"reflect"
	"sort"
	"sync/atomic"
	"time"

	"k8s.io/apimachinery/pkg/types"

	"github.com/lockstep-sched/lockstep/decide"
	"github.com/lockstep-sched/lockstep/quota"
)

// The snapshot decisions read (package decide). It is kept in step with the live state the way
// kube-scheduler keeps its own: between two decisions only the records the ledger noted as
// changed, and the reservations the book noted as touched (or go-cache hides since), are copied
// again, so that a decision costs what changed since the last one, not the size of the cluster.
// The team queues' book is copied again after it changed, the few small maps every time.

// verifySnapshots makes every snapshot be compared with one made afresh, panicking at the first
// difference: a change to the live state the ledger did not note would otherwise leave decisions
// reading stale values, silently. It costs a copy of the whole cluster per decision, so only tests
// turn it on: the package's own, and the end-to-end suite through LOCKSTEP_VERIFY_SNAPSHOTS=1 in
// lockstep's environment.
var verifySnapshots = os.Getenv("LOCKSTEP_VERIFY_SNAPSHOTS") == "1"

// snapshots keeps the one snapshot and the copy of the quota book.
type snapshots struct {
	ledger       *ledger
	book         *reservationBook
	rules        decide.Rules
	now          func() time.Time
	evictRefused map[types.UID]time.Time
	snap         *decide.Snapshot
	// live are the reservations the snapshot's were copied from, by gang: applying a decision
	// reaches the very ones it read, even one go-cache hid since.
	live      map[string]*reservation
	quotaCopy atomic.Pointer[quota.Book]
}

// current brings the snapshot up to date and returns it; it is valid until the lock is let go or
// the state next changes. The caller holds the manager's lock for writing.
func (ss *snapshots) current() *decide.Snapshot {
	s, l := ss.snap, ss.ledger
	for uid := range l.changed.pods {
		p := l.pods[uid]
		switch old := s.Pods[uid]; {
		case p == nil:
			delete(s.Pods, uid)
		case old != nil:
			// In place: the gangs' member lists point at it.
			*old = p.Pod
		default:
			copied := p.Pod
			s.Pods[uid] = &copied
		}
	}
	for name := range l.changed.nodes {
		if n := l.nodes[name]; n != nil {
			s.Nodes[name] = n.view()
		} else {
			delete(s.Nodes, name)
		}
	}
	for key := range l.changed.gangs {
		if g := l.gangs[key]; g != nil {
			s.Gangs[key] = gangOf(g, s.Pods)
		} else {
			delete(s.Gangs, key)
		}
	}
	clear(l.changed.pods)
	clear(l.changed.nodes)
	clear(l.changed.gangs)
	ss.refreshReservations(s)
	ss.fillSmallParts(s)
	if verifySnapshots {
		if diff := snapshotDiff(s, ss.fresh()) + ss.reservationsDiff(s); diff != "" {
			panic("gang: the snapshot fell out of step with the ledger: " + diff)
		}
	}
	return s
}

// refreshReservations brings the snapshot's reservations, and the live ones they are copies of
// (live), up to date: those the book touched since, and those go-cache hides since, because
// they expired.
func (ss *snapshots) refreshReservations(s *decide.Snapshot) {
	b := ss.book
	for gang := range b.touched {
		if res := b.live(gang); res != nil {
			s.Reservations[gang], ss.live[gang] = res.view(true), res
		} else {
			delete(s.Reservations, gang)
			delete(ss.live, gang)
		}
	}
	clear(b.touched)
	now := time.Now() // go-cache's own clock, whatever the manager decides by
	for gang, res := range ss.live {
		if res.hidden(now) {
			delete(s.Reservations, gang)
			delete(ss.live, gang)
		}
	}
}

// reservationsDiff names a reservation the snapshot has other than the book has it now, "" when
// none. The book is asked after the snapshot was brought up to date, so one that expired in
// between is in the snapshot alone, rightly.
func (ss *snapshots) reservationsDiff(s *decide.Snapshot) string {
	_, now := ss.book.view(false)
	for gang, res := range now {
		if ss.live[gang] != res {
			return "reservations differ: " + gang + " is not in the snapshot as booked"
		}
		if !reflect.DeepEqual(s.Reservations[gang], res.copyView()) {
			return "reservations differ: " + gang + "'s copy is stale"
		}
	}
	for gang, res := range ss.live {
		if now[gang] == nil && !res.hidden(time.Now()) {
			return "reservations differ: " + gang + " is in the snapshot, not in the book"
		}
	}
	if len(s.Reservations) != len(ss.live) {
		return "reservations differ: the copies and the live ones do not match"
	}
	return ""
}

// fillSmallParts copies what is copied whole at every decision.
func (ss *snapshots) fillSmallParts(s *decide.Snapshot) {
	l := ss.ledger
	s.Now = ss.now()
	s.Rules = ss.rules
	s.Quota = ss.quota()
	s.QueueBinding = maps.Clone(l.queueBinding)
	s.Schedulable, s.Unqueued = l.schedulable, l.unqueued
	s.EvictRefused = maps.Clone(ss.evictRefused)
}

// fresh is the snapshot made from nothing: what current must equal.
func (ss *snapshots) fresh() *decide.Snapshot {
	l := ss.ledger
	s := newSnapshot()
	for uid, p := range l.pods {
		copied := p.Pod
		s.Pods[uid] = &copied
	}
	for name, n := range l.nodes {
		s.Nodes[name] = n.view()
	}
	for key, g := range l.gangs {
		s.Gangs[key] = gangOf(g, s.Pods)
	}
	s.Reservations = ss.book.reservations()
	ss.fillSmallParts(s)
	return s
}

func newSnapshot() *decide.Snapshot {
	return &decide.Snapshot{Nodes: map[string]*decide.Node{}, Pods: map[types.UID]*decide.Pod{}, Gangs: map[string]*decide.Gang{},
		Reservations: decide.Reservations{}}
}

// gangOf is a gang as the snapshot has it: its members are the snapshot's own pods.
func gangOf(g *gangInfo, pods map[types.UID]*decide.Pod) *decide.Gang {
	out := &decide.Gang{Key: g.key, Namespace: g.namespace, Name: g.name, History: g.History,
		Members: make([]*decide.Pod, 0, len(g.members))}
	for uid := range g.members {
		out.Members = append(out.Members, pods[uid])
	}
	sort.Slice(out.Members, func(i, j int) bool { return decide.OlderThan(out.Members[i], out.Members[j]) })
	return out
}

// snapshotDiff names the first record two snapshots differ in, "" when they agree.
func snapshotDiff(got, want *decide.Snapshot) string {
	for _, part := range []struct {
		name      string
		got, want any
	}{{"pods", got.Pods, want.Pods}, {"nodes", got.Nodes, want.Nodes}, {"gangs", got.Gangs, want.Gangs}} {
		if !reflect.DeepEqual(part.got, part.want) {
			return fmt.Sprintf("%s differ: %s", part.name, firstDifference(part.got, part.want))
		}
	}
	return ""
}

func firstDifference(got, want any) string {
	g, w := reflect.ValueOf(got), reflect.ValueOf(want)
	for _, k := range w.MapKeys() {
		if gv := g.MapIndex(k); !gv.IsValid() || !reflect.DeepEqual(gv.Interface(), w.MapIndex(k).Interface()) {
			return fmt.Sprintf("%v", k.Interface())
		}
	}
	for _, k := range g.MapKeys() {
		if !w.MapIndex(k).IsValid() {
			return fmt.Sprintf("%v (not in the fresh one)", k.Interface())
		}
	}
	return "?"
}

// ofGangs is a snapshot of the gangs, the reservations and the team queues alone, made afresh:
// all the line reads (decide.Snapshot.Places), for /debug/gangs under the shared lock.
func (ss *snapshots) ofGangs() *decide.Snapshot {
	s := newSnapshot()
	for key, g := range ss.ledger.gangs {
		s.Gangs[key] = g.view()
	}
	s.Reservations = ss.book.reservations()
	ss.fillSmallParts(s)
	return s
}

// quota is a copy of the quota book, made again only after the book changed: the ordinary
// filter asks its queue question under the shared lock, many at once, and the copy is shared by
// every question until then.
func (ss *snapshots) quota() *quota.Book {
	if c := ss.quotaCopy.Load(); c != nil && c.Version() == ss.ledger.quota.Version() {
		return c
	}
	c := ss.ledger.quota.Clone()
	ss.quotaCopy.Store(c)
	return c
}

// queues is the queue question's part of the state, for the questions asked under the shared
// lock, where the snapshot cannot be brought up to date.
func (ss *snapshots) queues() decide.Queues {
	return decide.QueuesOf(ss.quota(), ss.book.reservations(), ss.ledger.queueBinding, ss.ledger.queueCapacity())
}
