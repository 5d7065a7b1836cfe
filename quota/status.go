package quota

import (
	corev1 "k8s.io/api/core/v1"
)

// Shares is each working queue's deserved share of the capacity: weighted water-filling over the
// queues that hold or wait for anything, each capped by its capability and what it asks (what it
// holds plus what its gangs wait for), floored by its guarantee or min. asking, when not "", is a
// queue about to ask for extra more than it has recorded; it counts as working.
func (b *Book) Shares(capacity Resources, held map[string]Resources, asking string, extra Resources) map[string]Resources {
	var keys []string
	for _, key := range b.keys() {
		if key == asking || b.working(key, held) {
			keys = append(keys, key)
		}
	}
	asks := make([]Resources, len(keys))
	for i, key := range keys {
		asks[i] = b.allocated(key, held)
		if e := b.queues[key]; e != nil {
			asks[i] = asks[i].Add(e.wanted)
		}
		if key == asking {
			asks[i] = asks[i].Add(extra)
		}
	}
	out := make(map[string]Resources, len(keys))
	for _, res := range countedNames {
		claims := make([]Claim, len(keys))
		for i, key := range keys {
			claims[i] = b.claim(key, res, asks[i].Get(res))
		}
		for i, v := range Share(capacity.Get(res), claims) {
			out[keys[i]] = set(out[keys[i]], res, v)
		}
	}
	return out
}

func (b *Book) working(key string, held map[string]Resources) bool {
	e := b.queues[key]
	return !held[key].IsZero() || (e != nil && (!e.used.IsZero() || e.waiting > 0))
}

// claim is one queue's part in dividing resource res when it asks ask of it.
func (b *Book) claim(key string, res corev1.ResourceName, ask int64) Claim {
	e := b.queues[key]
	if e == nil || !e.defined {
		return Claim{Weight: 1, Ceiling: ask}
	}
	ceiling := ask
	if e.q.Capability.Named.Has(SetOf(res)) {
		ceiling = min(ceiling, e.q.Capability.Amount.Get(res))
	}
	floor := max(e.q.Guarantee.Get(res), e.q.Min.Get(res))
	if e.q.Capability.Named.Has(SetOf(res)) {
		floor = min(floor, e.q.Capability.Amount.Get(res))
	}
	return Claim{Weight: max(e.q.Weight, 1), Floor: floor, Ceiling: ceiling}
}

func set(r Resources, name corev1.ResourceName, v int64) Resources {
	switch SetOf(name) {
	case GPU:
		r.GPU = v
	case CPU:
		r.MilliCPU = v
	case Memory:
		r.Memory = v
	}
	return r
}

// Status is one queue as /debug/queues and the status writers show it.
type Status struct {
	Key   string
	Queue Queue
	// Defined is false for a queue no object defines: an implicit default, or one that pods name
	// but that does not exist (or no longer does).
	Defined bool
	// Deserved is the queue's fair share now; zero for a queue without work.
	Deserved  Resources
	Used      Resources
	Held      Resources
	Allocated Resources
	// Wanted is what its waiting gangs' quorums ask, Waiting how many gangs wait.
	Wanted  Resources
	Waiting int
}

// Statuses lists every queue the book knows, defined or only named, in key order.
func (b *Book) Statuses(capacity Resources, held map[string]Resources) []Status {
	shares := b.Shares(capacity, held, "", Resources{})
	out := make([]Status, 0, len(b.queues))
	for _, key := range b.keys() {
		e := b.queues[key]
		out = append(out, Status{Key: key, Queue: e.q, Defined: e.defined, Deserved: shares[key], Used: e.used,
			Held: held[key], Allocated: e.used.Add(held[key]), Wanted: e.wanted, Waiting: e.waiting})
	}
	return out
}

// Status is one queue's Status; ok is false for a key the book does not know.
func (b *Book) Status(key string, capacity Resources, held map[string]Resources) (Status, bool) {
	for _, s := range b.Statuses(capacity, held) {
		if s.Key == key {
			return s, true
		}
	}
	return Status{}, false
}

// Rank is where a queue's waiting gangs stand against other queues' when capacity frees: a
// higher Priority first, then the queue furthest below its share (the lowest Ratio of what it
// holds to what it deserves, over the resources it deserves any of: Volcano proportion's order).
type Rank struct {
	Priority int32
	Ratio    float64
}

// Before reports whether a queue ranked r goes before one ranked o.
func (r Rank) Before(o Rank) bool {
	if r.Priority != o.Priority {
		return r.Priority > o.Priority
	}
	return r.Ratio < o.Ratio
}

// Rank is queue key's rank given the shares (Shares) and what reservations hold.
func (b *Book) Rank(key string, shares map[string]Resources, held map[string]Resources) Rank {
	var r Rank
	if e := b.queues[key]; e != nil && e.defined {
		r.Priority = e.q.Priority
	}
	alloc, deserved := b.allocated(key, held), shares[key]
	for _, res := range countedNames {
		if d := deserved.Get(res); d > 0 {
			r.Ratio = max(r.Ratio, float64(alloc.Get(res))/float64(d))
		}
	}
	return r
}
