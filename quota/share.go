package quota

import (
	"maps"
	"slices"
	"sort"

	corev1 "k8s.io/api/core/v1"
)

// Claim is one queue's part in dividing one resource: its weight and the bounds of its share.
type Claim struct {
	Weight int64
	// Floor is what the queue deserves whatever the others ask (its guarantee or min), Ceiling
	// the most it can use (what it asks, capped by its capability). A floor above the ceiling
	// wins: a guarantee is deserved even while the queue asks less.
	Floor, Ceiling int64
	// OverFloor shares by weight only what is left over the floors, KAI's rule: a queue gets its
	// floor (its quota) and then its weight's part of the rest. Without it the weight shares the
	// whole, Volcano proportion's rule, and a floor only lifts a queue that would get less.
	OverFloor bool
	// Priority, among claims that all share over their floors, gives what is left over the
	// floors to the higher ones first (KAI's queue priority); it does not change floors.
	Priority int32
}

// Share divides total among claims by weighted water-filling, Volcano proportion's rule: every
// queue gets the same amount per unit of weight, none below its floor nor above its ceiling, and
// what a queue cannot use goes to the others. Example: 12 GPUs, A (weight 1) asks 10 and B
// (weight 2) asks 3: B's 8 by weight is more than it asks, so B gets 3 and A the other 9.
//
// When even the floors exceed total, each queue gets its floor: guarantees are promises, and the
// admission check, not the share, says no to what cannot be held.
func Share(total int64, claims []Claim) []int64 {
	if tiers := priorityTiers(claims); len(tiers) > 1 {
		return shareByPriority(total, claims, tiers)
	}
	return shareLevel(total, claims)
}

// priorityTiers groups the claims' indexes by priority, highest first, when every claim shares
// over its floor; nil otherwise, and priority does not change shares.
func priorityTiers(claims []Claim) [][]int {
	byPriority := map[int32][]int{}
	for i, c := range claims {
		if !c.OverFloor {
			return nil
		}
		byPriority[c.Priority] = append(byPriority[c.Priority], i)
	}
	priorities := slices.Sorted(maps.Keys(byPriority))
	slices.Reverse(priorities)
	tiers := make([][]int, len(priorities))
	for i, p := range priorities {
		tiers[i] = byPriority[p]
	}
	return tiers
}

// shareByPriority gives every claim its floor, then what is left to each tier in turn, highest
// first, shared within the tier by weight.
func shareByPriority(total int64, claims []Claim, tiers [][]int) []int64 {
	out := make([]int64, len(claims))
	left := total
	for i, c := range claims {
		out[i], _ = c.bounds()
		left -= out[i]
	}
	for _, tier := range tiers {
		sub := make([]Claim, len(tier))
		floors := int64(0)
		for j, i := range tier {
			sub[j] = claims[i]
			floors += out[i]
		}
		for j, v := range shareLevel(floors+max(left, 0), sub) {
			left -= v - out[tier[j]]
			out[tier[j]] = v
		}
	}
	return out
}

// shareLevel is Share among claims whose priority does not matter.
func shareLevel(total int64, claims []Claim) []int64 {
	out := make([]int64, len(claims))
	var sumLo, sumHi int64
	for i, c := range claims {
		lo, hi := c.bounds()
		out[i] = lo
		sumLo += lo
		sumHi += hi
	}
	if sumLo >= total {
		return out
	}
	if sumHi <= total {
		for i, c := range claims {
			_, out[i] = c.bounds()
		}
		return out
	}
	level := waterLevel(total, claims)
	given := int64(0)
	for i, c := range claims {
		out[i] = c.at(level)
		given += out[i]
	}
	spreadRemainder(total-given, level, claims, out)
	return out
}

// bounds are the claim's floor and ceiling with a floor above the ceiling winning.
func (c Claim) bounds() (lo, hi int64) {
	lo, hi = max(c.Floor, 0), max(c.Ceiling, 0)
	return lo, max(lo, hi)
}

// at is the claim's share when every queue is filled to level per unit of weight.
func (c Claim) at(level float64) int64 {
	lo, hi := c.bounds()
	return min(max(int64(c.exact(level)), lo), hi)
}

// exact is the claim's share at level, unrounded.
func (c Claim) exact(level float64) float64 {
	lo, hi := c.bounds()
	v := level * float64(max(c.Weight, 1))
	if c.OverFloor {
		v += float64(lo)
	}
	return min(max(v, float64(lo)), float64(hi))
}

// bends are the levels where the claim's share starts and stops growing.
func (c Claim) bends() (from, to float64) {
	lo, hi := c.bounds()
	w := float64(max(c.Weight, 1))
	if c.OverFloor {
		return 0, float64(hi-lo) / w
	}
	return float64(lo) / w, float64(hi) / w
}

// waterLevel finds the amount per unit of weight at which the claims add up to total. Their sum
// is piecewise linear in the level, bending where a claim reaches its floor or its ceiling; a
// binary search over those bends finds the piece that crosses total, and the level is read off
// it. Admission asks for shares on every waiting gang's filter, so this is O(n log n), not a
// walk per step of a bisection.
func waterLevel(total int64, claims []Claim) float64 {
	bends := make([]float64, 0, 2*len(claims))
	for _, c := range claims {
		from, to := c.bends()
		bends = append(bends, from, to)
	}
	sort.Float64s(bends)
	target := float64(total)
	i := sort.Search(len(bends), func(i int) bool { return sumAt(bends[i], claims) >= target })
	if i == len(bends) {
		return bends[len(bends)-1]
	}
	if i == 0 {
		return bends[0]
	}
	a, b := bends[i-1], bends[i]
	sa, sb := sumAt(a, claims), sumAt(b, claims)
	if sb == sa {
		return a
	}
	return a + (b-a)*(target-sa)/(sb-sa)
}

