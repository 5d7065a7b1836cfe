// Package views is what lockstep shows people: the JSON of /debug/gangs, /debug/nodes and
// /debug/queues, which `kubectl lockstep` reads back. It owns those shapes and their meaning and
// nothing else: it imports no scheduler code, so that the kubectl plugin can read lockstep's
// answers without linking the scheduler, and a field here changes only when what people read
// changes.
package views

import (
	"time"

	corev1 "k8s.io/api/core/v1"
)

// Phase is where a gang stands, as /debug/gangs, the lockstep_gangs metric and the group objects'
// status show it.
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

// Phases lists every phase, in the order a gang usually passes through them.
var Phases = []Phase{PhaseWaiting, PhaseHolding, PhaseReserving, PhaseBinding, PhaseBound, PhaseTimedOut}

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
	// Disruption is "All" when the members go only together (a Kubernetes PodGroup's
	// disruptionMode all): none is taken alone.
	Disruption  string `json:"disruption,omitempty"`
	WaitingTime string `json:"waitingTime"`
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
	GPUIDs   []int  `json:"gpuIDs,omitempty"`
	Requests string `json:"requests"`
	// ReservationExpires is set while a reservation holds capacity for the member.
	ReservationExpires *time.Time `json:"reservationExpires,omitempty"`
	Reason             string     `json:"reason,omitempty"`
}

// LineStatus is a waiting gang's place in line: higher priority first, then the gang that has
// waited longer (and, where team queues are enforced, the queues' order before both).
type LineStatus struct {
	// Place counts from 1 among Of gangs waiting, cluster-wide.
	Place int    `json:"place"`
	Of    int    `json:"of"`
	Why   string `json:"why"`
}

// TierDomains are the domains of one network tier a gang's members are in.
type TierDomains struct {
	Tier    string   `json:"tier"`
	Domains []string `json:"domains"`
}

// NodeStatus is one node as /debug/nodes shows it: what lockstep counts there and where its GPU
// topology came from.
type NodeStatus struct {
	Name          string `json:"name"`
	Unschedulable bool   `json:"unschedulable,omitempty"`
	GPUs          int64  `json:"gpus"`
	GPUsFree      int64  `json:"gpusFree"`
	// TopologySource is where the GPU topology came from (see package gpu): annotation,
	// nvidia-smi, known-system, uniform or none.
	TopologySource string `json:"topologySource"`
	// TopologyError says what is wrong with the node's topology annotation; lockstep then uses
	// TopologySource instead.
	TopologyError string `json:"topologyError,omitempty"`
	// DRA are the node's GPUs from Dynamic Resource Allocation, by driver and pool.
	DRA []DRAPool `json:"dra,omitempty"`
	// Problems say why some of what is published for the node does not count: a ResourceSlice
	// pool being updated, slices naming a node that does not exist.
	Problems []string `json:"problems,omitempty"`
}

// DRAPool is one pool of a node's DRA GPUs: how many devices it publishes that count as GPUs, of
// which classes, and how many no claim's allocation takes.
type DRAPool struct {
	Driver  string   `json:"driver"`
	Pool    string   `json:"pool"`
	Classes []string `json:"classes"`
	GPUs    int64    `json:"gpus"`
	Free    int64    `json:"free"`
}

// QueueStatus is one team queue as /debug/queues shows it: quantities as Kubernetes writes them
// ("4", "3500m", "12Gi"), so that they read like the object they came from.
type QueueStatus struct {
	Key       string `json:"key"`
	Kind      string `json:"kind"`
	Name      string `json:"name"`
	Namespace string `json:"namespace,omitempty"`
	Source    string `json:"source,omitempty"`
	// Defined is false for a queue no object defines: an implicit default, or one gangs name
	// that does not exist.
	Defined bool `json:"defined"`
	// State is Open, Closed, Closing or Unknown, as the queue's own object says.
	State       string     `json:"state,omitempty"`
	Weight      int64      `json:"weight,omitempty"`
	Priority    int32      `json:"priority"`
	Reclaimable bool       `json:"reclaimable"`
	Error       string     `json:"error,omitempty"`
	Capability  Quantities `json:"capability,omitempty"`
	Guarantee   Quantities `json:"guarantee,omitempty"`
	Min         Quantities `json:"min,omitempty"`
	Deserved    Quantities `json:"deserved"`
	// Used is what its bound pods request, Held what reservations hold for its gangs, Allocated
	// both.
	Used      Quantities `json:"used"`
	Held      Quantities `json:"held"`
	Allocated Quantities `json:"allocated"`
	// Waiting are its gangs waiting for capacity or for the queue, with what each asks and why.
	Waiting []WaitingGang `json:"waiting"`
	// Parent is the key of the queue it nests under, Children those nested under it. A parent's
	// used, held and allocated are its whole subtree's, and its deserved is divided among its
	// children.
	Parent   string   `json:"parent,omitempty"`
	Children []string `json:"children,omitempty"`
}

// WaitingGang is a gang waiting in a queue: what it asks and why it waits.
type WaitingGang struct {
	Gang   string     `json:"gang"`
	Asks   Quantities `json:"asks"`
	Reason string     `json:"reason"`
}

// Quantities are amounts by resource name, as Kubernetes writes them.
type Quantities map[corev1.ResourceName]string

// QueueList is the answer of /debug/queues; `kubectl lockstep queues` reads it.
type QueueList struct {
	Queues []QueueStatus `json:"queues"`
}
