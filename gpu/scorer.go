package gpu

import (
	"math"
	"math/bits"
	"slices"

	"github.com/lockstep-sched/lockstep/wellknown"
)

// Quality describes a set of GPUs chosen for one pod. Two Qualities are only comparable when
// they describe sets of the same size.
type Quality struct {
	// WeakestLink is the slowest path between any two GPUs of the set; collectives such as
	// all-reduce run at the pace of the slowest hop, so it comes first. LinkSelf for sets of
	// fewer than two GPUs, which have no paths.
	WeakestLink Link
	// Bandwidth sums Link.Bandwidth over all pairs of the set.
	Bandwidth int
	// Cut sums Link.Bandwidth over the pairs that run from the set to the free GPUs it leaves
	// behind: the connectivity this placement takes away from the next pod. A set that fills an
	// already partly used island cuts little; one carved out of an idle island cuts a lot.
	Cut int
	// NUMACut counts the pairs from the set to the free GPUs left behind that share a NUMA node.
	// It breaks ties on NVSwitch systems, where every pair has the same link and only NUMA
	// locality tells placements apart.
	NUMACut int
}

// Better reports whether q is a strictly better placement than o: stronger weakest link, then
// more total bandwidth, then a smaller cut, then a smaller NUMA cut.
func (q Quality) Better(o Quality) bool {
	switch {
	case q.WeakestLink != o.WeakestLink:
		return q.WeakestLink > o.WeakestLink
	case q.Bandwidth != o.Bandwidth:
		return q.Bandwidth > o.Bandwidth
	case q.Cut != o.Cut:
		return q.Cut < o.Cut
	}
	return q.NUMACut < o.NUMACut
}

// MaxExact is the largest number of free GPUs BestSet searches exhaustively. C(16,8) = 12870
// subsets is the worst case, and pruning on the weakest link usually visits far fewer.
const MaxExact = 16

// BestSet picks k GPU indices out of free (the indices of the free GPUs on this node)
// maximising, in order: (1) the weakest pairwise link inside the set, (2) the total pairwise
// bandwidth, then (3) fragmentation: the smallest Cut, which leaves the remaining free GPUs most
// usable (whole NVLink islands stay free for the next big request, and a partly used island is
// filled first: best fit), and (4) the smallest NUMACut. Remaining ties go to the set with the
// lexicographically smallest set, so the answer is deterministic. set is in ascending order.
//
// Indices in free that the node does not have are ignored and duplicates count once; ok is
// false when fewer than k usable GPUs remain (or k < 0).
//
// With at most MaxExact free GPUs the search is exhaustive with branch and bound, so the
// answer is optimal. Beyond that (nodes with more than 16 GPUs) it falls back to a greedy
// heuristic, documented on the greedy method: grow a set from every free GPU, keep the best,
// improve it by swaps. It finds the best set on the shapes such nodes have in practice, NVSwitch domains and
// NVLink islands joined by slower links, but is not guaranteed optimal on arbitrary matrices.
func (t *Topology) BestSet(free []int, k int) (set []int, q Quality, ok bool) {
	if k < 0 {
		return nil, Quality{}, false
	}
	var buf [MaxExact]int
	cand := t.candidates(free, buf[:0])
	if len(cand) < k {
		return nil, Quality{}, false
	}
	var chosen []int
	switch {
	case k == 0:
		return []int{}, Quality{}, true
	case k == len(cand):
		chosen, q = cand, t.quality(cand, cand)
	case len(cand) <= MaxExact:
		var s exact
		chosen, q = s.search(t, cand, k)
	default:
		chosen, q = t.greedy(cand, k)
	}
	set = make([]int, k)
	for i, p := range chosen {
		set[i] = t.gpus[p].Index
	}
	return set, q, true
}

// candidates maps free GPU indices to ascending, distinct positions, dropping unknown indices.
func (t *Topology) candidates(free []int, out []int) []int {
	var seen [(MaxGPUs + 63) / 64]uint64
	for _, index := range free {
		if p := t.position(index); p >= 0 {
			seen[p/64] |= 1 << (p % 64)
		}
	}
	for w, word := range seen {
		for word != 0 {
			b := bits.TrailingZeros64(word)
			out = append(out, w*64+b)
			word &^= 1 << b
		}
	}
	return out
}

func (t *Topology) sameNUMA(p, q int) bool {
	return t.gpus[p].NUMA != NUMAUnknown && t.gpus[p].NUMA == t.gpus[q].NUMA
}

