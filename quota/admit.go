package quota

import (
	"fmt"
	"strings"

	corev1 "k8s.io/api/core/v1"

	"github.com/lockstep-sched/lockstep/placement"
	"github.com/lockstep-sched/lockstep/wellknown"
)

// DefaultName is the queue a gang that names none goes to in Volcano and kube-batch. Their own
// schedulers or charts create it; where no object defines it, lockstep takes it as open, of
// weight 1 and unlimited, as created there, so that gangs that never heard of queues keep
// scheduling.
const DefaultName = "default"

// Question is what the owner asks before it admits work into a queue.
type Question struct {
	// Queue is the key the work resolved to (Resolve); "" is no queue, always admitted.
	Queue string
	// Gang names the work for reasons; "" for a single pod.
	Gang string
	// Request is what the work would add to the queue: a gang's whole quorum, or one pod.
	Request Resources
	// Held is what reservations hold per queue key right now, beside the bound pods' use.
	Held map[string]Resources
	// Capacity is what the queues share: the cluster's schedulable capacity less what pods of no
	// queue hold.
	Capacity Resources
	// Fair asks the fair-share check too: gangs ask it; a single pod, which holds nobody's
	// quorum up, does not.
	Fair bool
}

// Admit says why the work must wait for its queue, or "" when the queue takes it. The checks run
// in the order a user fixes things: the queue exists and is usable, then its hard limits, then
// what other queues are promised, then fairness.
func (b *Book) Admit(q Question) string {
	if !b.enforced(q.Queue) {
		return ""
	}
	e := b.queues[q.Queue]
	if e == nil || !e.defined {
		if b.madeOnDemand(q.Queue) {
			return b.fair(q, nil)
		}
		return fmt.Sprintf("%s does not exist: create it, or name an existing queue", q.Queue)
	}
	for _, check := range []func(Question, *entry) string{b.usable, b.capability, b.minPool, b.guarantees} {
		if why := check(q, e); why != "" {
			return why
		}
	}
	return b.fair(q, e)
}

func (b *Book) usable(q Question, e *entry) string {
	if e.q.Err != nil {
		return fmt.Sprintf("%s cannot be used: %v", e.q.Key(), e.q.Err)
	}
	if err := b.treeProblem(q.Queue); err != nil {
		return fmt.Sprintf("%s cannot be used: %v", e.q.Key(), err)
	}
	if why := b.notALeaf(q.Queue); why != "" {
		return why
	}
	for _, key := range b.tree.lineage(q.Queue) {
		if o := b.queues[key]; !o.q.takesNewGangs() {
			return fmt.Sprintf("%s is %s: it takes no new work (what already runs in it keeps running)%s", key, o.q.State, under(q.Queue, key))
		}
	}
	return ""
}

// under says, in a reason about queue key, that asked is nested under it: "" when they are one.
func under(asked, key string) string {
	if asked == key {
		return ""
	}
	return "; " + asked + " is under it"
}

// allocated is what a queue holds: its bound pods and its reservations.
func (b *Book) allocated(key string, held map[string]Resources) Resources {
	a := held[key]
	if e := b.queues[key]; e != nil {
		a = a.Add(e.used)
	}
	return a
}

// capability holds the queue's limit and every one of its parents': a child never passes its
// parent's limit, whatever its own, since the parent's counts all its children together.
func (b *Book) capability(q Question, e *entry) string {
	for _, key := range b.tree.lineage(q.Queue) {
		if why := b.withinLimit(q, key); why != "" {
			return why
		}
	}
	return ""
}

func (b *Book) withinLimit(q Question, key string) string {
	limit := b.queues[key].q.Capability
	alloc := b.subtreeAllocated(key, q.Held)
	holder := "it holds"
	if key != q.Queue {
		holder = "the queues under it hold"
	}
	for _, res := range countedNames {
		if !limit.Named.Has(SetOf(res)) || q.Request.Get(res) == 0 {
			continue
		}
		if most := limit.Amount.Get(res); alloc.Get(res)+q.Request.Get(res) > most {
			return fmt.Sprintf("%s: %s would go over its limit of %s: %s %s and %s asks %s more%s",
				key, res, placement.Amount(res, most), holder, placement.Amount(res, alloc.Get(res)), asker(q), placement.Amount(res, q.Request.Get(res)), under(q.Queue, key))
		}
	}
	return ""
}

