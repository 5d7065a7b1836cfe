package gang

import (
	"fmt"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/klog/v2"

	"github.com/lockstep-sched/lockstep/decide"
	"github.com/lockstep-sched/lockstep/gangspec"
	"github.com/lockstep-sched/lockstep/gpu"
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
		return m.filterOrdinary(pod, ms, nodes)
	}
	info := newPodInfoOf(pod, ms) // pure: built before taking the lock
	for again := false; ; again = true {
		result, fx, pause := m.filterMember(info, again, nodes)
		m.emit(&fx)
		if pause.next == nil {
			return result
		}
		m.gather(pause)
	}
}

// filterOrdinary passes the nodes where an ordinary pod fits beside bound pods and the
// reservations of gangs at its priority or above, once its queue, if any, takes it. It only reads,
// under the shared lock.
func (m *Manager) filterOrdinary(pod *corev1.Pod, ms gangspec.Membership, nodes []string) FilterResult {
	req := placement.PodRequests(pod)
	var sl *shortlister
	if req.GPU > 0 && !m.cfg.ScoreEveryNode && shortlistable(pod) {
		sl = &shortlister{gpus: req.GPU, tolerations: pod.Spec.Tolerations}
	}
	m.mu.RLock()
	defer m.mu.RUnlock()
	if m.ledger.quota.Enforcing() {
		queue := m.ledger.quota.Resolve(pod.Namespace, ms.Queue)
		if why := m.snapshots.queues().PodWait(pod.Namespace, pod.Name, queue, req); why != "" {
			return failAll(nodes, why)
		}
	}
	return m.filterFree(req, decide.Above("", podPriority(pod)), m.book.reservations(), nodes, sl)
}

// filterMember decides for a gang member, under the lock: rejected, waiting for its group object,
// free to use free capacity (its gang has quorum), admitted through its gang's reservation, or
// pausing for the rest of its gang (gathering, below; pause is set then, and the call asks again
// after it). again says whether it asks again after a pause.
func (m *Manager) filterMember(info *podInfo, again bool, nodes []string) (result FilterResult, fx effects, pause gatherWait) {
	m.mu.Lock()
	defer m.mu.Unlock()
	p, known := m.ledger.pods[info.UID]
	switch {
	case again && !known:
		return failAll(nodes, fmt.Sprintf("pod %s was deleted; lockstep no longer schedules it", info.Key())), fx, pause
	case !again:
		var err error
		if p, err = m.ledger.takeInFromScheduler(info); err != nil {
			return failAll(nodes, err.Error()), fx, pause
		}
		if !known {
			m.ledger.gangOf(p).arrivals.noteArrival(m.now()) // the scheduler saw it before the informer
		}
	}
	p.parked = false // back at filter; a reservation this call makes need not recall it
	result = m.answerMemberLocked(p, nodes, &fx, &pause)
	p.parked = pause.next == nil && len(result.Passing(nodes)) == 0
	return result, fx, pause
}

// answerMemberLocked is filterMember's decision for a member the ledger has taken in.
func (m *Manager) answerMemberLocked(p *podInfo, nodes []string, fx *effects, pause *gatherWait) FilterResult {
	g := m.ledger.gangOf(p)
	fx.touched(g.key)
	s := m.snapshots.current()
	if err := s.MemberError(s.Pods[p.UID]); err != nil {
		fx.podEvent(p, corev1.EventTypeWarning, wellknown.ReasonGangRejected, err.Error())
		return failAll(nodes, err.Error())
	}
	if p.Spec == nil {
		a := decide.Admission{Slot: -1, Wait: fmt.Sprintf("gang %s: waiting for %s to exist; its members schedule only together, once it does", g.key, p.Awaiting)}
		m.applyAdmissionLocked(p, g, a, fx)
		return answer(a, nodes)
	}
	if sg := s.Gangs[g.key]; sg.Satisfied(p.Spec) {
		// Quorum is met: the rest of the gang schedules like ordinary pods, beside the quorums of
		// waiting gangs at its priority or above (quorums before extras).
		if why := s.QueueWait(s.Pods[p.UID]); why != "" {
			return failAll(nodes, why)
		}
		return m.filterFree(p.Requests, s.ProtectedQuorums(g.key, sg.Priority()), s.Reservations, nodes, nil)
	}
	if s.Reservations.Live(g.key) == nil && m.catchUpExpiryLocked(g, fx) {
		s = m.snapshots.current()
	}
	a := s.Admit(s.Pods[p.UID], nodes)
	a = devicesChecked(m.ledger, m.book, m.snapshots, s.Pods[p.UID], g.key, a, nodes)
	if a.LacksMembers && mayGather(m.stop, m.cfg.GatherWait) {
		// Decided again after the pause: nothing of this decision is applied.
		if *pause = g.gatherPause(m.now(), m.cfg.GatherWait); pause.next != nil {
			return FilterResult{}
		}
	}
	m.applyAdmissionLocked(p, g, a, fx)
	return answer(a, nodes)
}

