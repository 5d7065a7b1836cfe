package gang

import (
	"context"
	"time"

	"k8s.io/apimachinery/pkg/types"

	"github.com/lockstep-sched/lockstep/placement"
)

// A reservation is a gang's tentative hold on capacity: one slot per member it plans to bind. It
// lives in a go-cache TTL cache under the gang's key, so capacity held by a gang that never reaches
// quorum comes back on its own after the gang's waiting time.

type slotState int

const (
	// slotPlanned: capacity held for a member that has not reached filter yet.
	slotPlanned slotState = iota
	// slotReserved: a member passed filter on this slot's node.
	slotReserved
	// slotWaiting: the member reached bind; it counts toward quorum.
	slotWaiting
	// slotBound and slotFailed are outcomes of the commit.
	slotBound
	slotFailed
)

func (s slotState) String() string {
	return [...]string{"Planned", "Reserved", "WaitingForQuorum", "Bound", "BindFailed"}[s]
}

type slot struct {
	// pod is the member holding the slot; nil while slotPlanned.
	pod *podInfo
	// plannedFor is the member the plan had in mind (by UID: podInfo records are replaced on every
	// informer update); it gets the slot first when it arrives.
	plannedFor types.UID
	node       string
	requests   placement.Resources
	state      slotState
	// settled: the informer reported the member bound on node, so the ledger counts its
	// capacity and the slot no longer does (ledger.settleSlot). Read and written under the
	// manager's lock only; the commit goroutine never looks at it.
	settled bool
	err     error
	// gpuIDs are the GPU indices chosen for the member when the gang commits.
	gpuIDs []int
	// cancel stops the member's binding while the gang commits; nil before.
	cancel context.CancelFunc
	// nominated is the node the member the slot was planned for was nominated to
	// (nominations.go); "" when no nomination stands.
	nominated string
}

// holdsCapacity reports whether the slot's capacity is still set aside (a bound member's capacity
// is counted on its node instead).
func (s *slot) holdsCapacity() bool { return s.state < slotBound && !s.settled }

type reservationState int

const (
	reserving reservationState = iota
	committing
	// released: committed, expired or dropped; the reservation holds nothing any more.
	released
	// holding: not a reservation for members on their way but a starving gang's claim on
	// capacity as it frees (starvation.go); its members still wait.
	holding
)

type reservation struct {
	gang     string
	priority int32
	// queue is the key of the team queue the gang's capacity counts toward, "" for none.
	queue   string
	created time.Time
	expires time.Time
	slots   []*slot
	state   reservationState
	// expired tells waiters why the reservation ended without a commit.
	expired bool
	// yieldedTo, when set, says which higher-priority work took the reservation's capacity.
	yieldedTo string
	// done is closed when the reservation is released, by commit or expiry.
	done chan struct{}
}

// yieldsTo reports whether work at priority may take the reservation's capacity: it is still
// only a plan or a hold (no binding written) and its gang's priority is lower.
func (r *reservation) yieldsTo(priority int32) bool {
	return (r.state == reserving || r.state == holding) && r.priority < priority
}

// holdsOn reports whether the reservation sets capacity aside on node.
func (r *reservation) holdsOn(node string) bool {
	for _, s := range r.slots {
		if s.node == node && s.holdsCapacity() {
			return true
		}
	}
	return false
}

func (r *reservation) slotOf(uid types.UID) *slot {
	for _, s := range r.slots {
		if s.pod != nil && s.pod.uid == uid {
			return s
		}
	}
	return nil
}

// slotFor is the slot a member holds or, failing that, the one still planned for it.
func (r *reservation) slotFor(uid types.UID) *slot {
	if s := r.slotOf(uid); s != nil {
		return s
	}
	for _, s := range r.slots {
		if s.plannedFor == uid && s.state == slotPlanned {
			return s
		}
	}
	return nil
}

// claimable is the planned slot a member would take: the one planned for it, else one with the
// same requests, else one whose requests cover the member's. Members of one gang are usually
// alike, so whichever arrives first takes any slot, and a member recreated by its controller
// takes the slot of the pod it replaces.
func (r *reservation) claimable(p *podInfo) *slot {
	var same, covers *slot
	for _, s := range r.slots {
		if s.state != slotPlanned {
			continue
		}
		if s.plannedFor == p.uid {
			return s
		}
		if same == nil && s.requests == p.requests {
			same = s
		}
		if covers == nil {
			if ok, _ := p.requests.FitsIn(s.requests); ok {
				covers = s
			}
		}
	}
	if same != nil {
		return same
	}
	return covers
}

// take gives a slot to a member.
func (r *reservation) take(s *slot, p *podInfo) {
	s.pod, s.state = p, slotReserved
	s.requests = p.requests
}

// unclaim returns a departed member's slot to the pool so a replacement can take it.
func (r *reservation) unclaim(uid types.UID) {
	if s := r.slotOf(uid); s != nil && s.holdsCapacity() {
		s.pod, s.state = nil, slotPlanned
	}
}

func (r *reservation) countState(state slotState) int {
	n := 0
	for _, s := range r.slots {
		if s.state == state {
			n++
		}
	}
	return n
}
