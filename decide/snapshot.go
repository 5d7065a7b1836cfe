package decide

import (
	"sort"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/lockstep-sched/lockstep/fabric"
	"github.com/lockstep-sched/lockstep/gangspec"
	"github.com/lockstep-sched/lockstep/gpu"
	"github.com/lockstep-sched/lockstep/placement"
	"github.com/lockstep-sched/lockstep/quota"
)

// Snapshot is the cluster as one decision reads it: every node, pod, gang and reservation, the
// team queues, and the time. Its owner (package gang) keeps it in step with the live state
// between decisions and never while one runs; nothing in it points into that live state, so a
// decision can neither change it nor see it change.
type Snapshot struct {
	Now   time.Time
	Rules Rules
	// Nodes are every node the ledger has a record of, seen (Known) or only named by a bound pod.
	Nodes map[string]*Node
	Pods  map[types.UID]*Pod
	// Gangs are every gang with a member, by key ("namespace/name").
	Gangs map[string]*Gang
	// Reservations are the live reservations and starving gangs' holds, by gang key.
	Reservations Reservations
	// Quota is the team queues and what their bound pods use and waiting gangs want; a copy.
	Quota *quota.Book
	// QueueBinding is, per queue, what ordinary binds on their way to the apiserver will take.
	QueueBinding map[string]placement.Resources
	// Schedulable is what the known schedulable nodes have in all, Unqueued what bound pods of no
	// queue take of it: the queues share the difference.
	Schedulable, Unqueued placement.Resources
	// EvictRefused is when each pod's eviction was last refused (a budget, say).
	EvictRefused map[types.UID]time.Time
}

// Rules are the operator's settings decisions follow.
type Rules struct {
	// DefaultWaitingTime is how long a gang's reservation lives when its rules do not say.
	DefaultWaitingTime time.Duration
	// StarvationThreshold is how long a gang may wait for free capacity before capacity is held
	// for it as it frees (hold.go); 0 turns the rule off.
	StarvationThreshold time.Duration
	// Tiers are the network tiers between nodes, narrowest first; nil places by nodes alone.
	Tiers fabric.Tiers
	// MayEvict: lockstep may evict pods at all (it has an Evicter).
	MayEvict bool
	// NoPriorityPreemption, NoExtrasTakeBack and QueueReclaim choose which evictions a waiting
	// gang may make (evict.go).
	NoPriorityPreemption bool
	NoExtrasTakeBack     bool
	QueueReclaim         bool
}

// Pod is one pod as decisions read it: what it asks for, where it is bound and which gang it
// belongs to, with the rules that apply to it already resolved.
type Pod struct {
	UID       types.UID
	Namespace string
	Name      string
	Created   time.Time
	Requests  placement.Resources
	// Node is spec.nodeName, or the node lockstep just bound the pod to.
	Node string
	// Terminal: Succeeded or Failed, holding nothing on its node any more.
	Terminal bool
	// Deleting: the pod has a deletionTimestamp; it holds its node until it is gone.
	Deleting bool
	// Evicting: lockstep asked for the pod's eviction and has not seen it deleting yet.
	Evicting bool
	// Gated: the pod has scheduling gates, so it cannot reach the scheduler.
	Gated bool
	// Priority is spec.priority; PreemptNever is preemptionPolicy: Never.
	Priority     int32
	PreemptNever bool
	// KeepExtras: the pod's own opt-out from being taken back while beyond its gang's quorum.
	KeepExtras bool
	// Gang is the key of the gang the pod names, "" for an ordinary pod; Task its task inside it.
	Gang string
	Task string
	// Spec and SpecErr are the rules that apply, from the pod or its group object; both are nil
	// while the group object does not exist, which Awaiting then names.
	Spec     *gangspec.Spec
	SpecErr  error
	Awaiting string
	// ClaimsErr is why the pod's ResourceClaims cannot be allocated anywhere (package dra): one
	// names a DeviceClass that does not exist, say.
	ClaimsErr error
	// GPUClass is the DeviceClass the pod's GPUs are all of, when its ResourceClaims ask them all
	// of one; "" for nvidia.com/gpu.
	GPUClass string
	// DevicesRefused are the nodes where DRA's allocator found no devices for the pod's claims
	// beside the pods planned there with it, and why: plans keep it off them.
	DevicesRefused map[string]string
	// Queue is the key of the team queue the pod counts toward, "" for none.
	Queue string
	// Topology is what the pod asks of the network between its gang's nodes.
	Topology gangspec.Topology
	// Rules are a gang member's own node rules; nil for an ordinary pod.
	Rules *NodeRules
}

// Key is the pod's namespace/name.
func (p *Pod) Key() string { return p.Namespace + "/" + p.Name }

// Holds reports whether the pod takes capacity on a node.
func (p *Pod) Holds() bool { return p.Node != "" && !p.Terminal }

// Going reports whether the pod is on its way out: being deleted, or evicted by lockstep.
func (p *Pod) Going() bool { return p.Deleting || p.Evicting }

