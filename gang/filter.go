package gang

import (
	"cmp"
	"fmt"

	corev1 "k8s.io/api/core/v1"

	"github.com/lockstep-sched/lockstep/gangspec"
	"github.com/lockstep-sched/lockstep/placement"
	"github.com/lockstep-sched/lockstep/wellknown"
)

// FilterResult is lockstep's answer to the scheduler's filter call.
//
// A failure is resolvable when evicting pods bound to the node might cure it: the pod, an
// ordinary one or a member of a gang with quorum, does not fit beside the pods bound there. The
// scheduler then considers the node for its preemption, which asks lockstep before it evicts
// (Preempt). Every other failure is unresolvable: a node lockstep has not seen, capacity other
// gangs' reservations hold, and every refusal of a gang member before quorum, for which lockstep
// reserves itself and lets the scheduler evict nothing.
type FilterResult struct {
	// AllPass is true when every offered node passes; Feasible is then nil.
	AllPass bool
	// Feasible are the passing nodes, in the order offered, when not all pass.
	Feasible []string
	// Failed gives each failing node's reason. It is nil when a gang member passes the one node
	// its gang reserved for it: the scheduler then binds there and never reads the other nodes'
	// reasons, and naming a thousand of them cost both sides more than the rest of the call.
	Failed map[string]string
	// Resolvable names the failed nodes whose failure is resolvable; nil when none is.
	Resolvable map[string]bool
}

// Passing is the list of passing nodes, given the nodes offered.
func (r FilterResult) Passing(offered []string) []string {
	if r.AllPass {
		return offered
	}
	return r.Feasible
}

// Filter answers which of the offered nodes the pod may use.
//
// An ordinary pod (and a gang member once its gang has quorum) may use any node where it fits
// without touching capacity that gangs hold in reservations. A gang member before quorum passes
// only the one node its gang's reservation holds for it; when its gang has no reservation yet,
// lockstep first checks that min-available members fit at once and reserves all of them.
func (m *Manager) Filter(pod *corev1.Pod, nodes []string) FilterResult {
	ms := readMembership(m.cfg.Reader, pod)
	if ms.Gang == "" {
		req := placement.PodRequests(pod)
		var sl *shortlister
		if req.GPU > 0 && !m.cfg.ScoreEveryNode && shortlistable(pod) {
			sl = &shortlister{gpus: req.GPU, tolerations: pod.Spec.Tolerations}
		}
		m.mu.RLock()
		defer m.mu.RUnlock()
		if why := m.ordinaryQueueWait(pod, ms.Queue, req); why != "" {
			return failAll(nodes, why)
		}
		return m.filterFree(req, above("", podPriority(pod)), nodes, sl)
	}
	info := newPodInfoOf(pod, ms) // pure: built before taking the lock
	for again := false; ; again = true {
		var fx effects
		var result FilterResult
		var pause gatherWait
		m.locked(func() { result = m.filterMemberLocked(info, again, nodes, &fx, &pause) })
		m.apply(&fx)
		if pause.next == nil {
			return result
		}
		m.gather(pause)
	}
}

// filterMemberLocked decides for a gang member: rejected, waiting for its group object, free to
// use free capacity (its gang has quorum), admitted through its gang's reservation, or pausing
// for the rest of its gang (gather.go; pause is set then, and the call asks again after it).
func (m *Manager) filterMemberLocked(info *podInfo, again bool, nodes []string, fx *effects, pause *gatherWait) FilterResult {
	p, known := m.ledger.pods[info.uid]
	switch {
	case again && !known:
		return failAll(nodes, fmt.Sprintf("pod %s was deleted; lockstep no longer schedules it", info.key()))
	case !again:
		var err error
		if p, err = m.ledger.takeInFromScheduler(info); err != nil {
			return failAll(nodes, err.Error())
		}
		if !known {
			m.ledger.gangOf(p).arrivals.noteArrival(m.now()) // the scheduler saw it before the informer
		}
	}
	p.parked = false // back at filter; a reservation this call makes need not recall it
	result := m.answerMemberLocked(p, nodes, fx, pause)
	p.parked = pause.next == nil && len(result.Passing(nodes)) == 0
	return result
}