// quality evaluates set (positions) against the free positions it is taken from.
func (t *Topology) quality(set, free []int) Quality {
	n := len(t.gpus)
	var in [(MaxGPUs + 63) / 64]uint64
	for _, p := range set {
		in[p/64] |= 1 << (p % 64)
	}
	q := Quality{WeakestLink: noLink}
	for i, p := range set {
		for _, r := range set[i+1:] {
			q.WeakestLink = min(q.WeakestLink, t.links[p*n+r])
			q.Bandwidth += int(t.bw[p*n+r])
		}
		for _, r := range free {
			if in[r/64]&(1<<(r%64)) == 0 {
				q.Cut += int(t.bw[p*n+r])
				if t.sameNUMA(p, r) {
					q.NUMACut++
				}
			}
		}
	}
	if len(set) < 2 {
		q.WeakestLink = LinkSelf
	}
	return q
}

// exact is the branch-and-bound search over k-subsets of at most MaxExact candidates. It copies
// what it needs into fixed arrays indexed by candidate number so that the inner loop touches a
// few cache lines and never allocates.
type exact struct {
	m, k   int
	link   [MaxExact][MaxExact]Link
	bw     [MaxExact][MaxExact]int32
	same   [MaxExact]uint16 // bit j set: candidate j shares this candidate's (known) NUMA node
	deg    [MaxExact]int32  // bandwidth to all other candidates
	ndeg   [MaxExact]int32  // other candidates on the same NUMA node
	rowMax [MaxExact]int32  // each candidate's strongest pair, for the bandwidth bound

	// twinOf[j] is the previous candidate interchangeable with j (same links to, and same NUMA
	// relation with, every other candidate), or -1. Swapping twins changes no Quality, so the
	// search only takes j once twinOf[j] is in: one set per choice of how many twins, instead
	// of every combination. This is what keeps NVSwitch nodes, where every GPU is a twin of
	// every other, from visiting all C(16,8) sets.
	twinOf [MaxExact]int8

	cur   [MaxExact]int8
	best  Quality
	bestS [MaxExact]int8
	found bool
}

// noLink stands for "no pair yet" while a set has fewer than two members; every real link is
// weaker, so min() against it yields the first real link.
const noLink = Link(math.MaxUint16)

func (s *exact) search(t *Topology, cand []int, k int) ([]int, Quality) {
	n := len(t.gpus)
	s.m, s.k = len(cand), k
	for i, p := range cand {
		for j, r := range cand {
			if i == j {
				continue
			}
			s.link[i][j] = t.links[p*n+r]
			s.bw[i][j] = t.bw[p*n+r]
			s.deg[i] += s.bw[i][j]
			s.rowMax[i] = max(s.rowMax[i], s.bw[i][j])
			if t.sameNUMA(p, r) {
				s.same[i] |= 1 << j
				s.ndeg[i]++
			}
		}
	}
	for j := range s.m {
		s.twinOf[j] = -1
		for i := j - 1; i >= 0; i-- {
			if s.twins(i, j) {
				s.twinOf[j] = int8(i)
				break
			}
		}
	}
	s.dfs(0, 0, 0, noLink, 0, 0, 0, 0)
	out := make([]int, k)
	for i := range k {
		out[i] = cand[s.bestS[i]]
	}
	return out, s.best
}

// bandwidthBound bounds the bandwidth the remaining r = k-depth picks from start on can add:
// each pick i brings its bandwidth to the chosen GPUs plus its share of the pairs among the
// picks, at most (r-1)/2 · rowMax[i]. The sum of the r largest such gains bounds the total; if
// it cannot reach the best bandwidth, the branch can at best tie on the weakest link and lose
// on bandwidth. Gains are doubled to stay in integers.
func (s *exact) bandwidthBound(start, depth int) int32 {
	r := s.k - depth
	var top [MaxExact]int32 // the r largest doubled gains so far, descending
	filled := 0
	for i := start; i < s.m; i++ {
		g := int32(r-1) * s.rowMax[i]
		for _, c := range s.cur[:depth] {
			g += 2 * s.bw[c][i]
		}
		if filled == r && g <= top[r-1] {
			continue
		}
		j := min(filled, r-1)
		for ; j > 0 && top[j-1] < g; j-- {
			top[j] = top[j-1]
		}
		top[j] = g
		filled = min(filled+1, r)
	}
	var sum int32
	for _, g := range top[:filled] {
		sum += g
	}
	return sum / 2
}

func (s *exact) twins(i, j int) bool {
	for r := range s.m {
		if r != i && r != j && (s.link[i][r] != s.link[j][r] || (s.same[i]^s.same[j])&(1<<r) != 0) {
			return false
		}
	}
	return true
}

