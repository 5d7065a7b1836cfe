package decide

import (
	"maps"
	"slices"
	"sort"
	"strconv"
	"time"

	"k8s.io/apimachinery/pkg/types"

	"github.com/lockstep-sched/lockstep/gangspec"
	"github.com/lockstep-sched/lockstep/gpu"
	"github.com/lockstep-sched/lockstep/placement"
	"github.com/lockstep-sched/lockstep/quota"
	"github.com/lockstep-sched/lockstep/test/lib/builders"
)

// Builders for snapshots made by hand, in the style of Kueue's test wrappers: make..., chain
// setters, Obj. Every Obj call makes fresh values, so that building twice gives a deep copy.

const ns = "ns"

// t0 is when the test world began; pods are created at t0 plus an offset, and decisions are
// asked at now, an hour later, unless a case says otherwise.
var (
	t0  = time.Date(2030, 1, 2, 12, 0, 0, 0, time.UTC)
	now = t0.Add(time.Hour)
)

func uid(name string) types.UID { return types.UID("uid-" + name) }

func gangKey(name string) string { return ns + "/" + name }

// gpus is what a test pod asks: n GPUs beside one cpu, 1Gi and its pod slot.
func gpus(n int64) placement.Resources {
	return placement.Resources{MilliCPU: 1000, Memory: 1 << 30, GPU: n, Pods: 1}
}

// times is r, count times over: what count alike pods ask in all.
func times(count int, r placement.Resources) placement.Resources {
	var sum placement.Resources
	for range count {
		sum = sum.Add(r)
	}
	return sum
}

// --- gang rules ------------------------------------------------------------------------------

type specWrapper struct{ gangspec.Spec }

func makeSpec(minAvailable int) *specWrapper {
	return &specWrapper{gangspec.Spec{MinAvailable: minAvailable}}
}

func (w *specWrapper) Task(task string, minimum int) *specWrapper {
	if w.MinPerTask == nil {
		w.MinPerTask = map[string]int{}
	}
	w.MinPerTask[task] = minimum
	return w
}

func (w *specWrapper) Policy(p gangspec.MatchPolicy) *specWrapper { w.Spec.Policy = p; return w }

// Group rules a Kubernetes 1.37 PodGroup carries: its members go only together, it evicts
// nothing, its priority.
func (w *specWrapper) DisruptAll() *specWrapper   { w.Spec.DisruptAll = true; return w }
func (w *specWrapper) PreemptNever() *specWrapper { w.Spec.PreemptNever = true; return w }
func (w *specWrapper) Priority(p int32) *specWrapper {
	w.Spec.Priority, w.Spec.Source = &p, "Kubernetes PodGroup ns/a (scheduling.k8s.io/v1beta1)"
	return w
}

func (w *specWrapper) Obj() *gangspec.Spec {
	s := w.Spec
	s.MinPerTask = maps.Clone(w.MinPerTask)
	if w.Spec.Priority != nil {
		p := *w.Spec.Priority
		s.Priority = &p
	}
	return &s
}

// --- nodes -----------------------------------------------------------------------------------

type nodeWrapper struct{ Node }

// makeNode is a known schedulable node of n GPUs, 64 cpu, 256Gi and 110 pod slots.
func makeNode(name string, n int64) *nodeWrapper {
	return &nodeWrapper{Node{Name: name, Known: true,
		Allocatable: placement.Resources{MilliCPU: 64000, Memory: 256 << 30, GPU: n, Pods: 110}}}
}

func (w *nodeWrapper) Unschedulable() *nodeWrapper { w.Node.Unschedulable = true; return w }

// WithTopology gives the node the GPU topology package gpu works out for a node of its GPUs,
// every GPU free.
func (w *nodeWrapper) WithTopology() *nodeWrapper {
	topo, _, err := gpu.FromNode(builders.GPUNodes(w.Name, 1, w.Allocatable.GPU)[0])
	if err != nil || topo == nil {
		panic("no GPU topology for " + w.Name)
	}
	w.GPUs = gpu.FreeSet{Topo: topo, Indices: topo.Indices(), Free: ^uint64(0) >> (64 - topo.Len())}
	return w
}

// --- pods ------------------------------------------------------------------------------------

type podWrapper struct {
	Pod
	spec *specWrapper
}