// answer is an admission as the scheduler reads it.
func answer(a decide.Admission, offered []string) FilterResult {
	if a.Wait != "" {
		return failAll(offered, a.Wait)
	}
	return passOnly(a.Node)
}

// filterFree passes the nodes where req fits beside bound pods and the reservations (of rs) the
// view respects: the pod's own gang's is its own to use, and those of lower-priority gangs yield
// to it (the bind takes them over, see bindNow). A shortlister, when given, then narrows the
// passing nodes (the shortlist, below); it ranks each as the loop passes it, while the node is at
// hand.
func (m *Manager) filterFree(req placement.Resources, v decide.View, rs decide.Reservations, nodes []string, sl *shortlister) FilterResult {
	held, _ := rs.Held(v)
	for node, r := range v.Quorums {
		held[node] = held[node].Add(r)
	}
	holders := func(node string) string { return rs.Holders(node, v) }
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

// --- the shortlist -----------------------------------------------------------------------------

// The shortlist: filter passes an ordinary GPU pod only the nodes lockstep would place it on.
//
// Scores are added: the scheduler sums its plugins' scores and lockstep's, and lockstep's packing
// usually outweighs the plugins' spreading, but not always, and the scheduler spends a fifth of
// its CPU per pod scoring every feasible node and sending them all to prioritize for a choice
// lockstep has in effect already made. Passing only the nodes lockstep ranks best (all of them
// when they tie, for the scheduler's scores to choose among) makes packing the rule instead of the
// usual outcome, and when one node is left the scheduler skips scoring and prioritize altogether.
//
// Only pods that ask nothing of the scheduler's scores are shortlisted: a pod with preferred node
// or pod (anti-)affinity or a ScheduleAnyway spread constraint keeps every node it fits, and so
// does a pod of a ReplicaSet, StatefulSet or ReplicationController, which the scheduler spreads by
// default. PreferNoSchedule taints rank above packing, as they do in the scheduler.

// shortlistable says whether a pod leaves the choice among the nodes it fits to lockstep.
func shortlistable(pod *corev1.Pod) bool {
	if a := pod.Spec.Affinity; a != nil {
		if a.NodeAffinity != nil && len(a.NodeAffinity.PreferredDuringSchedulingIgnoredDuringExecution) > 0 {
			return false
		}
		if a.PodAffinity != nil && len(a.PodAffinity.PreferredDuringSchedulingIgnoredDuringExecution) > 0 {
			return false
		}
		if a.PodAntiAffinity != nil && len(a.PodAntiAffinity.PreferredDuringSchedulingIgnoredDuringExecution) > 0 {
			return false
		}
	}
	for _, c := range pod.Spec.TopologySpreadConstraints {
		if c.WhenUnsatisfiable == corev1.ScheduleAnyway {
			return false
		}
	}
	if owner := metav1.GetControllerOf(pod); owner != nil {
		switch owner.Kind {
		case "ReplicaSet", "StatefulSet", "ReplicationController":
			return false
		}
	}
	return true
}

// shortlister narrows filter's passing nodes for an ordinary pod asking for gpus to the best
// ranked: the fewest PreferNoSchedule taints it does not tolerate, then the best GPU score
// outside the capacity held for others. Filter's loop shows it each passing node (see), while the
// node is at hand; narrow then lists those of the best rank. Failed nodes keep their reasons; the
// nodes left off are not listed as failed, since the pod is schedulable and a list of them would
// be all the scheduler decodes.
type shortlister struct {
	gpus        int64
	tolerations []corev1.Toleration
	memo        gpu.Memo
	best        shortlistRank
	count       int
	// at are the offered positions of the first nodes of the best rank so far. A few nodes
	// usually rank best, and then narrow needs no second look at every node; on a cluster of
	// identical idle nodes every node ties, and nothing is narrowed.
	at [64]int32
}

func (s *shortlister) rank(n *nodeInfo, held int64) shortlistRank {
	return shortlistRank{untoleratedSoftTaints(n.softTaints, s.tolerations), n.gpuScore(&s.memo, s.gpus, held)}
}

// see ranks the passing node offered at position i.
func (s *shortlister) see(i int, n *nodeInfo, held int64) {
	switch r := s.rank(n, held); {
	case s.count == 0 || r.better(s.best):
		s.best, s.count = r, 0
		fallthrough
	case r == s.best:
		if s.count < len(s.at) {
			s.at[s.count] = int32(i)
		}
		s.count++
	}
}

func (s *shortlister) narrow(out FilterResult, offered []string, nodes map[string]*nodeInfo, held map[string]placement.Resources, mt *Metrics) FilterResult {
	passing := out.Passing(offered)
	if s.count == len(passing) {
		return out
	}
	keep := make([]string, 0, s.count)
	if s.count <= len(s.at) {
		for _, i := range s.at[:s.count] {
			keep = append(keep, offered[i])
		}
	} else {
		for _, name := range passing {
			if s.rank(nodes[name], held[name].GPU) == s.best {
				keep = append(keep, name)
			}
		}
	}
	mt.observeShortlist()
	return FilterResult{Feasible: keep, Failed: out.Failed, Resolvable: out.Resolvable}
}

type shortlistRank struct {
	taints int
	score  int
}

func (r shortlistRank) better(than shortlistRank) bool {
	if r.taints != than.taints {
		return r.taints < than.taints
	}
	return r.score > than.score
}

// untoleratedSoftTaints counts what the scheduler's TaintToleration scores a node by.
func untoleratedSoftTaints(taints []corev1.Taint, tolerations []corev1.Toleration) int {
	count := 0
	for i := range taints {
		tolerated := false
		for j := range tolerations {
			// Comparison operators are behind a scheduler feature gate that is off by default.
			if tolerations[j].ToleratesTaint(klog.Background(), &taints[i], false) {
				tolerated = true
				break
			}
		}
		if !tolerated {
			count++
		}
	}
	return count
}

// --- gathering ---------------------------------------------------------------------------------

// Gathering. Operators create a gang's pods one after another, milliseconds apart, and
// kube-scheduler takes the first before the rest exist. Turned away, each costs the scheduler a
// status write that holds its loop, then a back-off and a second cycle, all on the way to the
// gang's commit. So while members keep arriving, a member that lacks nothing but the rest of its
// gang waits at filter for the next one instead: at most Config.GatherWait past the latest
// arrival, and gatherRounds times that in all before its gang reserves. The scheduler's loop is
// paused meanwhile, which is why both bounds are short: a gang created slowly, or never
// completed, costs other pods no more than a short pause and is then turned away as before.

// gatherRounds bounds a gang's gathering, in all, to this many GatherWaits before it reserves.
const gatherRounds = 5

// arrivals is when a gang's members were last first seen, and whom to tell of the next.
type arrivals struct {
	last time.Time
	// next is closed at the next arrival; nil until a filter call waits for one.
	next chan struct{}
	// gathered is how long its members have waited at filter since the gang last reserved.
	gathered time.Duration
}

// noteArrival records a member first seen at now and wakes the filter calls waiting for one.
func (a *arrivals) noteArrival(now time.Time) {
	a.last = now
	if a.next != nil {
		close(a.next)
		a.next = nil
	}
}

// gatherWait is a filter call's pause for the next member; a nil next is no pause.
type gatherWait struct {
	g       *gangInfo
	next    <-chan struct{}
	longest time.Duration
}

// gatherPause is how long a member of g lacking only members may wait for the next, given wait
// per arrival: what is left of wait since the latest one, within the gang's budget.
func (g *gangInfo) gatherPause(now time.Time, wait time.Duration) gatherWait {
	a := &g.arrivals
	longest := min(a.last.Add(wait).Sub(now), gatherRounds*wait-a.gathered)
	if longest <= 0 {
		return gatherWait{}
	}
	if a.next == nil {
		a.next = make(chan struct{})
	}
	return gatherWait{g: g, next: a.next, longest: longest}
}

// mayGather says whether a member lacking only members may wait up to wait for the next: not
// once the manager is stopping (stop is closed), which no arrival would end.
func mayGather(stop <-chan struct{}, wait time.Duration) bool {
	select {
	case <-stop:
		return false
	default:
		return wait > 0
	}
}

// gather pauses a filter call until the next member arrives or the wait is over, and charges
// the pause to its gang's budget. Its time is measured on the wall clock, which the wait runs on,
// whatever clock the manager decides by.
func (m *Manager) gather(w gatherWait) {
	began := time.Now()
	m.metrics.gatherStarted()
	t := time.NewTimer(w.longest)
	defer t.Stop()
	outcome := "arrived"
	select {
	case <-w.next:
	case <-t.C:
		outcome = "gave_up"
	case <-m.stop:
		outcome = "gave_up"
	}
	waited := time.Since(began)
	m.locked(func() { w.g.arrivals.gathered += waited })
	m.metrics.observeGather(outcome, waited)
}
