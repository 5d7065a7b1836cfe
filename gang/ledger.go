package gang

import (
	"fmt"
	"slices"
	"sort"
	"strconv"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/lockstep-sched/lockstep/decide"
	"github.com/lockstep-sched/lockstep/dra"
	"github.com/lockstep-sched/lockstep/fabric"
	"github.com/lockstep-sched/lockstep/gangspec"
	"github.com/lockstep-sched/lockstep/gpu"
	"github.com/lockstep-sched/lockstep/placement"
	"github.com/lockstep-sched/lockstep/quota"
	"github.com/lockstep-sched/lockstep/wellknown"
)

// ledger is the cluster as lockstep counts it: every pod, what each node has and what bound pods
// take from it (GPUs by index), and which pods form which gang. It is fed by the informers and by
// the bindings lockstep confirms. Its methods expect the manager's lock, held for writing by
// those that change it.
//
// Every change to what decisions read (a pod's decide.Pod, a node's counts, a gang's members or
// History) is noted in changed, so that the snapshot (snapshot.go) copies only what changed since
// the last decision. A change made without its note would leave decisions reading stale values;
// the tests compare the snapshot with one made afresh after every change (verifySnapshots).
type ledger struct {
	pods  map[types.UID]*podInfo
	nodes map[string]*nodeInfo
	gangs map[string]*gangInfo
	// groups are the rules group objects hold, by the key pods' markers name them with.
	groups map[string]groupRules
	read   gangspec.Reader
	// tiers are the network tiers nodes are grouped by (package fabric); nil for none.
	tiers fabric.Tiers
	// deleted remembers, for deletedFor, when the informer reported each pod gone. The scheduler
	// can still be in a cycle for a pod when its deletion arrives, and the filter, bind or
	// preempt call that follows carries the pod: taken in then, it would be a member no event
	// ever removes, and its gang would wait, and hold capacity, forever.
	deleted      map[types.UID]time.Time
	deletedSwept time.Time
	// quota is the team queues and what their pods use (package quota); take and release keep
	// its use current, resolve says which queue each pod counts toward.
	quota *quota.Book
	// schedulable is what the known schedulable nodes have in all, unqueued what bound pods of no
	// queue take of it: the queues share the difference.
	schedulable, unqueued placement.Resources
	// devices is what DRA publishes (devices.go).
	devices *dra.Inventory
	// released is when lockstep last asked to give back each claim's devices (releases.go).
	released map[types.UID]time.Time
	// heldDevices are the devices DRA's allocator found for each gang's reservation (devices.go).
	heldDevices map[string][]dra.DeviceKey
	// claimPods are the pods that name ResourceClaims, whose demand a claim's change can move.
	claimPods map[types.UID]bool
	// queueBinding is, per queue, what ordinary binds on their way to the apiserver will take:
	// the scheduler binds pods in parallel, and a quota checked only against bound pods would let
	// pods scheduled together past it.
	queueBinding map[string]placement.Resources
	changed      changes
}

// changes are the records changed since the snapshot last looked, by key.
type changes struct {
	pods  map[types.UID]bool
	nodes map[string]bool
	gangs map[string]bool
}

func newChanges() changes {
	return changes{pods: map[types.UID]bool{}, nodes: map[string]bool{}, gangs: map[string]bool{}}
}

// --- the ledger's records --------------------------------------------------------------------

// podInfo is lockstep's record of one pod: what decisions read of it (decide.Pod), and what only
// the manager keeps. It is rebuilt from the pod informer after a restart. A change to the
// embedded decide.Pod goes through the ledger, which notes it for the snapshot (ledger.go).
type podInfo struct {
	decide.Pod
	// gangName and group are what the pod's markers say (gangspec.Membership): its gang's name,
	// "" for an ordinary pod, and the group object holding its gang's rules.
	gangName string
	group    string
	// inline are the rules the pod carries itself; markerErr is why its markers are unusable.
	inline    *gangspec.Spec
	markerErr error
	// ownQueue is the queue the pod's own markers name (gangspec.Membership.Queue), which counts
	// when its gang's rules name none.
	ownQueue quota.Ref
	// condition is the message of the pod's PodScheduled=False condition, written by the scheduler;
	// it explains waiting gangs whose members never reached lockstep's filter.
	condition string
	// lastEvent de-duplicates the events lockstep emits on this pod.
	lastEvent string
	// parked: lockstep turned the pod away at filter, and has neither seen it back there nor woken
	// it since. kube-scheduler may keep such a pod out of its queue until something changes, and a
	// reservation made for it by another member is no change it sees (recallAfter says when).
	parked bool
	// gpuIDs are the GPU indices the pod holds on its node, from wellknown.AnnotationGPUIDs; nil
	// when unknown.
	gpuIDs []int
	// devices are what its ResourceClaims ask (devices.go); nil when it names none.
	devices *podDevices
}