// makePod is an ordinary pod asking gpus(0), created at t0.
func makePod(name string) *podWrapper {
	return &podWrapper{Pod: Pod{UID: uid(name), Namespace: ns, Name: name, Created: t0, Requests: gpus(0)}}
}

// makeMember is a member of gang (its name in ns) under spec.
func makeMember(gang, name string, spec *specWrapper) *podWrapper {
	w := makePod(name)
	w.Gang, w.spec = gangKey(gang), spec
	return w
}

// members are count members of gang named gang-0, gang-1, ..., created a second apart from t0
// (gang-0 the oldest), each asking gpus(n).
func members(gang string, count int, n int64, spec *specWrapper) []*podWrapper {
	out := make([]*podWrapper, count)
	for i := range out {
		out[i] = makeMember(gang, gang+"-"+strconv.Itoa(i), spec).GPU(n).Age(i)
	}
	return out
}

func (w *podWrapper) GPU(n int64) *podWrapper { w.Requests = gpus(n); return w }

// Age makes the pod created i seconds after t0: the higher, the younger.
func (w *podWrapper) Age(i int) *podWrapper {
	w.Created = t0.Add(time.Duration(i) * time.Second)
	return w
}

func (w *podWrapper) CreatedAt(t time.Time) *podWrapper { w.Created = t; return w }
func (w *podWrapper) On(node string) *podWrapper        { w.Node = node; return w }
func (w *podWrapper) Priority(p int32) *podWrapper      { w.Pod.Priority = p; return w }
func (w *podWrapper) Gated() *podWrapper                { w.Pod.Gated = true; return w }
func (w *podWrapper) Evicting() *podWrapper             { w.Pod.Evicting = true; return w }
func (w *podWrapper) Deleting() *podWrapper             { w.Pod.Deleting = true; return w }
func (w *podWrapper) Terminal() *podWrapper             { w.Pod.Terminal = true; return w }
func (w *podWrapper) KeepExtras() *podWrapper           { w.Pod.KeepExtras = true; return w }
func (w *podWrapper) PreemptNever() *podWrapper         { w.Pod.PreemptNever = true; return w }
func (w *podWrapper) Task(t string) *podWrapper         { w.Pod.Task = t; return w }
func (w *podWrapper) Queue(key string) *podWrapper      { w.Pod.Queue = key; return w }

// --- reservations ----------------------------------------------------------------------------

type reservationWrapper struct{ Reservation }

// makeReservation is a gang's reservation still reserving, made at t0 and living past now.
func makeReservation(gang string, priority int32) *reservationWrapper {
	return &reservationWrapper{Reservation{Gang: gangKey(gang), Priority: priority, Created: t0,
		Expires: now.Add(time.Minute), State: Reserving}}
}

func (w *reservationWrapper) State(s ReservationState) *reservationWrapper {
	w.Reservation.State = s
	return w
}

func (w *reservationWrapper) CreatedAt(t time.Time) *reservationWrapper { w.Created = t; return w }

// Planned adds a slot planned for member on node, asking gpus(n), that no member holds yet.
func (w *reservationWrapper) Planned(member, node string, n int64) *reservationWrapper {
	w.Slots = append(w.Slots, Slot{PlannedFor: uid(member), Node: node, Requests: gpus(n), State: SlotPlanned})
	return w
}

// Held adds a slot member holds on node in state.
func (w *reservationWrapper) Held(member, node string, n int64, state SlotState) *reservationWrapper {
	w.Slots = append(w.Slots, Slot{Pod: uid(member), PlannedFor: uid(member), Node: node, Requests: gpus(n), State: state})
	return w
}

func (w *reservationWrapper) Obj() *Reservation {
	r := w.Reservation
	r.Slots = append([]Slot(nil), w.Slots...)
	return &r
}

// --- snapshots -------------------------------------------------------------------------------

type snapshotWrapper struct {
	rules        Rules
	nodes        []*nodeWrapper
	pods         []*podWrapper
	reservations []*reservationWrapper
	history      map[string]History
	queues       []quota.Queue
	refused      map[string]time.Time
}

// makeSnapshot is an empty cluster at now whose reservations live a minute.
func makeSnapshot() *snapshotWrapper {
	return &snapshotWrapper{rules: Rules{DefaultWaitingTime: time.Minute},
		history: map[string]History{}, refused: map[string]time.Time{}}
}

func (w *snapshotWrapper) MayEvict() *snapshotWrapper { w.rules.MayEvict = true; return w }