// answerMemberLocked is filterMemberLocked's decision for a member the ledger has taken in.
func (m *Manager) answerMemberLocked(p *podInfo, nodes []string, fx *effects, pause *gatherWait) FilterResult {
	g := m.ledger.gangOf(p)
	fx.touched(g.key)
	if err := cmp.Or(memberError(p, g), m.tierError(p, g)); err != nil {
		fx.podEvent(p, corev1.EventTypeWarning, wellknown.ReasonGangRejected, err.Error())
		return failAll(nodes, err.Error())
	}
	if p.spec == nil {
		a := admission{wait: fmt.Sprintf("gang %s: waiting for %s to exist; its members schedule only together, once it does", g.key, p.awaiting)}
		m.applyAdmission(p, g, nil, a, fx)
		return a.answer(nodes)
	}
	if g.satisfied(p.spec) {
		// Quorum is met: the rest of the gang schedules like ordinary pods, beside the quorums of
		// waiting gangs at its priority or above (quorums before extras).
		if why := m.podQueueWait(p); why != "" {
			return failAll(nodes, why)
		}
		v := above(g.key, g.priority())
		v.quorums, v.quorumsOf = m.protectedQuorums(g.key, g.priority())
		return m.filterFree(p.requests, v, nodes, nil)
	}
	res := m.liveReservation(g.key)
	if res == nil {
		m.catchUpExpiryLocked(g, fx)
	}
	a := m.admit(p, g, p.spec, res, nodes)
	if a.lacksMembers && m.mayGather() {
		// Decided again after the pause: nothing of this decision is applied.
		if *pause = g.gatherPause(m.now(), m.cfg.GatherWait); pause.next != nil {
			return FilterResult{}
		}
	}
	m.applyAdmission(p, g, res, a, fx)
	return a.answer(nodes)
}

// memberError is why a member is refused whatever the capacity: its markers or its group object
// are unusable, or its rules disagree with its gang's.
func memberError(p *podInfo, g *gangInfo) error {
	if p.specErr != nil {
		return p.specErr
	}
	ref, refPod := g.reference()
	if p.spec == nil || refPod == p {
		return nil
	}
	if err := gangspec.Disagreement(p.key(), p.spec, ref, refPod.key()); err != nil {
		return err
	}
	if p.priority != refPod.priority {
		return fmt.Errorf("pod %s: priority %d: gang %s already has priority %d (from pod %s); all members must agree (give them one PriorityClass)",
			p.key(), p.priority, g.key, refPod.priority, refPod.key())
	}
	if !p.topology.same(refPod.topology) {
		return fmt.Errorf("pod %s: network topology %q: gang %s already asks %q (from pod %s); all members must agree",
			p.key(), p.topology, g.key, refPod.topology, refPod.key())
	}
	return nil
}

// filterFree passes the nodes where req fits beside bound pods and the reservations the view
// respects: the pod's own gang's is its own to use, and those of lower-priority gangs yield to it
// (the bind takes them over, see takeNodeLocked). A shortlister, when given, then narrows the
// passing nodes (shortlist.go); it ranks each as the loop passes it, while the node is at hand.
func (m *Manager) filterFree(req placement.Resources, v view, nodes []string, sl *shortlister) FilterResult {
	held, _ := m.book.held(v)
	for node, r := range v.quorums {
		held[node] = held[node].Add(r)
	}
	holders := func(node string) string { return m.holdersIn(node, v) }
	var out FilterResult
	var state placement.NodeState
	for i, name := range nodes {
		n := m.ledger.readNodeState(&state, name, held)
		reason, refusal := placement.WhyNot(req, name, &state, holders)
		if refusal == placement.Fits {
			if sl != nil {
				sl.see(i, n, state.Held.GPU)
			}
			if out.Failed != nil {
				out.Feasible = append(out.Feasible, name)
			}
			continue
		}
		if out.Failed == nil {
			// The first failure: from here on the passing nodes need a list of their own.
			out.Failed = map[string]string{}
			out.Feasible = append(make([]string, 0, len(nodes)-1), nodes[:i]...)
		}
		out.Failed[name] = reason
		if refusal.Preemptible() {
			if out.Resolvable == nil {
				out.Resolvable = map[string]bool{}
			}
			out.Resolvable[name] = true
		}
	}
	out.AllPass = out.Failed == nil
	if sl != nil {
		out = sl.narrow(out, nodes, m.ledger.nodes, held, m.metrics)
	}
	return out
}

func failAll(nodes []string, reason string) FilterResult {
	failed := make(map[string]string, len(nodes))
	for _, n := range nodes {
		failed[n] = reason
	}
	return FilterResult{Failed: failed}
}

// passOnly passes keep alone and names no failed node (see FilterResult.Failed).
func passOnly(keep string) FilterResult {
	return FilterResult{Feasible: []string{keep}}
}

func nodeSet(nodes []string) map[string]bool {
	set := make(map[string]bool, len(nodes))
	for _, n := range nodes {
		set[n] = true
	}
	return set
}