func (p *podInfo) ref() *corev1.ObjectReference {
	return &corev1.ObjectReference{Kind: "Pod", APIVersion: "v1", Namespace: p.Namespace, Name: p.Name, UID: p.UID}
}

// nodeInfo is one node's capacity and what bound pods take from it. It may exist before its Node
// object is seen (informers deliver pods and nodes in any order); known says whether it was.
//
// The fields filter reads for every offered node come first, through gpus: they then sit in the
// struct's first 232 bytes rather than spread over all of it, and filter at 5,000 nodes spends
// most of its time waiting for node records to arrive from memory, a cache line at a time.
type nodeInfo struct {
	name          string
	known         bool
	unschedulable bool
	allocatable   placement.Resources
	requested     placement.Resources
	// leaving is the part of requested that pods being deleted hold (see placement.NodeState).
	leaving placement.Resources
	// binding is what ordinary binds on their way to the apiserver will take: the scheduler
	// binds pods in parallel, and a takeover decided for one must see the others.
	binding placement.Resources
	// softTaints are the node's PreferNoSchedule taints, which rank nodes on the shortlist;
	// hardTaints its NoSchedule and NoExecute ones, which keep members off it.
	softTaints, hardTaints []corev1.Taint
	// object is the node's name and labels, what members' node affinity matches against.
	object *corev1.Node
	// topo is the node's GPU topology (see package gpu for where it comes from); nil without GPUs.
	topo *gpu.Topology
	// gpuIndices are topo's GPU indices, ascending, kept to spare an allocation per score.
	gpuIndices []int
	gpus       gpuLedger
	// domains are the node's network domain at each of the ledger's tiers (package fabric).
	domains []string
	// topoSource and topoErr say where topo came from and what was wrong with the annotation.
	topoSource gpu.Source
	topoErr    error
	// nodeAllocatable is what the Node object offers; allocatable adds its DRA GPUs (dra).
	nodeAllocatable placement.Resources
	dra             nodeDevices
}

// free is what the node has left after bound pods and the ordinary binds on their way: a gang
// planned the moment a takeover let a pod through must not plan on what that pod is taking.
func (n *nodeInfo) free() placement.Resources { return n.allocatable.Sub(n.requested).Sub(n.binding) }

// view is the node as decisions read it. The slices it shares (domains, taints, indices) and the
// object are replaced, never written into, when the node changes.
func (n *nodeInfo) view() *decide.Node {
	return &decide.Node{Name: n.name, Known: n.known, Unschedulable: n.unschedulable, Allocatable: n.allocatable,
		Requested: n.requested, Leaving: n.leaving, Binding: n.binding, Domains: n.domains, Object: n.object,
		HardTaints: n.hardTaints, GPUs: n.gpuState()}
}

// gangInfo groups the pods that name the same gang.
type gangInfo struct {
	key        string
	namespace  string
	name       string
	members    map[types.UID]*podInfo
	lastReason string
	// History is what decisions read of the gang's past; the ledger notes its changes
	// (ledger.gangChanged).
	decide.History
	// attempts counts how often a member was turned away at filter: how long the gang has been
	// trying, in the scheduler's own retries.
	attempts int
	// reservation is the last one made for the gang, live or not: one that is still reserving
	// but no longer in the book has expired without sweepExpired having reported it yet.
	reservation *reservation
	// lastCommit is the gang's latest commit, running or done; nil before its first.
	lastCommit *commitRecord
	// bundleWait says which gangs of its gang group this gang's ready quorum waits for.
	bundleWait string
	// takenBy says who took the gang's last reservation over, until it reserves again: its
	// reason moves on at the next retry, this stays for /debug/gangs.
	takenBy string
	// lackedMembers: a member was turned away because too few members existed. The scheduler
	// does not try a parked pod again when another pod is created, so the next member to arrive
	// wakes one of those turned away (memberArrived), and a reservation recalls the others
	// (waker.recallParked).
	lackedMembers bool
	// extrasTaken counts the members beyond its quorum lockstep evicted for other gangs' quorums,
	// for /debug/gangs.
	extrasTaken int
	// turnedAway is when a member was last turned away at filter, and woken when lockstep last
	// woke the gang because its quorum fit (wakeStrandedLocked).
	turnedAway, woken time.Time
	// arrivals lets a member wait at filter for the rest being created (filter.go, gathering).
	arrivals arrivals
}