// minPool is scheduler-plugins' capacity scheduling rule: its quotas together hold no more than
// the sum of their mins, so one borrows only what another leaves of its min.
func (b *Book) minPool(q Question, e *entry) string {
	if !e.q.BorrowsOnlyMin {
		return ""
	}
	var sumMin, sumAlloc Resources
	for key, o := range b.queues {
		if o.defined && o.q.BorrowsOnlyMin && o.q.Kind == e.q.Kind {
			sumMin = sumMin.Add(o.q.Min)
			sumAlloc = sumAlloc.Add(b.allocated(key, q.Held))
		}
	}
	for _, res := range countedNames {
		if q.Request.Get(res) > 0 && sumAlloc.Get(res)+q.Request.Get(res) > sumMin.Get(res) {
			return fmt.Sprintf("%s: %s: the %ss together would go over the sum of their mins, %s: they hold %s and %s asks %s more",
				e.q.Key(), res, e.q.Kind, placement.Amount(res, sumMin.Get(res)), placement.Amount(res, sumAlloc.Get(res)), asker(q), placement.Amount(res, q.Request.Get(res)))
		}
	}
	return ""
}

// guarantees keeps what other queues are guaranteed and do not use out of this queue's reach.
func (b *Book) guarantees(q Question, e *entry) string {
	kept, keptFor := b.keptFrom(q)
	if kept.IsZero() {
		return ""
	}
	free := q.Capacity.Sub(b.totalAllocated(q.Held))
	for _, res := range countedNames {
		if need := q.Request.Get(res); need > 0 && kept.Get(res) > 0 && need > free.Get(res)-kept.Get(res) {
			return fmt.Sprintf("%s: of the %s the queues have free, %s are kept for the guarantees of %s; %s asks %s",
				e.q.Key(), placement.FormatQuantity(res, max(free.Get(res), 0)), placement.Amount(res, kept.Get(res)), strings.Join(keptFor, ", "),
				asker(q), placement.Amount(res, need))
		}
	}
	return ""
}

// keptFrom is what the guarantees of queues other than q's keep from it, and whose they are. In a
// tree a guarantee holds at every level: a parent keeps what its own guarantee promises its
// subtree or what its children's keep, whichever is more, and nothing a queue's own ancestors
// promise is kept from it, since its work counts towards theirs.
func (b *Book) keptFrom(q Question) (Resources, []string) {
	var kept Resources
	var keptFor []string
	for _, key := range b.keys() {
		if _, nested := b.tree.parent[key]; nested {
			continue
		}
		r, names := b.keptBy(key, q)
		kept, keptFor = kept.Add(r), append(keptFor, names...)
	}
	return kept, keptFor
}

func (b *Book) keptBy(key string, q Question) (Resources, []string) {
	var fromKids Resources
	var names []string
	for _, kid := range b.tree.children[key] {
		r, n := b.keptBy(kid, q)
		fromKids, names = fromKids.Add(r), append(names, n...)
	}
	o := b.queues[key]
	if b.tree.contains(key, q.Queue) || !o.defined || o.q.Guarantee.IsZero() {
		return fromKids, names
	}
	own := positive(o.q.Guarantee.Sub(b.subtreeAllocated(key, q.Held)))
	if own.IsZero() {
		return fromKids, names
	}
	return maxRes(own, fromKids), append([]string{key}, names...)
}

func (b *Book) totalAllocated(held map[string]Resources) Resources {
	var sum Resources
	for key, e := range b.queues {
		sum = sum.Add(e.used)
		sum = sum.Add(held[key])
	}
	return sum
}

// fair lets a queue past its deserved share only into capacity no other queue's waiting gang is
// owed: a queue alone may fill the idle cluster, but once another queue waits below its share,
// what frees up goes to that one. e is nil for an implicit default queue.
func (b *Book) fair(q Question, e *entry) string {
	if !q.Fair || q.Request.IsZero() || !b.othersWait(q.Queue) {
		return "" // nobody else is owed anything: past its share or not, the queue may take it
	}
	shares := b.Shares(q.Capacity, q.Held, q.Queue, b.unrecorded(q))
	mine := shares[q.Queue]
	alloc := b.allocated(q.Queue, q.Held)
	over := false
	for _, res := range countedNames {
		if q.Request.Get(res) > 0 && alloc.Get(res)+q.Request.Get(res) > mine.Get(res) {
			over = true
		}
	}
	if !over {
		return ""
	}
	owed, owedTo := b.owed(q, shares, priorityOf(e))
	if owed.IsZero() {
		return ""
	}
	free := q.Capacity.Sub(b.totalAllocated(q.Held))
	for _, res := range countedNames {
		if need := q.Request.Get(res); need > 0 && owed.Get(res) > 0 && need > free.Get(res)-owed.Get(res) {
			return fmt.Sprintf("%s is at its fair share of %s (deserves %s, holds %s) and %s asks %s more; the %s left free are owed to the waiting gangs of %s",
				q.Queue, res, placement.Amount(res, mine.Get(res)), placement.Amount(res, alloc.Get(res)), asker(q), placement.Amount(res, need),
				placement.Amount(res, max(free.Get(res), 0)), strings.Join(owedTo, ", "))
		}
	}
	return ""
}

