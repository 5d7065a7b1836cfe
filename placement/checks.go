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
	// Held is what reservations of other gangs set aside on the node.
	Held Resources
}

// Holders names the gangs holding capacity on a node. It is asked only when a node fails for that
// reason, so that the usual passing node costs no lookup.
type Holders func(node string) string

// WhyNot says why req does not fit on a node, in the words the scheduler shows for the node; ""
// when it fits. The checks run in order, each with its own reason, and the first to fail speaks.
//
// Filter asks this of every offered node, thousands per call, and nearly all fit: the node comes
// by pointer, and each check words its reason in a call of its own only when it fails, so the
// passing path is a few comparisons.
func WhyNot(req Resources, node string, n *NodeState, holders Holders) string {
	if reason := unseen(n); reason != "" {
		return reason
	}
	if reason := shortBesideBound(req, n); reason != "" {
		return reason
	}
	return shortOutsideReservations(req, node, n, holders)
}

// unseen refuses a node lockstep cannot account for: passing it would offer capacity that pods
// lockstep has not counted may hold.
func unseen(n *NodeState) string {
	if !n.Seen {
		return "lockstep has not seen this node yet"
	}
	return ""
}

// shortBesideBound checks req against what bound pods leave.
func shortBesideBound(req Resources, n *NodeState) string {
	if fits, short := req.FitsIn(n.Free); !fits {
		return insufficient(req, n, short)
	}
	return ""
}

func insufficient(req Resources, n *NodeState, short corev1.ResourceName) string {
	return fmt.Sprintf("insufficient %s: needs %s, %s free", short, Amount(short, req.Get(short)), Amount(short, max(n.Free.Get(short), 0)))
}

// shortOutsideReservations checks req against what bound pods and other gangs' reservations
// leave, naming the gangs: the usual reason a node that looks free is refused.
func shortOutsideReservations(req Resources, node string, n *NodeState, holders Holders) string {
	if n.Held.IsZero() {
		return ""
	}
	if fits, short := req.FitsIn(n.Free.Sub(n.Held)); !fits {
		return reservedForOthers(req, node, n, holders, short)
	}
	return ""
}

func reservedForOthers(req Resources, node string, n *NodeState, holders Holders, short corev1.ResourceName) string {
	left := n.Free.Sub(n.Held)
	return fmt.Sprintf("%s reserved for gang %s: needs %s, %s free outside reservations",
		FormatQuantity(short, n.Held.Get(short)), holders(node), Amount(short, req.Get(short)), Amount(short, max(left.Get(short), 0)))
}