// sortedMembers returns the members oldest first, the order lockstep plans and shows them in.
func (g *gangInfo) sortedMembers() []*podInfo {
	out := make([]*podInfo, 0, len(g.members))
	for _, p := range g.members {
		out = append(out, p)
	}
	sort.Slice(out, func(i, j int) bool { return decide.OlderThan(&out[i].Pod, &out[j].Pod) })
	return out
}

// view is the gang as decisions read it, its members copied: for the questions asked under the
// shared lock, where the snapshot cannot be brought up to date (snapshot.go).
func (g *gangInfo) view() *decide.Gang {
	out := &decide.Gang{Key: g.key, Namespace: g.namespace, Name: g.name, History: g.History,
		Members: make([]*decide.Pod, 0, len(g.members))}
	for _, p := range g.members {
		copied := p.Pod
		out.Members = append(out.Members, &copied)
	}
	sort.Slice(out.Members, func(i, j int) bool { return decide.OlderThan(out.Members[i], out.Members[j]) })
	return out
}

// readMembership is what a pod's markers say about its gang; every pod is ordinary without a
// reader.
func readMembership(read gangspec.Reader, pod *corev1.Pod) gangspec.Membership {
	if read == nil {
		return gangspec.Membership{}
	}
	return read.Read(pod)
}

// newPodInfo extracts what lockstep needs from a pod, so the rest of the package never holds on
// to full pod objects (the informer's store already does). read tells gang members apart; the
// ledger resolves their rules as the pod joins it.
func newPodInfo(pod *corev1.Pod, read gangspec.Reader) *podInfo {
	return newPodInfoOf(pod, readMembership(read, pod))
}

// newPodInfoOf is newPodInfo for a pod whose markers were read already.
func newPodInfoOf(pod *corev1.Pod, ms gangspec.Membership) *podInfo {
	p := &podInfo{Pod: decide.Pod{
		UID:          pod.UID,
		Namespace:    pod.Namespace,
		Name:         pod.Name,
		Created:      pod.CreationTimestamp.Time,
		Requests:     placement.PodRequests(pod),
		Node:         pod.Spec.NodeName,
		Terminal:     pod.Status.Phase == corev1.PodSucceeded || pod.Status.Phase == corev1.PodFailed,
		Gated:        len(pod.Spec.SchedulingGates) > 0,
		Deleting:     pod.DeletionTimestamp != nil,
		Priority:     podPriority(pod),
		PreemptNever: pod.Spec.PreemptionPolicy != nil && *pod.Spec.PreemptionPolicy == corev1.PreemptNever,
		Task:         ms.Task,
		Topology:     ms.Topology,
		KeepExtras:   ms.KeepExtras,
		Spec:         ms.Spec,
		SpecErr:      ms.Err,
	}}
	p.gangName, p.group, p.inline, p.markerErr, p.ownQueue = ms.Gang, ms.Group, ms.Spec, ms.Err, ms.Queue
	if ms.Gang != "" {
		// The gang a pod names, even when its other markers are invalid, so that /debug/gangs
		// lists the rejected member beside its gang mates.
		p.Gang = pod.Namespace + "/" + ms.Gang
		p.Rules = decide.NodeRulesOf(pod)
	}
	p.devices = podDevicesOf(pod, p.Requests)
	if raw, ok := pod.Annotations[wellknown.AnnotationGPUIDs]; ok && p.Requests.GPU > 0 {
		// A malformed list counts as unknown indices: the GPUs still count as taken.
		p.gpuIDs, _ = ParseGPUIDs(raw, p.Requests.GPU)
	}
	for _, c := range pod.Status.Conditions {
		if c.Type == corev1.PodScheduled && c.Status == corev1.ConditionFalse {
			p.condition = c.Message
		}
	}
	return p
}

