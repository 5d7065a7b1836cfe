package quota

import (
	"maps"
	"slices"
	"strings"
)

// Book is every queue lockstep enforces, what each holds and what its waiting gangs ask. Its
// owner keeps it under its own lock and tells it what changes; a Book never looks anything up,
// and its questions (Resolve, Admit, Shares, Statuses) only read it, so concurrent readers may
// share the owner's lock.
//
// What a queue holds is counted in two parts, because its owner counts them apart: used, the
// requests of its bound pods, which the owner adds and takes away as pods bind and go (Use); and
// held, what reservations hold for its gangs right now, which the owner hands to each question
// (a map by queue key), so that a reservation's every change need not be told. The capacity the
// queues share comes with each question too: the owner counts nodes.
type Book struct {
	queues map[string]*entry
	// order is the keys of queues, sorted: shares and views walk queues in a stable order, and
	// admission does so on every waiting gang's filter.
	order []string
	// defaults are the queue each namespace names for a kind (Volcano's namespace annotation).
	defaults map[string]map[string]string
	// namespaceQueue is the queue that applies to all of a namespace's pods (an ElasticQuota),
	// by namespace or AllNamespaces.
	namespaceQueue map[string]string
	// kinds counts the defined queues of each kind: a kind none is defined of is not enforced.
	kinds map[string]int
	// onDemand counts the defined queues of each kind whose undefined queues are made on demand
	// (Queue.KindMadeOnDemand).
	onDemand map[string]int
	// wants are the waiting gangs' quorums, by gang key.
	wants map[string]want
	// version counts the changes, so that an owner keeping a copy (Clone) knows when it is stale.
	version uint64
	// tree is how the defined queues nest, rebuilt when one is defined or forgotten.
	tree *tree
}

type entry struct {
	q       Queue
	defined bool
	used    Resources
	wanted  Resources
	waiting int
}

type want struct {
	queue string
	r     Resources
}

// NewBook makes an empty book: no queue, nothing enforced.
func NewBook() *Book {
	return &Book{queues: map[string]*entry{}, defaults: map[string]map[string]string{},
		namespaceQueue: map[string]string{}, kinds: map[string]int{}, onDemand: map[string]int{}, wants: map[string]want{}, tree: &tree{}}
}

// Version changes whenever the book does.
func (b *Book) Version() uint64 { return b.version }

// Clone is a copy of the book that shares nothing its owner changes later: decisions read a
// copy, so that what they read cannot change under them nor be changed by them.
func (b *Book) Clone() *Book {
	c := &Book{queues: make(map[string]*entry, len(b.queues)), order: slices.Clone(b.order),
		defaults: make(map[string]map[string]string, len(b.defaults)), namespaceQueue: maps.Clone(b.namespaceQueue),
		kinds: maps.Clone(b.kinds), onDemand: maps.Clone(b.onDemand), wants: maps.Clone(b.wants), version: b.version, tree: b.tree}
	for key, e := range b.queues {
		copied := *e // a Queue is replaced whole when redefined, never changed in place
		c.queues[key] = &copied
	}
	for ns, byKind := range b.defaults {
		c.defaults[ns] = maps.Clone(byKind)
	}
	return c
}

// Enforcing reports whether any queue is defined; without one every question is answered yes
// at no cost.
func (b *Book) Enforcing() bool { return len(b.kinds) > 0 }

func (b *Book) entry(key string) *entry {
	e, ok := b.queues[key]
	if !ok {
		e = &entry{}
		b.queues[key] = e
		i, _ := slices.BinarySearch(b.order, key)
		b.order = slices.Insert(b.order, i, key)
	}
	return e
}

// dropIfIdle forgets an entry that is neither defined nor counts anything.
func (b *Book) dropIfIdle(key string) {
	if e := b.queues[key]; e != nil && !e.defined && e.used.IsZero() && e.waiting == 0 {
		delete(b.queues, key)
		if i, found := slices.BinarySearch(b.order, key); found {
			b.order = slices.Delete(b.order, i, i+1)
		}
	}
}

// SetQueue defines or redefines a queue. It returns the namespaces whose pods' queue may have
// changed (those a quota covered or covers now, see Queue.Covers), none when none did: the owner
// resolves those pods again, all of them for AllNamespaces.
func (b *Book) SetQueue(q Queue) (requeue []string) {
	b.version++
	e := b.entry(q.Key())
	if e.defined {
		b.uncountKind(e.q)
	}
	b.kinds[q.Kind]++
	if q.KindMadeOnDemand {
		b.onDemand[q.Kind]++
	}
	old := e.q.Covers()
	e.q, e.defined = q, true
	now := q.Covers()
	for _, ns := range old {
		if !slices.Contains(now, ns) && b.namespaceQueue[ns] == q.Key() {
			delete(b.namespaceQueue, ns)
		}
	}
	for _, ns := range now {
		b.namespaceQueue[ns] = q.Key()
	}
	b.tree = buildTree(b.queues, b.order)
	requeue = append(old, now...)
	slices.Sort(requeue)
	return slices.Compact(requeue)
}

