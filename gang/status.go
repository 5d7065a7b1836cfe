package gang

import (
	"fmt"
	"sort"
	"time"

	"github.com/lockstep-sched/lockstep/gangspec"
	"github.com/lockstep-sched/lockstep/placement"
)

// Phase is where a gang stands, as /debug/gangs and the lockstep_gangs metric show it.
type Phase string

const (
	// PhaseWaiting: no reservation; the gang does not fit now, lacks members, or was not tried yet.
	PhaseWaiting Phase = "Waiting"
	// PhaseReserving: capacity is reserved for the quorum; members are on their way to bind.
	PhaseReserving Phase = "Reserving"
	// PhaseBinding: quorum reached; lockstep is writing the bindings.
	PhaseBinding Phase = "Binding"
	// PhaseBound: at least min-available members are bound; the rest schedule as ordinary pods.
	PhaseBound Phase = "Bound"
	// PhaseHolding: the gang has waited past the starvation threshold; capacity is held for its
	// quorum as it frees, and its members still wait.
	PhaseHolding Phase = "Holding"
	// PhaseTimedOut: the last reservation expired before quorum.
	PhaseTimedOut Phase = "TimedOut"
)

// GangStatus is one gang as /debug/gangs shows it.
type GangStatus struct {
	Namespace string `json:"namespace"`
	Name      string `json:"name"`
	// Source says where the gang's rules were read: which dialect, which object.
	Source       string `json:"source,omitempty"`
	MinAvailable int    `json:"minAvailable"`
	TotalNumber  int    `json:"totalNumber,omitempty"`
	// TaskQuorums are per-task minimums inside the gang, "ps=1,worker=4".
	TaskQuorums string `json:"taskQuorums,omitempty"`
	// Group lists the gangs that bind only together with this one (Koordinator's gang group).
	Group       []string `json:"group,omitempty"`
	MatchPolicy string   `json:"matchPolicy,omitempty"`
	Mode        string   `json:"mode,omitempty"`
	WaitingTime string   `json:"waitingTime"`
	// Priority is the members' spec.priority.
	Priority int32 `json:"priority"`
	Phase    Phase `json:"phase"`
	// Queue is the team queue the gang counts toward ("Volcano Queue team-a"), if any.
	Queue string `json:"queue,omitempty"`
	// Topology is what the members ask of the network ("required example.com/rack"), if anything.
	Topology string `json:"topology,omitempty"`
	// Domains are, per network tier, the domains the gang's bound and reserved members are in.
	Domains []TierDomains `json:"domains,omitempty"`
	// Line is the gang's place among the gangs waiting for capacity; nil when it is not waiting.
	Line               *LineStatus `json:"line,omitempty"`
	Bound              int         `json:"bound"`
	ReservationExpires *time.Time  `json:"reservationExpires,omitempty"`
	Reason             string      `json:"reason,omitempty"`
	// ReservationTakenBy names the higher-priority work that took the gang's last reservation
	// over, and when; empty once the gang reserves again.
	ReservationTakenBy string `json:"reservationTakenBy,omitempty"`
	// Attempts is how many times a member was turned away at filter.
	Attempts int `json:"attempts"`
	// ExtrasTakenBack counts the members beyond this gang's quorum lockstep evicted so that other
	// gangs' quorums could bind.
	ExtrasTakenBack int `json:"extrasTakenBack,omitempty"`
	// LastCommit is the gang's latest commit, while it runs and after.
	LastCommit *CommitStatus  `json:"lastCommit,omitempty"`
	Members    []MemberStatus `json:"members"`
}

// CommitStatus is one commit of a gang: the bindings lockstep wrote once the quorum arrived.
type CommitStatus struct {
	Started time.Time `json:"started"`
	// Running is true until the last binding is answered.
	Running  bool   `json:"running"`
	Members  int    `json:"members"`
	Bound    int    `json:"bound"`
	Failed   int    `json:"failed"`
	Duration string `json:"duration"`
	// PartlyBoundFor is how long the gang had some but fewer than min-available members bound
	// during the commit; StillPartial says it ended that way.
	PartlyBoundFor string `json:"partlyBoundFor"`
	StillPartial   bool   `json:"stillPartial,omitempty"`
}

// MemberStatus is one member pod of a gang.
type MemberStatus struct {
	Pod   string `json:"pod"`
	State string `json:"state"`
	Node  string `json:"node,omitempty"`
	// GPUIDs are the GPU indices lockstep chose for the member on its node.
	GPUIDs             []int      `json:"gpuIDs,omitempty"`
	Requests           string     `json:"requests"`
	ReservationExpires *time.Time `json:"reservationExpires,omitempty"`
	Reason             string     `json:"reason,omitempty"`
	gpus               int64
}

// Status lists every gang, or those of one namespace, sorted by namespace and name.
func (m *Manager) Status(namespace string) []GangStatus {
	m.mu.RLock()
	defer m.mu.RUnlock()
	out := []GangStatus{}
	places := m.placesLocked()
	for _, g := range m.ledger.gangs {
		if namespace != "" && g.namespace != namespace {
			continue
		}
		st := m.gangStatusLocked(g)
		st.Line = places[g.key]
		out = append(out, st)
	}
	sort.Slice(out, func(i, j int) bool {
		if out[i].Namespace != out[j].Namespace {
			return out[i].Namespace < out[j].Namespace
		}
		return out[i].Name < out[j].Name
	})
	return out
}

// gangStatusLocked is the debug summary of one gang, owned by the gang's own records.
func (m *Manager) gangStatusLocked(g *gangInfo) GangStatus {
	st := GangStatus{Namespace: g.namespace, Name: g.name, Bound: g.boundCount(), Reason: g.lastReason, Attempts: g.attempts, ExtrasTakenBack: g.extrasTaken, Priority: g.priority(),
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
		st.Members = append(st.Members, memberStatus(p, spec, refPod, res))
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
	return st
}

func phaseOf(g *gangInfo, spec *gangspec.Spec, res *reservation) Phase {
	switch {
	case spec != nil && g.satisfied(spec):
		return PhaseBound
	case res != nil && res.state == committing:
		return PhaseBinding
	case res != nil && res.state == holding:
		return PhaseHolding
	case res != nil:
		return PhaseReserving
	case g.timedOut:
		return PhaseTimedOut
	default:
		return PhaseWaiting
	}
}

func (c *commitRecord) status() *CommitStatus {
	return &CommitStatus{
		Started: c.started, Running: c.finished.IsZero(), Members: c.members, Bound: c.bound, Failed: c.failed,
		Duration: formatSpan(c.duration()), PartlyBoundFor: formatSpan(c.partlyBoundFor()), StillPartial: c.stillPartial() && !c.finished.IsZero(),
	}
}

// memberStatus is one member as /debug/gangs shows it; spec and refPod are its gang's.
func memberStatus(p *podInfo, spec *gangspec.Spec, refPod *podInfo, res *reservation) MemberStatus {
	mb := MemberStatus{Pod: p.key(), Requests: p.requests.String(), State: "Pending"}
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
			mb.gpus = s.requests.GPU
		}
	case p.condition != "":
		mb.Reason = "scheduler: " + p.condition
	}
	return mb
}

// Standing is where one gang stands, in the few words a group object's status holds.
type Standing struct {
	Phase Phase
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
		st.Reason = m.gangStatusLocked(g).Reason
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
