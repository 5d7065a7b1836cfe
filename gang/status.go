package gang

import (
	"fmt"
	"sort"
	"time"

	"github.com/lockstep-sched/lockstep/gangspec"
	"github.com/lockstep-sched/lockstep/placement"

	"github.com/lockstep-sched/lockstep/views"
)

// Status lists every gang, or those of one namespace, sorted by namespace and name.
func (m *Manager) Status(namespace string) []views.GangStatus {
	m.mu.RLock()
	defer m.mu.RUnlock()
	out, _ := m.gangsLocked(namespace)
	return out
}

// gangsLocked is Status, with the GPUs the listed gangs' reservations hold for their members.
func (m *Manager) gangsLocked(namespace string) (out []views.GangStatus, reservedGPUs int64) {
	out = []views.GangStatus{}
	places := m.placesLocked()
	for _, g := range m.ledger.gangs {
		if namespace != "" && g.namespace != namespace {
			continue
		}
		st, reserved := m.gangStatusLocked(g)
		st.Line = places[g.key]
		out = append(out, st)
		reservedGPUs += reserved
	}
	sort.Slice(out, func(i, j int) bool {
		if out[i].Namespace != out[j].Namespace {
			return out[i].Namespace < out[j].Namespace
		}
		return out[i].Name < out[j].Name
	})
	return out, reservedGPUs
}

// gangStatusLocked is the debug summary of one gang, owned by the gang's own records.
func (m *Manager) gangStatusLocked(g *gangInfo) (st views.GangStatus, reservedGPUs int64) {
	st = views.GangStatus{Namespace: g.namespace, Name: g.name, Bound: g.boundCount(), Reason: g.lastReason, Attempts: g.attempts, ExtrasTakenBack: g.extrasTaken, Priority: g.priority(),
		ReservationTakenBy: g.takenBy}
	spec, refPod := g.reference()
	if spec != nil {
		st.Source, st.MinAvailable, st.TotalNumber = spec.Source, spec.MinAvailable, spec.TotalNumber
		st.TaskQuorums, st.Group, st.MatchPolicy, st.Mode = spec.TaskQuorums(), spec.Bundle, string(spec.Policy), spec.Mode
		st.WaitingTime = m.waitingTime(spec).String()
	}
	if oldest := g.oldest(); oldest != nil {
		st.Queue = oldest.queue
	}
	res := m.book.live(g.key)
	st.Phase = phaseOf(g, spec, res)
	if res != nil && (res.state == reserving || res.state == holding) {
		expires := res.expires
		st.ReservationExpires = &expires
	}
	if c := g.lastCommit; c != nil {
		st.LastCommit = c.status()
	}
	for _, p := range g.sortedMembers() {
		mb, reserved := memberStatus(p, spec, refPod, res)
		st.Members = append(st.Members, mb)
		reservedGPUs += reserved
	}
	st.Topology = g.topology().String()
	st.Domains = m.domainsOf(st.Members)
	if st.Reason == "" {
		st.Reason = "no member has reached lockstep's filter yet"
		for _, mb := range st.Members {
			if mb.Reason != "" {
				st.Reason = mb.Reason
				break
			}
		}
	}
	return st, reservedGPUs
}

func phaseOf(g *gangInfo, spec *gangspec.Spec, res *reservation) views.Phase {
	switch {
	case spec != nil && g.satisfied(spec):
		return views.PhaseBound
	case res != nil && res.state == committing:
		return views.PhaseBinding
	case res != nil && res.state == holding:
		return views.PhaseHolding
	case res != nil:
		return views.PhaseReserving
	case g.timedOut:
		return views.PhaseTimedOut
	default:
		return views.PhaseWaiting
	}
}

func (c *commitRecord) status() *views.CommitStatus {
	return &views.CommitStatus{
		Started: c.started, Running: c.finished.IsZero(), Members: c.members, Bound: c.bound, Failed: c.failed,
		Duration: formatSpan(c.duration()), PartlyBoundFor: formatSpan(c.partlyBoundFor()), StillPartial: c.stillPartial() && !c.finished.IsZero(),
	}
}