// FormatGPUIDs renders indices for wellknown.AnnotationGPUIDs.
func FormatGPUIDs(ids []int) string {
	parts := make([]string, len(ids))
	for i, id := range ids {
		parts[i] = strconv.Itoa(id)
	}
	return strings.Join(parts, ",")
}

// ParseGPUIDs reads wellknown.AnnotationGPUIDs; want is the pod's GPU request, which the list must
// match.
func ParseGPUIDs(value string, want int64) ([]int, error) {
	if value == "" {
		return nil, fmt.Errorf("empty")
	}
	seen := map[int]bool{}
	var ids []int
	for _, part := range strings.Split(value, ",") {
		id, err := strconv.Atoi(strings.TrimSpace(part))
		if err != nil || id < 0 {
			return nil, fmt.Errorf("%q is not a GPU index", part)
		}
		if seen[id] {
			return nil, fmt.Errorf("GPU %d listed twice", id)
		}
		seen[id] = true
		ids = append(ids, id)
	}
	if int64(len(ids)) != want {
		return nil, fmt.Errorf("%d indices for a pod that requests %d GPUs", len(ids), want)
	}
	sort.Ints(ids)
	return ids, nil
}

// podPriority is a pod's spec.priority, 0 without one.
func podPriority(pod *corev1.Pod) int32 {
	if pod.Spec.Priority != nil {
		return *pod.Spec.Priority
	}
	return 0
}

// --- keeping the ledger ------------------------------------------------------------------------

// deletedFor is how long a deleted pod's uid is remembered: far longer than a scheduling cycle
// lasts, each call of which is bounded by the extender's HTTP timeout.
const deletedFor = 5 * time.Minute

type groupRules struct {
	spec *gangspec.Spec
	err  error
}

func newLedger(read gangspec.Reader, tiers fabric.Tiers) *ledger {
	return &ledger{pods: map[types.UID]*podInfo{}, nodes: map[string]*nodeInfo{}, gangs: map[string]*gangInfo{},
		groups: map[string]groupRules{}, read: read, tiers: tiers, deleted: map[types.UID]time.Time{}, quota: quota.NewBook(),
		queueBinding: map[string]placement.Resources{}, changed: newChanges(), devices: dra.NewInventory(dra.DefaultGPUClasses),
		released: map[types.UID]time.Time{}, heldDevices: map[string][]dra.DeviceKey{},
		claimPods: map[types.UID]bool{}}
}

func (l *ledger) podChanged(uid types.UID)       { l.changed.pods[uid] = true }
func (l *ledger) nodeChanged(name string)        { l.changed.nodes[name] = true }
func (l *ledger) gangChanged(gang string)        { l.changed.gangs[gang] = true }
func (l *ledger) setEvicting(p *podInfo, v bool) { p.Evicting = v; l.podChanged(p.UID) }

func (l *ledger) node(name string) *nodeInfo {
	n, ok := l.nodes[name]
	if !ok {
		// The map key gets a copy of its own, made as the node is first seen: the keys of a
		// cluster's nodes then sit together in memory instead of inside each informer object,
		// and filter and prioritize, which compare thousands of them per call, miss the cache
		// far less.
		n = &nodeInfo{name: strings.Clone(name)}
		l.nodes[n.name] = n
	}
	l.nodeChanged(n.name)
	return n
}

func (l *ledger) dropNodeIfUnused(n *nodeInfo) {
	if !n.known && n.requested.IsZero() && n.binding.IsZero() {
		delete(l.nodes, n.name)
	}
}

func (l *ledger) upsertNode(node *corev1.Node) {
	n := l.node(node.Name)
	l.countSchedulable(n, -1)
	defer l.countSchedulable(n, 1)
	n.known = true
	n.unschedulable = node.Spec.Unschedulable
	n.nodeAllocatable = placement.NodeAllocatable(node)
	var soft []corev1.Taint
	n.hardTaints = nil
	for _, t := range node.Spec.Taints {
		if t.Effect == corev1.TaintEffectPreferNoSchedule {
			soft = append(soft, t)
		} else {
			n.hardTaints = append(n.hardTaints, t)
		}
	}
	n.softTaints = soft
	n.object = &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: node.Name, Labels: node.Labels}}
	n.domains = l.tiers.Domains(node.Name, node.Labels)
	l.takeDevices(n)
	l.shapeGPUs(n, node)
}

