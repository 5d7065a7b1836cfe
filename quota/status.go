package quota

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
	// Parent is the key of the queue it nests under, "" at the top; Children the keys of those
	// nested under it. A parent's Used, Held, Allocated, Wanted and Waiting are its subtree's.
	Parent   string
	Children []string
	// Problem is why its place in the tree makes it unusable (TreeProblems), "" when it is fine.
	Problem string
}

// Statuses lists every queue the book knows, defined or only named, in key order.
func (b *Book) Statuses(capacity Resources, held map[string]Resources) []Status {
	shares := b.Shares(capacity, held, "", Resources{})
	out := make([]Status, 0, len(b.queues))
	for _, key := range b.keys() {
		e := b.queues[key]
		s := Status{Key: key, Queue: e.q, Defined: e.defined, Deserved: shares[key], Parent: b.tree.parent[key],
			Children: b.tree.children[key]}
		for _, k := range b.tree.subtree(key) {
			o := b.queues[k]
			s.Used, s.Held = s.Used.Add(o.used), s.Held.Add(held[k])
			s.Wanted, s.Waiting = s.Wanted.Add(o.wanted), s.Waiting+o.waiting
		}
		s.Allocated = s.Used.Add(s.Held)
		if err := b.treeProblem(key); err != nil {
			s.Problem = err.Error()
		}
		out = append(out, s)
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
