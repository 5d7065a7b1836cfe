package gang

import (
	"fmt"
	"sort"
	"time"

	"github.com/lockstep-sched/lockstep/decide"
	"github.com/lockstep-sched/lockstep/gangspec"
	"github.com/lockstep-sched/lockstep/placement"

	"github.com/lockstep-sched/lockstep/views"
)

// Status lists every gang, or those of one namespace, sorted by namespace and name.
func (m *Manager) Status(namespace string) []views.GangStatus {
	m.mu.RLock()
	defer m.mu.RUnlock()
	out, _ := m.report().gangs(namespace, m.snapshots.ofGangs().Places())
	return out
}

// report is the /debug views' reading of the live state, under the shared lock.
func (m *Manager) report() report {
	return report{ledger: m.ledger, book: m.book, rules: m.rules}
}

type report struct {
	ledger *ledger
	book   *reservationBook
	rules  decide.Rules
}

// gangs is Status, each gang with its place in line from places, and the GPUs the listed gangs'
// reservations hold for their members (lockstep_reserved_gpus).
func (r report) gangs(namespace string, places map[string]*views.LineStatus) (out []views.GangStatus, reservedGPUs int64) {
	out = []views.GangStatus{}
	for _, g := range r.ledger.gangs {
		if namespace != "" && g.namespace != namespace {
			continue
		}
		st, reserved := r.gang(g)
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

// gang is the debug summary of one gang, and the GPUs its reservation holds for its members.
func (r report) gang(g *gangInfo) (st views.GangStatus, reservedGPUs int64) {
	view := g.view()
	st = views.GangStatus{Namespace: g.namespace, Name: g.name, Bound: view.BoundCount(), Reason: g.lastReason, Attempts: g.attempts,
		ExtrasTakenBack: g.extrasTaken, Priority: view.Priority(), ReservationTakenBy: g.takenBy}
	spec, _ := view.Reference()
	if spec != nil {
		st.Source, st.MinAvailable, st.TotalNumber = spec.Source, spec.MinAvailable, spec.TotalNumber
		st.TaskQuorums, st.Group, st.MatchPolicy, st.Mode = spec.TaskQuorums(), spec.Bundle, string(spec.Policy), spec.Mode
		if spec.DisruptAll {
			st.Disruption = "All"
		}
		st.WaitingTime = decide.WaitingTime(r.rules, spec).String()
	}
	if len(view.Members) > 0 {
		st.Queue = view.Oldest().Queue
	}
	res := r.book.live(g.key)
	st.Phase = phaseOf(view, spec, res)
	if res != nil && (res.state == decide.Reserving || res.state == decide.Holding) {
		expires := res.expires
		st.ReservationExpires = &expires
	}
	if c := g.lastCommit; c != nil {
		st.LastCommit = c.status()
	}
	for _, p := range view.Members {
		mb, reserved := memberStatus(p, g.members[p.UID], view, res)
		st.Members = append(st.Members, mb)
		reservedGPUs += reserved
	}
	st.Topology = view.Topology()
	st.Domains = r.domains(st.Members)
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

func phaseOf(g *decide.Gang, spec *gangspec.Spec, res *reservation) views.Phase {
	switch {
	case spec != nil && g.Satisfied(spec):
		return views.PhaseBound
	case res != nil && res.state == decide.Committing:
		return views.PhaseBinding
	case res != nil && res.state == decide.Holding:
		return views.PhaseHolding
	case res != nil:
		return views.PhaseReserving
	case g.TimedOut:
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

// memberStatus is one member as /debug/gangs shows it: p as its gang's view g has it, live its
// record. reserved is the GPUs the member's reservation holds for it.
func memberStatus(p *decide.Pod, live *podInfo, g *decide.Gang, res *reservation) (mb views.MemberStatus, reserved int64) {
	mb = views.MemberStatus{Pod: p.Key(), Requests: p.Requests.String(), State: "Pending"}
	var s *slot
	if res != nil {
		s = res.slotFor(p.UID)
	}
	switch {
	case p.Terminal:
		mb.State, mb.Node = "Finished", p.Node
	case p.Holds():
		mb.State, mb.Node, mb.GPUIDs = "Bound", p.Node, live.gpuIDs
	case p.SpecErr != nil:
		mb.State, mb.Reason = "Rejected", p.SpecErr.Error()
	case p.Awaiting != "":
		mb.Reason = "waiting for " + p.Awaiting + " to exist"
	case g.Disagreement(p) != nil:
		mb.State, mb.Reason = "Rejected", g.Disagreement(p).Error()
	case s != nil:
		mb.State, mb.Node = s.state.String(), s.node
		if s.holdsCapacity() && res.state == decide.Reserving {
			expires := res.expires
			mb.ReservationExpires = &expires
			reserved = s.requests.GPU
		}
	case live.condition != "":
		mb.Reason = "scheduler: " + live.condition
	}
	return mb, reserved
}

// domains lists, per tier, the domains of the nodes the members are bound or reserved on.
func (r report) domains(members []views.MemberStatus) []views.TierDomains {
	tiers := r.rules.Tiers
	if len(tiers) == 0 {
		return nil
	}
	out := make([]views.TierDomains, 0, len(tiers))
	for i, tier := range tiers {
		seen := map[string]bool{}
		td := views.TierDomains{Tier: tier.Key, Domains: []string{}}
		for _, mb := range members {
			n := r.ledger.nodes[mb.Node]
			if mb.Node == "" || n == nil || i >= len(n.domains) || seen[n.domains[i]] {
				continue
			}
			seen[n.domains[i]] = true
			td.Domains = append(td.Domains, n.domains[i])
		}
		sort.Strings(td.Domains)
		out = append(out, td)
	}
	return out
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
	view := g.view()
	spec, _ := view.Reference()
	st = Standing{Phase: phaseOf(view, spec, m.book.live(gang)), Members: len(view.Members), Bound: view.BoundCount(), Reason: g.lastReason,
		Since: view.Oldest().Created}
	counted := 0
	for _, p := range view.Members {
		if !p.Terminal && (spec == nil || counted < spec.MinAvailable) {
			st.QuorumRequests = st.QuorumRequests.Add(p.Requests)
			counted++
		}
	}
	if st.Reason == "" {
		full, _ := m.report().gang(g)
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
	held, _ := m.book.reservations().Held(decide.EveryOther(""))
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