func (l *ledger) deleteNode(name string) {
	if n, ok := l.nodes[name]; ok {
		l.nodeChanged(name)
		l.countSchedulable(n, -1)
		n.known = false
		n.allocatable, n.nodeAllocatable = placement.Resources{}, placement.Resources{}
		l.dropNodeIfUnused(n)
	}
}

// upsertPod records a pod's latest version and moves its capacity between nodes when it was bound
// or finished. It keeps lastEvent, which is lockstep's own, across updates.
func (l *ledger) upsertPod(pod *corev1.Pod) *podInfo {
	return l.upsertInfo(newPodInfo(pod, l.read))
}

// upsertInfo is upsertPod for a pod already summarised (the informer's records).
func (l *ledger) upsertInfo(next *podInfo) *podInfo {
	prev, ok := l.pods[next.UID]
	if ok {
		next.lastEvent = prev.lastEvent
		next.Evicting = prev.Evicting
		next.parked = prev.parked
		// lockstep marks a pod bound as soon as its binding succeeds; an informer event from
		// before the binding must not take that back.
		if prev.Holds() && next.Node == "" && !next.Terminal {
			next.Node = prev.Node
		}
		if next.Node == prev.Node && next.gpuIDs == nil {
			next.gpuIDs = prev.gpuIDs
		}
		l.release(prev)
		l.leaveGang(prev)
	}
	l.pods[next.UID] = next
	l.podChanged(next.UID)
	l.resolve(next)
	l.demand(next)
	l.take(next)
	l.joinGang(next)
	if l.devices.HasNodes() {
		l.devicesMoved(prev, next)
	}
	if next.Holds() && (!ok || !prev.Holds()) {
		l.settleSlot(next)
	}
	return next
}

// settleSlot hands a member's capacity from its gang's reservation to the ledger once the
// informer reports it bound, which can come before its binding call returns: counted by both
// meanwhile, the capacity would be refused to others while free, and a pod the scheduler parked
// meanwhile would not be sent back (another pod's binding is no event for it).
func (l *ledger) settleSlot(p *podInfo) {
	g := l.gangOf(p)
	if g == nil || g.reservation == nil {
		return
	}
	if s := g.reservation.slotOf(p.UID); s != nil && s.node == p.Node {
		s.settled = true
		g.reservation.changed()
	}
}

// deletePod forgets a pod the informer reported deleted, and remembers that it was (wasDeleted).
func (l *ledger) deletePod(uid types.UID, now time.Time) *podInfo {
	l.deleted[uid] = now
	l.sweepDeleted(now)
	p, ok := l.pods[uid]
	if !ok {
		return nil
	}
	l.release(p)
	l.leaveGang(p)
	delete(l.pods, uid)
	delete(l.claimPods, uid)
	l.podChanged(uid)
	if l.devices.HasNodes() {
		l.devicesMoved(p, nil)
	}
	return p
}

// wasDeleted reports whether the informer reported the pod deleted: a scheduler call for it is
// late, and must not bring it back.
func (l *ledger) wasDeleted(uid types.UID) bool {
	_, ok := l.deleted[uid]
	return ok
}

// takeInFromScheduler is upsertInfo for a pod a scheduler call carried (filter, bind, preempt),
// which can come after the informer reported the pod deleted: such a pod is refused, not taken in.
func (l *ledger) takeInFromScheduler(info *podInfo) (*podInfo, error) {
	if l.wasDeleted(info.UID) {
		return nil, fmt.Errorf("pod %s was deleted; lockstep no longer schedules it", info.Key())
	}
	return l.upsertInfo(info), nil
}

// sweepDeleted forgets deletions older than deletedFor. It looks at most four times per
// deletedFor, so that a stream of deletions costs a walk of the map now and then, not each time.
func (l *ledger) sweepDeleted(now time.Time) {
	if now.Sub(l.deletedSwept) < deletedFor/4 {
		return
	}
	l.deletedSwept = now
	for uid, at := range l.deleted {
		if now.Sub(at) >= deletedFor {
			delete(l.deleted, uid)
		}
	}
}