// dfs extends the chosen set cur[:depth] (also as the bitmask in) with candidates from start
// on. The remaining arguments are the partial Quality: weakest link, bandwidth, and the sums of
// deg and ndeg and the same-NUMA pairs inside the set, from which Cut and NUMACut follow.
func (s *exact) dfs(start, depth int, in uint16, weakest Link, bw, deg, ndeg, sameIn int32) {
	if depth == s.k {
		q := Quality{WeakestLink: weakest, Bandwidth: int(bw), Cut: int(deg - 2*bw), NUMACut: int(ndeg - 2*sameIn)}
		if s.k < 2 {
			q.WeakestLink = LinkSelf
		}
		if !s.found || q.Better(s.best) {
			s.best, s.bestS, s.found = q, s.cur, true
		}
		return
	}
	if s.found {
		if weakest < s.best.WeakestLink {
			return
		}
		if weakest == s.best.WeakestLink && bw+s.bandwidthBound(start, depth) < int32(s.best.Bandwidth) {
			return
		}
	}
	for i := start; i <= s.m-(s.k-depth); i++ {
		if tw := s.twinOf[i]; tw >= 0 && in&(1<<tw) == 0 {
			continue
		}
		w, b := weakest, bw
		for _, c := range s.cur[:depth] {
			w = min(w, s.link[c][i])
			b += s.bw[c][i]
		}
		if s.found && w < s.best.WeakestLink {
			continue
		}
		s.cur[depth] = int8(i)
		s.dfs(i+1, depth+1, in|1<<i, w, b, deg+s.deg[i], ndeg+s.ndeg[i], sameIn+int32(bits.OnesCount16(s.same[i]&in)))
	}
}

// greedy handles more than MaxExact free GPUs. From every free GPU as a seed it grows a set by
// repeatedly adding the GPU that keeps the weakest link strongest, then the bandwidth highest,
// then has the strongest link to a GPU still outside the set (so that it brings its partner
// along instead of stranding it); it keeps the grown set with the best full Quality and
// finally improves that by one-for-one swaps while any swap gives a better Quality. Growing
// ignores the cut on purpose: judged one GPU at a time, an isolated leftover GPU always looks
// like the best fit, and taking it can block the bonded pair the set should have had; the
// seeds and swaps bring the fragmentation criteria back in. Cost: O(free² · k) to grow from
// all seeds, O(k · free · (k + free)) per improving swap.
func (t *Topology) greedy(cand []int, k int) ([]int, Quality) {
	n, m := len(t.gpus), len(cand)
	// byLink[j] lists the other candidates strongest link first, so that the strongest link
	// from j to a non-member is found by skipping at most k members.
	byLink := make([][]int32, m)
	for j, p := range cand {
		order := make([]int32, 0, m-1)
		for r := range m {
			if r != j {
				order = append(order, int32(r))
			}
		}
		slices.SortStableFunc(order, func(a, b int32) int { return int(t.links[p*n+cand[b]]) - int(t.links[p*n+cand[a]]) })
		byLink[j] = order
	}
	weak := make([]Link, m)  // per candidate: weakest link to the members so far
	bwTo := make([]int, m)   // per candidate: bandwidth to the members so far
	in := make([]bool, m)    // candidate is a member
	set := make([]int, 0, k) // members, as positions
	outward := func(j int) Link {
		for _, r := range byLink[j] {
			if !in[r] {
				return t.links[cand[j]*n+cand[r]]
			}
		}
		return LinkSelf
	}
	var best []int
	var bestQ Quality
	for seed := range m {
		clear(in)
		clear(bwTo)
		for i := range weak {
			weak[i] = noLink
		}
		set = set[:0]
		weakest, bw := noLink, 0
		for next := seed; ; {
			in[next] = true
			p := cand[next]
			set = append(set, p)
			for j, r := range cand {
				weak[j] = min(weak[j], t.links[p*n+r])
				bwTo[j] += int(t.bw[p*n+r])
			}
			if len(set) == k {
				break
			}
			next = -1
			var nw, no Link
			var nb int
			for j := range m {
				if in[j] {
					continue
				}
				w, b := min(weakest, weak[j]), bw+bwTo[j]
				switch {
				case next >= 0 && (w < nw || w == nw && b < nb):
					continue
				case next >= 0 && w == nw && b == nb:
					if o := outward(j); o > no {
						next, no = j, o
					}
					continue
				}
				next, nw, nb, no = j, w, b, outward(j)
			}
			weakest, bw = nw, nb
		}
		if q := t.quality(set, cand); best == nil || q.Better(bestQ) {
			best, bestQ = append(best[:0], set...), q
		}
	}
	best, bestQ = t.improveBySwaps(best, bestQ, cand)
	slices.Sort(best)
	return best, bestQ
}