// OlderThan orders pods by creation, then name: the order lockstep plans and shows members in.
func OlderThan(a, b *Pod) bool {
	if !a.Created.Equal(b.Created) {
		return a.Created.Before(b.Created)
	}
	return a.Name < b.Name
}

// Node is one node as decisions read it.
type Node struct {
	Name string
	// Known: its Node object was seen; a node only named by bound pods has none of the rest.
	Known         bool
	Unschedulable bool
	Allocatable   placement.Resources
	// Requested is what bound pods take; Leaving the part of it pods being deleted hold; Binding
	// what ordinary binds on their way will take.
	Requested, Leaving, Binding placement.Resources
	// Domains are the node's network domain at each tier.
	Domains []string
	// Object is the node's name and labels, what members' node affinity matches against;
	// HardTaints its NoSchedule and NoExecute taints.
	Object     *corev1.Node
	HardTaints []corev1.Taint
	GPUs       gpu.FreeSet
}

// Free is what the node has left after bound pods and the ordinary binds on their way.
func (n *Node) Free() placement.Resources {
	return n.Allocatable.Sub(n.Requested).Sub(n.Binding)
}

// Gang is one gang: its members, oldest first, and what lockstep remembers of its past.
type Gang struct {
	Key, Namespace, Name string
	Members              []*Pod
	History
}

// History is what decisions read of a gang's past.
type History struct {
	// TimedOut: its last reservation expired before quorum, at TimedOutAt.
	TimedOut   bool
	TimedOutAt time.Time
	// WaitingSince is when its last reservation was made; zero before its first.
	WaitingSince time.Time
	// SatisfiedOnce: its quorum was bound once, for the once-satisfied match policy.
	SatisfiedOnce bool
}

// SlotState is where one member's place in a reservation stands.
type SlotState int

const (
	// SlotPlanned: capacity held for a member that has not reached filter yet.
	SlotPlanned SlotState = iota
	// SlotReserved: a member passed filter on the slot's node.
	SlotReserved
	// SlotWaiting: the member reached bind; it counts toward quorum.
	SlotWaiting
	// SlotBound and SlotFailed are outcomes of the commit.
	SlotBound
	SlotFailed
)

func (s SlotState) String() string {
	return [...]string{"Planned", "Reserved", "WaitingForQuorum", "Bound", "BindFailed"}[s]
}

// ReservationState is where a reservation stands.
type ReservationState int

const (
	Reserving ReservationState = iota
	Committing
	// Released: committed, expired or dropped; the reservation holds nothing any more.
	Released
	// Holding: not a reservation for members on their way but a starving gang's claim on
	// capacity as it frees (hold.go); its members still wait.
	Holding
)

// Reservation is a gang's tentative hold on capacity, one slot per member it plans to bind.
type Reservation struct {
	Gang     string
	Priority int32
	// Queue is the key of the team queue the gang's capacity counts toward, "" for none.
	Queue            string
	Created, Expires time.Time
	State            ReservationState
	Slots            []Slot
}

// Slot is one member's place in a reservation.
type Slot struct {
	// Pod is the member holding the slot, "" while Planned; PlannedFor the member the plan had
	// in mind, who gets it first.
	Pod, PlannedFor types.UID
	Node            string
	Requests        placement.Resources
	State           SlotState
	// Settled: the informer reported the member bound, so the ledger counts its capacity.
	Settled bool
}

// HoldsCapacity reports whether the slot's capacity is still set aside (a bound member's capacity
// is counted on its node instead).
func (s *Slot) HoldsCapacity() bool { return s.State < SlotBound && !s.Settled }

// YieldsTo reports whether work at priority may take the reservation's capacity: it is still only
// a plan or a hold (no binding written) and its gang's priority is lower.
func (r *Reservation) YieldsTo(priority int32) bool {
	return (r.State == Reserving || r.State == Holding) && r.Priority < priority
}

// holdsOn reports whether the reservation sets capacity aside on node.
func (r *Reservation) holdsOn(node string) bool {
	for i := range r.Slots {
		if s := &r.Slots[i]; s.Node == node && s.HoldsCapacity() {
			return true
		}
	}
	return false
}

// SlotOf is the index of the slot a member holds, -1 for none.
func (r *Reservation) SlotOf(uid types.UID) int {
	for i := range r.Slots {
		if r.Slots[i].Pod == uid {
			return i
		}
	}
	return -1
}

// requests is what the reservation's slots hold in all.
func (r *Reservation) requests() placement.Resources {
	var sum placement.Resources
	for i := range r.Slots {
		sum = sum.Add(r.Slots[i].Requests)
	}
	return sum
}

// gang is the gang of key, nil when it has no member.
func (s *Snapshot) gang(key string) *Gang { return s.Gangs[key] }

// gangOf is the gang a pod names, nil for an ordinary pod.
func (s *Snapshot) gangOf(p *Pod) *Gang {
	if p.Gang == "" {
		return nil
	}
	return s.Gangs[p.Gang]
}

// waitingTime is how long a gang's reservation lives.
func (s *Snapshot) waitingTime(spec *gangspec.Spec) time.Duration {
	if spec != nil && spec.WaitingTime > 0 {
		return spec.WaitingTime
	}
	return s.Rules.DefaultWaitingTime
}