// markBound records a binding lockstep made before the informer reports it, so the capacity is
// not offered twice in between. gpuIDs were chosen (and marked taken) by chooseGPUs.
func (l *ledger) markBound(p *podInfo, node string, gpuIDs []int) {
	l.release(p)
	p.Node, p.gpuIDs = node, gpuIDs
	l.podChanged(p.UID)
	l.take(p)
	if g := l.gangOf(p); g != nil {
		l.noteBound(g)
	}
}

// noteBound remembers, for once-satisfied gangs, that the quorum was bound.
func (l *ledger) noteBound(g *gangInfo) {
	if g.SatisfiedOnce {
		return
	}
	view := g.view()
	if spec, _ := view.Reference(); spec != nil && spec.Policy == gangspec.OnceSatisfied {
		t := view.Counted(spec)
		if g.SatisfiedOnce = t.Meets(spec); g.SatisfiedOnce {
			l.gangChanged(g.key)
		}
	}
}

// resolve sets the rules that apply to a pod: its own, or those of the group object its markers
// name, which may not exist yet.
func (l *ledger) resolve(p *podInfo) {
	defer l.resolveQueue(p)
	l.podChanged(p.UID)
	p.Spec, p.SpecErr, p.Awaiting = p.inline, p.markerErr, ""
	if p.group == "" || p.markerErr != nil {
		return
	}
	r, ok := l.groups[p.group]
	if !ok {
		p.Awaiting = p.group
		return
	}
	p.Spec, p.SpecErr = r.spec, r.err
}

// resolveQueue sets the queue a pod counts toward: the one its gang's rules name, else the one
// its own markers name (Koordinator's quota label), else its namespace's quota, if any.
func (l *ledger) resolveQueue(p *podInfo) {
	ref := p.ownQueue
	if p.Spec != nil && !p.Spec.Queue.IsZero() {
		ref = p.Spec.Queue
	}
	p.Queue = l.quota.Resolve(p.Namespace, ref)
	l.podChanged(p.UID)
}

// requeueNamespaces is requeueNamespace for each of namespaces; quota.AllNamespaces among them
// resolves every pod again.
func (l *ledger) requeueNamespaces(namespaces []string) {
	if slices.Contains(namespaces, quota.AllNamespaces) {
		l.requeueNamespace(quota.AllNamespaces)
		return
	}
	for _, ns := range namespaces {
		l.requeueNamespace(ns)
	}
}

// requeueNamespace resolves again the queue of every pod of namespace, moving what bound ones
// use: a quota made or removed there, or the namespace's default queue changed. Rare enough to
// walk every pod.
func (l *ledger) requeueNamespace(namespace string) {
	for _, p := range l.pods {
		if p.Namespace == namespace || namespace == quota.AllNamespaces {
			l.release(p)
			l.resolveQueue(p)
			l.take(p)
		}
	}
}

// countSchedulable adds (sign 1) or takes away (-1) a node's part in what the queues share.
func (l *ledger) countSchedulable(n *nodeInfo, sign int64) {
	if !n.known || n.unschedulable {
		return
	}
	a := n.allocatable
	if sign < 0 {
		l.schedulable = l.schedulable.Sub(a)
	} else {
		l.schedulable = l.schedulable.Add(a)
	}
}

// queueCapacity is what the team queues share: the schedulable nodes' capacity less what pods of
// no queue hold.
func (l *ledger) queueCapacity() placement.Resources { return l.schedulable.Sub(l.unqueued) }

// setGroup records a group object's rules (or, with ok false, that it is gone) and applies them
// to the members of gang that name it. It returns the gang, nil when it has no members.
func (l *ledger) setGroup(key, gang string, r groupRules, ok bool) *gangInfo {
	if ok {
		l.groups[key] = r
	} else {
		delete(l.groups, key)
	}
	g := l.gangs[gang]
	if g == nil {
		return nil
	}
	for _, p := range g.members {
		if p.group == key {
			l.release(p) // the group may name another queue
			l.resolve(p)
			l.take(p)
		}
	}
	l.noteBound(g)
	return g
}

