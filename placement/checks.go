package placement

import (
	"fmt"

	corev1 "k8s.io/api/core/v1"
)

// NodeState is one node as a filter decision sees it.
type NodeState struct {
	// Seen is false for a node that lockstep's informer has not delivered yet.
	Seen bool
	// Free is what the node has left after the pods bound there.
	Free Resources
	// Leaving is what pods being deleted hold of the node, counted in Free as taken. The
	// scheduler counts them too until they are gone, so a node it offers with room only
	// without them means their deletion reached the scheduler before lockstep's informer: the
	// scheduler retries a pod the moment a pod is deleted, and lockstep refusing it then on a
	// stale view would leave the pod waiting for some later event (up to five minutes).
	Leaving Resources
	// Held is what reservations of other gangs set aside on the node.
	Held Resources
}

// Holders names the gangs holding capacity on a node. It is asked only when a node fails for that
// reason, so that the usual passing node costs no lookup.
type Holders func(node string) string

// Refusal is which of WhyNot's checks turned a node down.
type Refusal uint8

const (
	// Fits: none did.
	Fits Refusal = iota
	// NotSeen: lockstep has not seen the node.
	NotSeen
	// ShortBesideBound: the pods bound there leave too little.
	ShortBesideBound
	// ReservedForOthers: what bound pods leave is held by other gangs' reservations.
	ReservedForOthers
)

// Preemptible reports whether evicting pods bound to the node might cure the refusal, so that
// the scheduler should try its preemption there. Only a shortfall beside bound pods might: a node
// lockstep has not seen and a gang's reservation are no pods to evict. Whether the scheduler's
// chosen victims do cure it is decided when it asks (the preempt verb).
func (r Refusal) Preemptible() bool { return r == ShortBesideBound }

// WhyNot says why req does not fit on a node, in the words the scheduler shows for the node, and
// which check refused it; "" and Fits when it fits. The checks run in order, each paired with the
// words of its reason, and the first to fail speaks.
//
// Filter asks this of every offered node, thousands per call, and nearly all fit: the node comes
// by pointer, the checks are small enough for the compiler to inline, and a reason is worded, in
// a call of its own, only when a check fails.
func WhyNot(req Resources, node string, n *NodeState, holders Holders) (string, Refusal) {
	if !seen(n) {
		return notSeen, NotSeen
	}
	if short := shortBesideBound(req, n); short != "" {
		return insufficient(req, n, short), ShortBesideBound
	}
	// Nothing held leaves nothing more to check: the usual case, spared the arithmetic.
	if !n.Held.IsZero() {
		if short := shortOutsideReservations(req, n); short != "" {
			return reservedForOthers(req, node, n, holders, short), ReservedForOthers
		}
	}
	return "", Fits
}

// seen is false for a node lockstep cannot account for, which it refuses: passing it would offer
// capacity that pods lockstep has not counted may hold.
func seen(n *NodeState) bool { return n.Seen }

const notSeen = "lockstep has not seen this node yet"

// shortBesideBound checks req against what bound pods leave, returning the resource short, ""
// when req fits.
func shortBesideBound(req Resources, n *NodeState) corev1.ResourceName {
	_, short := req.FitsIn(n.Free.Add(n.Leaving))
	return short
}

func insufficient(req Resources, n *NodeState, short corev1.ResourceName) string {
	return fmt.Sprintf("insufficient %s: needs %s, %s free", short, Amount(short, req.Get(short)), Amount(short, max(n.Free.Get(short), 0)))
}

// shortOutsideReservations checks req against what bound pods and other gangs' reservations
// leave: the usual reason a node that looks free is refused.
func shortOutsideReservations(req Resources, n *NodeState) corev1.ResourceName {
	_, short := req.FitsIn(n.Free.Add(n.Leaving).Sub(n.Held))
	return short
}

// reservedForOthers words a shortOutsideReservations failure, naming the gangs holding the node.
func reservedForOthers(req Resources, node string, n *NodeState, holders Holders, short corev1.ResourceName) string {
	left := n.Free.Add(n.Leaving).Sub(n.Held)
	return fmt.Sprintf("%s reserved for gang %s: needs %s, %s free outside reservations",
		FormatQuantity(short, n.Held.Get(short)), holders(node), Amount(short, req.Get(short)), Amount(short, max(left.Get(short), 0)))
}