// owed is what other queues' waiting gangs are owed: up to its share for a queue of the same or
// lower priority, all it waits for (up to its capability) for a higher one, which goes first.
//
// A queue is owed nothing when none of its waiting gangs' quorums fits in what it is due: kept
// idle for a gang that could not take it anyway, the capacity would be held hostage.
func (b *Book) owed(q Question, shares map[string]Resources, priority int32) (Resources, []string) {
	dues := map[string]Resources{}
	for _, key := range b.keys() {
		o := b.queues[key]
		if key == q.Queue || o.waiting == 0 || !b.takesGangs(key, o) {
			continue
		}
		alloc := b.allocated(key, q.Held)
		limit := shares[key]
		if o.defined && o.q.Priority > priority {
			limit = capTo(alloc.Add(o.wanted), o.q.Capability)
		}
		if due := positive(minRes(limit, alloc.Add(o.wanted)).Sub(alloc)); !due.IsZero() {
			dues[key] = due
		}
	}
	usable := map[string]bool{}
	for _, w := range b.wants {
		if due, ok := dues[w.queue]; ok && fitsIn(w.r, due) {
			usable[w.queue] = true
		}
	}
	var owed Resources
	var to []string
	for _, key := range b.keys() {
		if usable[key] {
			owed, to = owed.Add(dues[key]), append(to, key)
		}
	}
	return owed, to
}

// fitsIn reports whether r asks no more than room of any resource quotas count.
func fitsIn(r, room Resources) bool {
	for _, res := range countedNames {
		if r.Get(res) > room.Get(res) {
			return false
		}
	}
	return true
}

// takesGangs reports whether a queue could admit a gang at all: a closed, unusable or missing
// queue is owed nothing, since its gangs could not take what it is owed.
func (b *Book) takesGangs(key string, e *entry) bool {
	if !e.defined {
		return b.madeOnDemand(key)
	}
	return e.q.Err == nil && e.q.takesNewGangs()
}

// othersWait reports whether a queue other than key has a gang waiting.
func (b *Book) othersWait(key string) bool {
	for k, e := range b.queues {
		if k != key && e.waiting > 0 {
			return true
		}
	}
	return false
}

func priorityOf(e *entry) int32 {
	if e == nil {
		return 0
	}
	return e.q.Priority
}

func asker(q Question) string {
	if q.Gang != "" {
		return "gang " + q.Gang + "'s quorum"
	}
	return "the pod"
}

var countedNames = []corev1.ResourceName{wellknown.ResourceGPU, corev1.ResourceCPU, corev1.ResourceMemory}

// SetOf is the bit of a resource name; Pods for any name quotas do not count.
func SetOf(name corev1.ResourceName) ResourceSet {
	switch name {
	case wellknown.ResourceGPU:
		return GPU
	case corev1.ResourceCPU:
		return CPU
	case corev1.ResourceMemory:
		return Memory
	}
	return Pods
}

func positive(r Resources) Resources {
	return Resources{MilliCPU: max(r.MilliCPU, 0), Memory: max(r.Memory, 0), GPU: max(r.GPU, 0), Pods: max(r.Pods, 0)}
}

func maxRes(a, b Resources) Resources {
	return Resources{MilliCPU: max(a.MilliCPU, b.MilliCPU), Memory: max(a.Memory, b.Memory), GPU: max(a.GPU, b.GPU), Pods: max(a.Pods, b.Pods)}
}

func minRes(a, b Resources) Resources {
	return Resources{MilliCPU: min(a.MilliCPU, b.MilliCPU), Memory: min(a.Memory, b.Memory), GPU: min(a.GPU, b.GPU), Pods: min(a.Pods, b.Pods)}
}

// capTo limits r to the resources l names.
func capTo(r Resources, l Limit) Resources {
	out := r
	if l.Named.Has(GPU) {
		out.GPU = min(out.GPU, l.Amount.GPU)
	}
	if l.Named.Has(CPU) {
		out.MilliCPU = min(out.MilliCPU, l.Amount.MilliCPU)
	}
	if l.Named.Has(Memory) {
		out.Memory = min(out.Memory, l.Amount.Memory)
	}
	if l.Named.Has(Pods) {
		out.Pods = min(out.Pods, l.Amount.Pods)
	}
	return out
}

// unrecorded is what q asks beyond the wait its gang has recorded in the same queue.
func (b *Book) unrecorded(q Question) Resources {
	if wq, wr, ok := b.Wants(q.Gang); ok && q.Gang != "" && wq == q.Queue {
		return positive(q.Request.Sub(wr))
	}
	return q.Request
}