func (w *snapshotWrapper) Rules(edit func(*Rules)) *snapshotWrapper { edit(&w.rules); return w }

func (w *snapshotWrapper) Nodes(n ...*nodeWrapper) *snapshotWrapper {
	w.nodes = append(w.nodes, n...)
	return w
}

// GPUNodes adds count nodes prefix-0, prefix-1, ... of n GPUs each.
func (w *snapshotWrapper) GPUNodes(prefix string, count int, n int64) *snapshotWrapper {
	for i := range count {
		w.nodes = append(w.nodes, makeNode(prefix+"-"+strconv.Itoa(i), n))
	}
	return w
}

func (w *snapshotWrapper) Pods(p ...*podWrapper) *snapshotWrapper {
	w.pods = append(w.pods, p...)
	return w
}

func (w *snapshotWrapper) Reservations(r ...*reservationWrapper) *snapshotWrapper {
	w.reservations = append(w.reservations, r...)
	return w
}

func (w *snapshotWrapper) History(gang string, h History) *snapshotWrapper {
	w.history[gangKey(gang)] = h
	return w
}

func (w *snapshotWrapper) Queue(q quota.Queue) *snapshotWrapper {
	w.queues = append(w.queues, q)
	return w
}

// Refused says pod's eviction was refused at.
func (w *snapshotWrapper) Refused(pod string, at time.Time) *snapshotWrapper {
	w.refused[pod] = at
	return w
}

// Obj is the snapshot, with what the ledger would count filled in: each node's requested and
// leaving from its bound pods, the queues' use, the schedulable capacity, and the gangs with
// their members oldest first, pointing at the snapshot's own pods.
func (w *snapshotWrapper) Obj() *Snapshot {
	s := &Snapshot{Now: now, Rules: w.rules, Nodes: map[string]*Node{}, Pods: map[types.UID]*Pod{},
		Gangs: map[string]*Gang{}, Reservations: Reservations{}, Quota: quota.NewBook(),
		EvictRefused: map[types.UID]time.Time{}}
	for _, nw := range w.nodes {
		n := nw.Node
		s.Nodes[n.Name] = &n
		if n.Known && !n.Unschedulable {
			s.Schedulable = s.Schedulable.Add(n.Allocatable)
		}
	}
	for _, q := range w.queues {
		s.Quota.SetQueue(q)
	}
	for _, pw := range w.pods {
		p := pw.Pod
		if pw.spec != nil {
			p.Spec = pw.spec.Obj()
		}
		s.Pods[p.UID] = &p
		countBound(s, &p)
	}
	for _, p := range s.Pods {
		if p.Gang == "" {
			continue
		}
		g := s.Gangs[p.Gang]
		if g == nil {
			g = &Gang{Key: p.Gang, Namespace: p.Namespace, Name: p.Gang[len(p.Namespace)+1:], History: w.history[p.Gang]}
			s.Gangs[p.Gang] = g
		}
		g.Members = append(g.Members, p)
	}
	for _, g := range s.Gangs {
		sort.Slice(g.Members, func(i, j int) bool { return OlderThan(g.Members[i], g.Members[j]) })
	}
	for _, rw := range w.reservations {
		s.Reservations[rw.Gang] = rw.Obj()
	}
	for name, at := range w.refused {
		s.EvictRefused[uid(name)] = at
	}
	return s
}

// countBound adds a bound pod to its node and its queue, as the ledger does.
func countBound(s *Snapshot, p *Pod) {
	if !p.Holds() {
		return
	}
	n := s.Nodes[p.Node]
	if n == nil {
		n = &Node{Name: p.Node} // named only by a bound pod
		s.Nodes[p.Node] = n
	}
	n.Requested = n.Requested.Add(p.Requests)
	if p.Deleting {
		n.Leaving = n.Leaving.Add(p.Requests)
	}
	if p.Queue == "" {
		s.Unqueued = s.Unqueued.Add(p.Requests)
		return
	}
	s.Quota.Use(p.Queue, p.Requests)
}

// pod is the snapshot's pod of name.
func pod(s *Snapshot, name string) *Pod { return s.Pods[uid(name)] }

// names are the pods' names, in order.
func names(pods []*Pod) []string {
	out := make([]string, len(pods))
	for i, p := range pods {
		out[i] = p.Name
	}
	return out
}

func sorted(s []string) []string {
	slices.Sort(s)
	return s
}