func (l *ledger) take(p *podInfo) {
	if p.Holds() {
		if p.Queue != "" {
			l.quota.Use(p.Queue, p.Requests)
		} else {
			l.unqueued = l.unqueued.Add(p.Requests)
		}
		n := l.node(p.Node)
		n.requested = n.requested.Add(p.Requests)
		if p.Deleting {
			n.leaving = n.leaving.Add(p.Requests)
		}
		n.gpus.take(p.UID, p.gpuIDs, p.Requests.GPU)
	}
}

func (l *ledger) release(p *podInfo) {
	if p.Holds() {
		if p.Queue != "" {
			l.quota.Unuse(p.Queue, p.Requests)
		} else {
			l.unqueued = l.unqueued.Sub(p.Requests)
		}
		n := l.node(p.Node)
		n.requested = n.requested.Sub(p.Requests)
		if p.Deleting {
			n.leaving = n.leaving.Sub(p.Requests)
		}
		n.gpus.release(p.UID, p.gpuIDs, p.Requests.GPU)
		l.dropNodeIfUnused(n)
	}
}

func (l *ledger) joinGang(p *podInfo) {
	key := p.Gang
	if key == "" {
		return
	}
	g, ok := l.gangs[key]
	if !ok {
		g = &gangInfo{key: key, namespace: p.Namespace, name: p.gangName, members: map[types.UID]*podInfo{}}
		l.gangs[key] = g
	}
	g.members[p.UID] = p
	l.gangChanged(key)
	if p.Holds() {
		l.noteBound(g)
	}
}

func (l *ledger) leaveGang(p *podInfo) {
	if g, ok := l.gangs[p.Gang]; ok {
		delete(g.members, p.UID)
		l.gangChanged(p.Gang)
	}
}

// setHistory changes what decisions read of a gang's past.
func (l *ledger) setHistory(g *gangInfo, h decide.History) {
	g.History = h
	l.gangChanged(g.key)
}

// want records that gang waits for capacity with its quorum asking req in queue, so that its
// queue is owed a share.
func (l *ledger) want(gang, queue string, req placement.Resources) {
	if l.quota.Enforcing() && queue != "" {
		l.quota.Want(gang, queue, req)
	}
}

// forgetGang drops a gang left with no members.
func (l *ledger) forgetGang(key string) {
	delete(l.gangs, key)
	l.gangChanged(key)
}

// gangOf returns the gang a pod names, or nil for an ordinary pod.
func (l *ledger) gangOf(p *podInfo) *gangInfo {
	return l.gangs[p.Gang]
}

// readNodeState sets st to a node as filter's checks see it; held is what other gangs'
// reservations set aside, per node. It fills the caller's st rather than returning one: filter
// reads thousands of nodes per call, and copying the state out of a return value per node cost
// more than the lookup. It returns the node's record, nil for a node it has not seen.
func (l *ledger) readNodeState(st *placement.NodeState, name string, held map[string]placement.Resources) *nodeInfo {
	n, ok := l.nodes[name]
	if !ok || !n.known {
		*st = placement.NodeState{}
		return nil
	}
	st.Seen, st.Free, st.Leaving, st.Held = true, n.free(), n.leaving, placement.Resources{}
	if len(held) > 0 {
		// The length check spares a lookup per node when, as usual, nothing is held.
		st.Held = held[name]
	}
	return n
}

// startBinding counts an ordinary bind on its way to node; endBinding, once it is answered
// (markBound has then counted it, or it failed).
func (l *ledger) startBinding(p *podInfo, node string) {
	n := l.node(node)
	n.binding = n.binding.Add(p.Requests)
	if p.Queue != "" {
		l.queueBinding[p.Queue] = l.queueBinding[p.Queue].Add(p.Requests)
	}
}

func (l *ledger) endBinding(p *podInfo, node string) {
	n := l.node(node)
	n.binding = n.binding.Sub(p.Requests)
	l.dropNodeIfUnused(n)
	if p.Queue == "" {
		return
	}
	if left := l.queueBinding[p.Queue].Sub(p.Requests); left.IsZero() {
		delete(l.queueBinding, p.Queue)
	} else {
		l.queueBinding[p.Queue] = left
	}
}

// unmarkEvicting takes back a victim's evicting mark: its eviction was refused or failed, and it
// stays. The ledger may hold a newer record of the pod than the victim's.
func (l *ledger) unmarkEvicting(uid types.UID) {
	if q := l.pods[uid]; q != nil {
		l.setEvicting(q, false)
	}
}
