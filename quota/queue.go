// Package quota is lockstep's arithmetic of shared capacity: what each team's queue (a Volcano or
// kube-batch Queue, an ElasticQuota) may take, its fair share of the cluster by weight, and
// whether a gang's whole quorum may be admitted into it now. The reasons a user reads when a gang
// waits for its queue are worded here.
//
// Like package placement it is pure: a Book is plain data that its owner (package gang) keeps
// under its own lock and feeds with what it counts (queues, usage, waiting demand, cluster
// capacity). It takes no locks, reads no informers and never talks to the apiserver. It knows
// queues only as this package describes them; which ecosystem wrote one is package dialect's
// business and shows here only in names for people.
package quota

import (
	"slices"

	"github.com/lockstep-sched/lockstep/placement"
)

// Resources are the quantities quotas count: those lockstep places by.
type Resources = placement.Resources

// ResourceSet names some of the resources in Resources, as a bit set.
type ResourceSet uint8

const (
	GPU ResourceSet = 1 << iota
	CPU
	Memory
	Pods
	// Counted are the resources quotas limit by default. A pod slot is a node's limit, not a
	// team's: no queue kind lockstep reads counts pods unless it names them.
	Counted = GPU | CPU | Memory
)

// Has reports whether s names every resource of o.
func (s ResourceSet) Has(o ResourceSet) bool { return s&o == o }

// Limit is an upper bound that applies only to the resources it names: a Volcano capability of
// {nvidia.com/gpu: 4} caps GPUs and leaves cpu and memory unlimited.
type Limit struct {
	Amount Resources
	Named  ResourceSet
}

// Unlimited is the limit of a queue that names none.
var Unlimited = Limit{}

// State is whether a queue takes new gangs.
type State string

const (
	Open State = "Open"
	// Closed and Closing queues take no new gang; gangs already bound keep running.
	Closed  State = "Closed"
	Closing State = "Closing"
	// Unknown is Volcano's state for a queue its controller could not read; it takes no new gang
	// either, as in Volcano.
	Unknown State = "Unknown"
)

// Ref is how a gang or a pod names its queue. An empty Name asks for the namespace's default of
// that Kind (Book.SetNamespaceDefault), and failing that for Fallback: Volcano's PodGroups with
// no spec.queue go to the queue named by their namespace's annotation, else to "default".
type Ref struct {
	Kind     string
	Name     string
	Fallback string
}

// IsZero reports whether the ref names no queue at all.
func (r Ref) IsZero() bool { return r.Kind == "" }

// Queue is one team's queue or quota as lockstep enforces it.
type Queue struct {
	// Kind and Name identify the queue: Kind names the object type for people ("Volcano Queue",
	// "ElasticQuota"), Name the object (namespace/name for a namespaced one).
	Kind string
	Name string
	// Namespace, when set, makes the queue apply to every pod of that namespace that names no
	// other queue (an ElasticQuota).
	Namespace string
	// Namespaces are the namespaces it applies to likewise when that is not (only) the one it
	// lives in: a Koordinator ElasticQuota applies to the namespace it is named after and to
	// those its namespaces annotation lists. AllNamespaces among them makes it apply to the
	// pods of every namespace no other queue covers (Koordinator's default quota).
	Namespaces []string
	// Source says where it was read, for people: "Volcano Queue team-a (scheduling.volcano.sh/v1beta1)".
	Source string
	// Weight is the queue's share of capacity beside the others' when all have work; at least 1.
	// WeighsOverQuota makes it weigh only what is left over the queues' mins (KAI's
	// overQuotaWeight) rather than the whole (Volcano's weight).
	Weight          int64
	WeighsOverQuota bool
	// Capability is a hard upper bound on what the queue's pods and reservations hold.
	Capability Limit
	// Guarantee is capacity kept for the queue even while it is idle, never lent to another queue
	// (Volcano's guarantee.resource). It also floors the queue's deserved share.
	Guarantee Resources
	// Min floors the queue's deserved share but is lent to others while the queue leaves it
	// unused (ElasticQuota's min).
	Min Resources
	// DeservesAll are the resources of which the queue deserves all it asks, whatever the others
	// ask (KAI's quota of -1): it is never below its share of them, so nothing it holds of them
	// is taken back.
	DeservesAll ResourceSet
	// BorrowsOnlyMin: queues with this flag and the same Kind may together hold no more than the
	// sum of their Mins: one borrows another's unused min, never idle capacity beyond them
	// (scheduler-plugins' capacity scheduling).
	BorrowsOnlyMin bool
	// Priority orders queues: a higher one's waiting gangs go first, before shares are compared.
	Priority int32
	State    State
	// Reclaimable says whether other queues may take this queue's capacity back.
	Reclaimable bool
	// Parent is the name of the queue this one nests under, of the same Kind; "" at the top.
	// A parent's limits hold for its children together, its share is divided among them, and
	// only queues with no child run work. ParentField says where the object names it, for
	// reasons ("spec.parent").
	Parent      string
	ParentField string
	// IsParent marks a queue that only groups others even while none names it (Koordinator's
	// is-parent label): it runs no work.
	IsParent bool
	// KindMadeOnDemand says that the queue's project makes a queue of its kind when work names
	// one no object defines (YuniKorn's placement rules with create): while any queue of the kind
	// is defined, an undefined one is taken as open and unlimited, as the default queue is.
	KindMadeOnDemand bool
	// Err, when set, is why the object cannot be used; the queue's gangs wait with it.
	Err error
}

// AllNamespaces in Queue.Namespaces stands for every namespace no other queue covers.
const AllNamespaces = "*"

// Covers lists the namespaces the queue applies to (Namespace and Namespaces), sorted, each once.
func (q *Queue) Covers() []string {
	var out []string
	if q.Namespace != "" {
		out = append(out, q.Namespace)
	}
	for _, ns := range q.Namespaces {
		if ns != "" {
			out = append(out, ns)
		}
	}
	slices.Sort(out)
	return slices.Compact(out)
}

// Key identifies a queue: its kind and name, "Volcano Queue team-a".
func (q *Queue) Key() string { return Key(q.Kind, q.Name) }

// Key is the key of the queue of kind named name.
func Key(kind, name string) string { return kind + " " + name }

// takesNewGangs reports whether a gang may be admitted into the queue by its state.
func (q *Queue) takesNewGangs() bool { return q.State == "" || q.State == Open }