// memberStatus is one member as /debug/gangs shows it; spec and refPod are its gang's.
// reserved is the GPUs the member's reservation holds for it, counted by lockstep_reserved_gpus.
func memberStatus(p *podInfo, spec *gangspec.Spec, refPod *podInfo, res *reservation) (mb views.MemberStatus, reserved int64) {
	mb = views.MemberStatus{Pod: p.key(), Requests: p.requests.String(), State: "Pending"}
	var s *slot
	if res != nil {
		s = res.slotFor(p.uid)
	}
	switch {
	case p.terminal:
		mb.State, mb.Node = "Finished", p.node
	case p.holds():
		mb.State, mb.Node, mb.GPUIDs = "Bound", p.node, p.gpuIDs
	case p.specErr != nil:
		mb.State, mb.Reason = "Rejected", p.specErr.Error()
	case p.awaiting != "":
		mb.Reason = "waiting for " + p.awaiting + " to exist"
	case p != refPod && gangspec.Disagreement(p.key(), p.spec, spec, refPod.key()) != nil:
		mb.State, mb.Reason = "Rejected", gangspec.Disagreement(p.key(), p.spec, spec, refPod.key()).Error()
	case s != nil:
		mb.State, mb.Node = s.state.String(), s.node
		if s.holdsCapacity() && res.state == reserving {
			expires := res.expires
			mb.ReservationExpires = &expires
			reserved = s.requests.GPU
		}
	case p.condition != "":
		mb.Reason = "scheduler: " + p.condition
	}
	return mb, reserved
}

// Standing is where one gang stands, in the few words a group object's status holds.
type Standing struct {
	Phase views.Phase
	// Members are the gang's pods lockstep knows; Bound hold a node now.
	Members, Bound int
	// Reason is why the gang waits, when it does.
	Reason string
	// Since is when the oldest member was created.
	Since time.Time
	// QuorumRequests is what the gang's oldest MinAvailable unfinished members ask for in all.
	QuorumRequests placement.Resources
}

// Standing reports where a gang stands; ok is false when lockstep knows no member of it.
func (m *Manager) Standing(gang string) (st Standing, ok bool) {
	m.mu.RLock()
	defer m.mu.RUnlock()
	g := m.ledger.gangs[gang]
	if g == nil || len(g.members) == 0 {
		return Standing{}, false
	}
	spec, _ := g.reference()
	st = Standing{Phase: phaseOf(g, spec, m.book.live(gang)), Members: len(g.members), Bound: g.boundCount(), Reason: g.lastReason}
	counted := 0
	for _, p := range g.sortedMembers() {
		if st.Since.IsZero() {
			st.Since = p.created
		}
		if !p.terminal && (spec == nil || counted < spec.MinAvailable) {
			st.QuorumRequests = st.QuorumRequests.Add(p.requests)
			counted++
		}
	}
	if st.Reason == "" {
		full, _ := m.gangStatusLocked(g)
		st.Reason = full.Reason
	}
	return st, true
}

// FitsInTotal reports whether req fits what the cluster's schedulable nodes have free, summed,
// beside bound pods and reservations; why says what is short when it does not. It is the test
// Volcano's enqueue makes before its job controller creates a job's pods (see package podgroup):
// necessary, not sufficient, for the gang to fit, which filter then decides member by member.
func (m *Manager) FitsInTotal(req placement.Resources) (fits bool, why string) {
	m.mu.RLock()
	defer m.mu.RUnlock()
	held, _ := m.book.held(everyOther(""))
	var free placement.Resources
	for name, n := range m.ledger.nodes {
		if n.known && !n.unschedulable {
			left := n.free().Sub(held[name])
			free = free.Add(placement.Resources{MilliCPU: max(left.MilliCPU, 0), Memory: max(left.Memory, 0), GPU: max(left.GPU, 0)})
		}
	}
	req.Pods = 0
	if ok, short := req.FitsIn(free); !ok {
		return false, fmt.Sprintf("needs %s %s in all; the cluster has %s free", placement.Amount(short, req.Get(short)), short, placement.Amount(short, free.Get(short)))
	}
	return true, ""
}
