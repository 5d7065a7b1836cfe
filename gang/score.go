package gang

import (
	"slices"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/lockstep-sched/lockstep/decide"
	"github.com/lockstep-sched/lockstep/gpu"
	"github.com/lockstep-sched/lockstep/placement"
	"github.com/lockstep-sched/lockstep/wellknown"
)

// Prioritize scores the offered nodes for a pod, 0..MaxScore, in the order given, in dst's
// storage when it has room: the scheduler sends every node on every call, and a fresh slice each
// time was garbage the collector then had to chase.
//
// A gang member before quorum scores its reserved (or planned) node highest; filter offers only
// that one anyway. A member after quorum prefers nodes already holding its gang mates. Any other GPU pod
// scores by the best set of GPUs the node can give it (package gpu): the strongest weakest link
// first, then best fit, so that NVLink islands and whole nodes stay free for gangs. Pods without
// GPUs score 0 everywhere and leave placement to the scheduler's own plugins.
func (m *Manager) Prioritize(pod *corev1.Pod, nodes []string, dst []int64) []int64 {
	scores := slices.Grow(dst[:0], len(nodes))[:len(nodes)]
	clear(scores)
	m.mu.RLock()
	defer m.mu.RUnlock()

	p, known := m.ledger.pods[pod.UID]
	if !known {
		p = newPodInfo(pod, m.cfg.Reader)
	}
	g := m.ledger.gangOf(p)
	if node := reservedNode(m.book, g, p.UID); node != "" {
		for i, n := range nodes {
			if n == node {
				scores[i] = wellknown.MaxScore
			}
		}
		return scores
	}
	if p.Requests.GPU == 0 {
		return scores
	}
	var mates map[string]bool
	if g != nil {
		mates = map[string]bool{}
		for _, q := range g.members {
			if q.Holds() {
				mates[q.Node] = true
			}
		}
	}
	var reserved map[string]placement.Resources
	if !m.book.empty() {
		// Most calls find no reservation: the copy of the book would be all they allocate.
		reserved, _ = m.book.reservations().Held(decide.Above(p.Gang, p.Priority))
	}
	near := nearMates(len(m.cfg.Tiers), m.ledger.nodes, mates)
	var memo gpu.Memo
	for i, name := range nodes {
		n, ok := m.ledger.nodes[name]
		if !ok || n.allocatable.GPU == 0 {
			continue
		}
		// The length checks spare a call per node when, as usual, neither map has anything.
		if len(mates) > 0 && mates[name] {
			scores[i] = wellknown.MaxScore
			continue
		}
		var held int64
		if len(reserved) > 0 {
			held = reserved[name].GPU
		}
		scores[i] = int64(n.gpuScore(&memo, p.Requests.GPU, held))
		if near != nil {
			scores[i] = near.score(n, scores[i])
		}
	}
	return scores
}

// mateDomains are, per network tier, the domains holding a gang's bound members: a member after
// quorum prefers the narrowest of them, so the gang's traffic stays inside it.
type mateDomains []map[string]bool

// nearMates are the domains of the nodes holding mates at each of tiers tiers; nil without tiers
// or mates.
func nearMates(tiers int, nodes map[string]*nodeInfo, mates map[string]bool) mateDomains {
	if tiers == 0 || len(mates) == 0 {
		return nil
	}
	out := make(mateDomains, tiers)
	for i := range out {
		out[i] = map[string]bool{}
		for node := range mates {
			if n := nodes[node]; n != nil && i < len(n.domains) {
				out[i][n.domains[i]] = true
			}
		}
	}
	return out
}

// score ranks a node by the narrowest tier at which it shares a domain with a mate (MaxScore-1
// for the narrowest, one less per tier), above every node sharing none, whose GPU score gpu is
// capped below them; among nodes of one tier the GPU score cannot reorder them, which keeps the
// rule simple to read off /debug/gangs.
func (d mateDomains) score(n *nodeInfo, gpu int64) int64 {
	floor := int64(wellknown.MaxScore - 1 - len(d))
	for i, domains := range d {
		if i < len(n.domains) && domains[n.domains[i]] {
			return max(floor+1, int64(wellknown.MaxScore-1-i))
		}
	}
	return max(min(gpu, floor), 0)
}

// reservedNode is the node a member's gang holds for it, "" when none.
func reservedNode(book *reservationBook, g *gangInfo, uid types.UID) string {
	if g == nil {
		return ""
	}
	if res := book.reserving(g.key); res != nil {
		if s := res.slotFor(uid); s != nil {
			return s.node
		}
	}
	return ""
}