// DeleteQueue forgets a queue's definition; what its pods use stays counted under its key. It
// returns the namespaces whose pods' queue may have changed, as SetQueue does.
func (b *Book) DeleteQueue(key string) (requeue []string) {
	b.version++
	e := b.queues[key]
	if e == nil || !e.defined {
		return nil
	}
	e.defined = false
	b.uncountKind(e.q)
	covered := e.q.Covers()
	for _, ns := range covered {
		if b.namespaceQueue[ns] == key {
			delete(b.namespaceQueue, ns)
		}
	}
	b.dropIfIdle(key)
	b.tree = buildTree(b.queues, b.order)
	return covered
}

// uncountKind takes a queue that is no longer defined as it was out of the counts of its kind.
func (b *Book) uncountKind(q Queue) {
	if b.kinds[q.Kind]--; b.kinds[q.Kind] <= 0 {
		delete(b.kinds, q.Kind)
	}
	if q.KindMadeOnDemand {
		if b.onDemand[q.Kind]--; b.onDemand[q.Kind] <= 0 {
			delete(b.onDemand, q.Kind)
		}
	}
}

// madeOnDemand reports whether an undefined queue key is taken as open and unlimited: the
// default queue, or a queue of a kind made on demand (Queue.KindMadeOnDemand).
func (b *Book) madeOnDemand(key string) bool {
	if strings.HasSuffix(key, " "+DefaultName) {
		return true
	}
	for kind := range b.onDemand {
		if ofKind(key, kind) {
			return true
		}
	}
	return false
}

// ofKind reports whether key is the key of a queue of kind.
func ofKind(key, kind string) bool {
	return len(key) > len(kind) && key[:len(kind)] == kind && key[len(kind)] == ' '
}

// SetNamespaceDefault records the queue of kind a namespace names for gangs that name none; an
// empty name forgets it. It reports whether anything changed.
func (b *Book) SetNamespaceDefault(namespace, kind, name string) bool {
	if b.defaults[namespace][kind] == name {
		return false
	}
	b.version++
	if name == "" {
		delete(b.defaults[namespace], kind)
		if len(b.defaults[namespace]) == 0 {
			delete(b.defaults, namespace)
		}
		return true
	}
	if b.defaults[namespace] == nil {
		b.defaults[namespace] = map[string]string{}
	}
	b.defaults[namespace][kind] = name
	return true
}

// Resolve is the key of the queue a pod of namespace belongs to, given what its gang or its own
// markers name (the zero Ref for nothing): the named queue, else the namespace's default of that
// kind, else the kind's fallback; with no ref, the queue that covers the namespace, else the
// one that covers all the others (AllNamespaces), if any. "" is no queue.
func (b *Book) Resolve(namespace string, ref Ref) string {
	if ref.IsZero() {
		if key, ok := b.namespaceQueue[namespace]; ok {
			return key
		}
		return b.namespaceQueue[AllNamespaces]
	}
	name := ref.Name
	if name == "" {
		name = b.defaults[namespace][ref.Kind]
	}
	if name == "" {
		name = ref.Fallback
	}
	if name == "" {
		return ""
	}
	return Key(ref.Kind, name)
}

// Use adds what a bound pod of the queue requests; Unuse takes it away.
func (b *Book) Use(key string, r Resources) {
	b.version++
	if key != "" {
		e := b.entry(key)
		e.used = e.used.Add(r)
	}
}

func (b *Book) Unuse(key string, r Resources) {
	b.version++
	if e := b.queues[key]; e != nil {
		e.used = e.used.Sub(r)
		b.dropIfIdle(key)
	}
}

// Want records that gang waits for capacity with a quorum of r in queue key, replacing what it
// wanted before; Unwant says it no longer waits. What queues' gangs wait for shapes their share.
func (b *Book) Want(gang, key string, r Resources) {
	if w, ok := b.wants[gang]; ok && w.queue == key && w.r == r {
		return // a waiting gang's every retry tells the same
	}
	b.version++
	b.Unwant(gang)
	if key == "" {
		return
	}
	e := b.entry(key)
	e.wanted, e.waiting = e.wanted.Add(r), e.waiting+1
	b.wants[gang] = want{key, r}
}

func (b *Book) Unwant(gang string) {
	b.version++
	w, ok := b.wants[gang]
	if !ok {
		return
	}
	delete(b.wants, gang)
	if e := b.queues[w.queue]; e != nil {
		e.wanted, e.waiting = e.wanted.Sub(w.r), e.waiting-1
		b.dropIfIdle(w.queue)
	}
}

// Wants reports the queue and quorum gang was last recorded waiting with.
func (b *Book) Wants(gang string) (queue string, r Resources, ok bool) {
	w, ok := b.wants[gang]
	return w.queue, w.r, ok
}

// enforced reports whether a queue key is checked at all: only queues of a kind some queue is
// defined of are. A cluster that installed Volcano's CRDs but made no Queue keeps scheduling
// Volcano's gangs as before.
func (b *Book) enforced(key string) bool {
	if key == "" {
		return false
	}
	e := b.queues[key]
	if e != nil && e.defined {
		return true
	}
	for kind := range b.kinds {
		if ofKind(key, kind) {
			return true
		}
	}
	return false
}

// keys lists the queue keys in a stable order, for shares and views; callers must not change it.
func (b *Book) keys() []string { return b.order }