// sumAt is what the claims add up to at level, unrounded.
func sumAt(level float64, claims []Claim) float64 {
	sum := 0.0
	for _, c := range claims {
		sum += c.exact(level)
	}
	return sum
}

// spreadRemainder hands out, one unit each, what rounding down left over: to the queues still
// below their ceiling, the heaviest first, so that 3 GPUs between weights 1 and 1 give 2 and 1
// rather than 1 and 1.
func spreadRemainder(left int64, level float64, claims []Claim, out []int64) {
	order := make([]int, 0, len(claims))
	for i, c := range claims {
		if _, hi := c.bounds(); out[i] < hi && float64(out[i]) >= c.exact(level)-1 {
			order = append(order, i)
		}
	}
	sort.SliceStable(order, func(a, b int) bool { return claims[order[a]].Weight > claims[order[b]].Weight })
	for _, i := range order {
		if left <= 0 {
			return
		}
		out[i]++
		left--
	}
}

// Shares is each working queue's deserved share of the capacity: weighted water-filling over the
// queues that hold or wait for anything, each capped by its capability and what it asks (what it
// holds plus what its gangs wait for), floored by its guarantee or min. asking, when not "", is a
// queue about to ask for extra more than it has recorded; it counts as working.
//
// Queues in a tree share level by level: the queues at the top divide the capacity, each parent
// asking what its subtree asks, and each parent's share is divided among its working children
// the same way, so that no level gets more than its parent deserves.
func (b *Book) Shares(capacity Resources, held map[string]Resources, asking string, extra Resources) map[string]Resources {
	asks := map[string]Resources{}
	for _, key := range b.keys() {
		if key != asking && !b.working(key, held) {
			continue
		}
		ask := b.allocated(key, held)
		if e := b.queues[key]; e != nil {
			ask = ask.Add(e.wanted)
		}
		if key == asking {
			ask = ask.Add(extra)
		}
		for _, k := range b.tree.lineage(key) {
			asks[k] = asks[k].Add(ask)
		}
	}
	var top []string
	for key := range asks {
		if _, nested := b.tree.parent[key]; !nested {
			top = append(top, key)
		}
	}
	slices.Sort(top)
	out := make(map[string]Resources, len(asks))
	b.divide(capacity, top, asks, out)
	return out
}

// divide shares total among the working queues keys, then each one's share among its working
// children.
func (b *Book) divide(total Resources, keys []string, asks map[string]Resources, out map[string]Resources) {
	for _, res := range countedNames {
		claims := make([]Claim, len(keys))
		for i, key := range keys {
			claims[i] = b.claim(key, res, asks[key].Get(res), total.Get(res))
		}
		for i, v := range Share(total.Get(res), claims) {
			out[keys[i]] = set(out[keys[i]], res, v)
		}
	}
	for _, key := range keys {
		var kids []string
		for _, kid := range b.tree.children[key] {
			if _, working := asks[kid]; working {
				kids = append(kids, kid)
			}
		}
		if len(kids) > 0 {
			b.divide(out[key], kids, asks, out)
		}
	}
}

func (b *Book) working(key string, held map[string]Resources) bool {
	e := b.queues[key]
	return !held[key].IsZero() || (e != nil && (!e.used.IsZero() || e.waiting > 0))
}

// claim is one queue's part in dividing total of resource res when it asks ask of it. A parent's
// floor is at least what its children's floors add up to: what is promised below is promised
// above.
func (b *Book) claim(key string, res corev1.ResourceName, ask, total int64) Claim {
	e := b.queues[key]
	if e == nil || !e.defined {
		return Claim{Weight: 1, Ceiling: ask}
	}
	ceiling := ask
	if e.q.Capability.Named.Has(SetOf(res)) {
		ceiling = min(ceiling, e.q.Capability.Amount.Get(res))
	}
	floor := max(b.floor(key, res), 0)
	if e.q.Capability.Named.Has(SetOf(res)) {
		floor = min(floor, e.q.Capability.Amount.Get(res))
	}
	if e.q.DeservesAll.Has(SetOf(res)) {
		floor = min(ceiling, total) // all it asks of what there is, as KAI reads a quota of -1
	}
	return Claim{Weight: max(e.q.Weight, 1), Floor: floor, Ceiling: ceiling, OverFloor: e.q.WeighsOverQuota, Priority: e.q.Priority}
}

// floor is what key is promised of res, by its guarantee or min, or its children's together.
func (b *Book) floor(key string, res corev1.ResourceName) int64 {
	e := b.queues[key]
	if e.q.DeservesAll.Has(SetOf(res)) {
		return deservesAll
	}
	own := max(e.q.Guarantee.Get(res), e.q.Min.Get(res))
	var kids int64
	for _, kid := range b.tree.children[key] {
		kids += b.floor(kid, res)
	}
	return max(own, kids)
}

// deservesAll is the floor of a queue that deserves all it asks: more than any cluster holds, yet
// small enough that a tree's floors add up without overflowing.
const deservesAll = 1 << 56

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