// WaitingTime is how long a reservation lives for a gang of spec under rules.
func WaitingTime(rules Rules, spec *gangspec.Spec) time.Duration {
	return (&Snapshot{Rules: rules}).waitingTime(spec)
}

// --- which reservations a decision respects -----------------------------------------------

// Reservations are the live reservations and holds, by gang key.
type Reservations map[string]*Reservation

// A View is which reservations a decision must respect: every live one but the deciding gang's
// own (its members may use what their gang holds), less those that yield to the decider's
// priority and those a takeover plan releases.
type View struct {
	own string
	// priority, when takeover is set, is the decider's: reservations still reserving at a lower
	// priority yield to it. Committing ones never yield: their bindings are being written.
	priority int32
	takeover bool
	// released are the gangs whose reservations a takeover plan gives up.
	released map[string]bool
	// Quorums is capacity, per node, that members beyond their gang's quorum leave to the
	// quorums of waiting gangs (line.go); QuorumsOf names those gangs per node.
	Quorums   map[string]placement.Resources
	QuorumsOf map[string][]string
}

// EveryOther is the view that respects every live reservation but own's.
func EveryOther(own string) View { return View{own: own} }

// Above is the view of a decider at priority: lower-priority reservations yield to it.
func Above(own string, priority int32) View {
	return View{own: own, priority: priority, takeover: true}
}

// counts reports whether the view respects a reservation.
func (v View) counts(res *Reservation) bool {
	switch {
	case res.Gang == v.own || res.State == Released || v.released[res.Gang]:
		return false
	case v.takeover && res.YieldsTo(v.priority):
		return false
	}
	return true
}

// Live is a gang's reservation for members on their way, nil when it has none; a starving gang's
// hold is not one.
func (rs Reservations) Live(gang string) *Reservation {
	if res := rs[gang]; res != nil && res.State != Holding {
		return res
	}
	return nil
}

// hold is the gang's hold under the starvation rule, nil when it has none.
func (rs Reservations) hold(gang string) *Reservation {
	if res := rs[gang]; res != nil && res.State == Holding {
		return res
	}
	return nil
}

// Held sums what the reservations the view respects hold per node, and the same per gang, for
// reasons.
func (rs Reservations) Held(v View) (byNode, byGang map[string]placement.Resources) {
	byNode, byGang = map[string]placement.Resources{}, map[string]placement.Resources{}
	for key, res := range rs {
		if !v.counts(res) {
			continue
		}
		for i := range res.Slots {
			if s := &res.Slots[i]; s.HoldsCapacity() {
				byNode[s.Node] = byNode[s.Node].Add(s.Requests)
				byGang[key] = byGang[key].Add(s.Requests)
			}
		}
	}
	return byNode, byGang
}

// HeldByQueue sums what live reservations hold per team queue: what a queue holds besides its
// bound pods. A starving gang's hold is left out: it is a claim on capacity as it frees, mostly on
// capacity others still use, and counted as its queue's it would make a queue that waits below its
// share look served, so that a queue above its share took what frees elsewhere.
func (rs Reservations) HeldByQueue() map[string]placement.Resources {
	out := map[string]placement.Resources{}
	for _, res := range rs {
		if res.Queue == "" || res.State == Released || res.State == Holding {
			continue
		}
		for i := range res.Slots {
			if s := &res.Slots[i]; s.HoldsCapacity() {
				out[res.Queue] = out[res.Queue].Add(s.Requests)
			}
		}
	}
	return out
}

// Holders names, sorted, the gangs holding capacity on a node that the view respects, and the
// quorums of waiting gangs it leaves alone: the same message every time, so that the scheduler
// folds identical node reasons and lockstep's event de-duplication holds.
func (rs Reservations) Holders(node string, v View) string {
	var names []string
	for key, res := range rs {
		if v.counts(res) && res.holdsOn(node) {
			names = append(names, key)
		}
	}
	sort.Strings(names)
	out := strings.Join(names, ", ")
	for _, g := range v.QuorumsOf[node] {
		if out != "" {
			out += ", "
		}
		out += g + " (waiting for its quorum)"
	}
	return out
}

// holder is the gang holding capacity under the starvation rule, "" for none.
func (rs Reservations) holder() string {
	for key, res := range rs {
		if res.State == Holding {
			return key
		}
	}
	return ""
}

// Yielding lists the reservations that yield to a decider at priority (other than own's), the
// lowest priority first and, among equals, the newest first: it has waited least.
func (rs Reservations) Yielding(own string, priority int32) []*Reservation {
	var out []*Reservation
	for key, res := range rs {
		if key != own && res.YieldsTo(priority) {
			out = append(out, res)
		}
	}
	sort.Slice(out, func(i, j int) bool {
		if out[i].Priority != out[j].Priority {
			return out[i].Priority < out[j].Priority
		}
		if !out[i].Created.Equal(out[j].Created) {
			return out[i].Created.After(out[j].Created)
		}
		return out[i].Gang < out[j].Gang
	})
	return out
}