// improveBySwaps is first-improvement local search over one-for-one swaps of a member for a
// non-member. It keeps each candidate's bandwidth and same-NUMA count to the members, so a swap
// is judged in O(k) without recomputing the Quality. Every accepted swap strictly improves the
// Quality, so the search ends; the pass limit only bounds the time spent on adversarial input.
func (t *Topology) improveBySwaps(set []int, q Quality, cand []int) ([]int, Quality) {
	n := len(t.gpus)
	in := make([]bool, n)
	deg, ndeg := make([]int, n), make([]int, n)    // to all candidates
	bwTo, sameTo := make([]int, n), make([]int, n) // to the members
	same := func(p, r int) int {
		if p != r && t.sameNUMA(p, r) {
			return 1
		}
		return 0
	}
	for _, p := range set {
		in[p] = true
	}
	degSum, ndegSum, sameIn := 0, 0, 0
	for _, p := range cand {
		for _, r := range cand {
			if p == r {
				continue
			}
			deg[p] += int(t.bw[p*n+r])
			ndeg[p] += same(p, r)
			if in[r] {
				bwTo[p] += int(t.bw[p*n+r])
				sameTo[p] += same(p, r)
			}
		}
		if in[p] {
			degSum += deg[p]
			ndegSum += ndeg[p]
			sameIn += sameTo[p]
		}
	}
	sameIn /= 2 // each pair inside the set was counted from both ends

	for pass, improved := 0, true; improved && pass < len(cand); pass++ {
		improved = false
		for i, out := range set {
			rest := noLink // weakest link among the members other than set[i]
			for a := range set {
				for b := a + 1; b < len(set); b++ {
					if a != i && b != i {
						rest = min(rest, t.links[set[a]*n+set[b]])
					}
				}
			}
			for _, r := range cand {
				if in[r] {
					continue
				}
				w := rest
				for a, p := range set {
					if a != i {
						w = min(w, t.links[p*n+r])
					}
				}
				if len(set) < 2 {
					w = LinkSelf
				}
				if w < q.WeakestLink {
					continue
				}
				bw := q.Bandwidth - bwTo[out] + bwTo[r] - int(t.bw[r*n+out])
				si := sameIn - sameTo[out] + sameTo[r] - same(r, out)
				nq := Quality{
					WeakestLink: w,
					Bandwidth:   bw,
					Cut:         degSum - deg[out] + deg[r] - 2*bw,
					NUMACut:     ndegSum - ndeg[out] + ndeg[r] - 2*si,
				}
				if !nq.Better(q) {
					continue
				}
				q, improved = nq, true
				degSum, ndegSum, sameIn = degSum-deg[out]+deg[r], ndegSum-ndeg[out]+ndeg[r], si
				in[out], in[r] = false, true
				for _, c := range cand {
					bwTo[c] += int(t.bw[r*n+c]) - int(t.bw[out*n+c])
					sameTo[c] += same(r, c) - same(out, c)
				}
				set[i], out = r, r
			}
		}
	}
	return set, q
}

// Score bands: a placement as well connected as this node ever offers for k scores
// topBand..MaxScore by how well it fits; a weaker one scores by its weakest link alone, below
// topBand, so that link quality always outranks fit.
const topBand = 5

// Score maps the best achievable k-set on the node to 0..MaxScore for use as an extender
// priority. 0 means the pod does not fit.
//
// The yardstick is the node itself when idle: a set whose weakest link is as strong as the best
// k-set of the idle node scores 5..10, by how little of the remaining free connectivity it cuts
// compared with that idle-node set (1 - Cut/idleCut): 10 when it cuts nothing (it fills an
// island exactly, or takes the last free GPUs), 5 when it cuts as much as carving k GPUs out of
// the idle node. Nodes are thus ranked best fit first, which keeps idle nodes and islands whole
// for large gangs. A set with a weaker weakest link than the idle node could offer means used
// GPUs are forcing a worse placement; it scores by that link: NV# 4, PIX/PXB 3, PHB/NODE 2,
// SYS 1.
//
// Measuring against the node's own hardware rather than an absolute scale is deliberate: pods
// pick a GPU product with node selectors, so the nodes competing for one pod are nearly always
// the same hardware, and what tells them apart is which GPUs are already taken.
func (t *Topology) Score(free []int, k int) int {
	if k == 0 {
		return wellknown.MaxScore
	}
	_, q, ok := t.BestSet(free, k)
	if !ok {
		return 0
	}
	idle := t.idleBest(k)
	if k >= 2 && q.WeakestLink < idle.WeakestLink {
		switch l := q.WeakestLink; {
		case l.IsNVLink():
			return 4
		case l >= LinkPXB:
			return 3
		case l >= LinkNODE:
			return 2
		default:
			return 1
		}
	}
	fit := 1.0
	if idle.Cut > 0 {
		fit = max(0, 1-float64(q.Cut)/float64(idle.Cut))
	}
	return topBand + int(math.Round(fit*(wellknown.MaxScore-topBand)))
}

// idleBest is the Quality of the best k-set with every GPU free, computed once per k.
func (t *Topology) idleBest(k int) Quality {
	r := &t.refs[k]
	r.once.Do(func() {
		_, r.q, _ = t.BestSet(t.Indices(), k)
	})
	return r.q
}
