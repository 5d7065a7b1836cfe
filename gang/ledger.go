package gang

import (
	"fmt"
	"slices"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/lockstep-sched/lockstep/fabric"
	"github.com/lockstep-sched/lockstep/gangspec"
	"github.com/lockstep-sched/lockstep/gpu"
	"github.com/lockstep-sched/lockstep/placement"
	"github.com/lockstep-sched/lockstep/quota"
)

// ledger is the cluster as lockstep counts it: every pod, what each node has and what bound pods
// take from it (GPUs by index), and which pods form which gang. It is fed by the informers and by
// the bindings lockstep confirms. Its methods expect the manager's lock.
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
	// queueBinding is, per queue, what ordinary binds on their way to the apiserver will take:
	// the scheduler binds pods in parallel, and a quota checked only against bound pods would let
	// pods scheduled together past it.
	queueBinding map[string]placement.Resources
}

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
		queueBinding: map[string]placement.Resources{}}
}

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
	n.allocatable = placement.NodeAllocatable(node)
	n.softTaints, n.hardTaints = n.softTaints[:0], nil
	for _, t := range node.Spec.Taints {
		if t.Effect == corev1.TaintEffectPreferNoSchedule {
			n.softTaints = append(n.softTaints, t)
		} else {
			n.hardTaints = append(n.hardTaints, t)
		}
	}
	n.object = &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: node.Name, Labels: node.Labels}}
	n.domains = l.tiers.Domains(node.Name, node.Labels)
	n.topo, n.topoSource, n.topoErr, n.gpuIndices = nil, gpu.SourceNone, nil, nil
	if n.allocatable.GPU > 0 {
		n.topo, n.topoSource, n.topoErr = gpu.FromNode(node)
		if n.topo != nil {
			n.gpuIndices = n.topo.Indices()
		}
	}
}

func (l *ledger) deleteNode(name string) {
	if n, ok := l.nodes[name]; ok {
		l.countSchedulable(n, -1)
		n.known = false
		n.allocatable = placement.Resources{}
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
	prev, ok := l.pods[next.uid]
	if ok {
		next.lastEvent = prev.lastEvent
		next.evicting = prev.evicting
		next.parked = prev.parked
		// lockstep marks a pod bound as soon as its binding succeeds; an informer event from
		// before the binding must not take that back.
		if prev.holds() && next.node == "" && !next.terminal {
			next.node = prev.node
		}
		if next.node == prev.node && next.gpuIDs == nil {
			next.gpuIDs = prev.gpuIDs
		}
		l.release(prev)
		l.leaveGang(prev)
	}
	l.pods[next.uid] = next
	l.resolve(next)
	l.take(next)
	l.joinGang(next)
	if next.holds() && (!ok || !prev.holds()) {
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
	if s := g.reservation.slotOf(p.uid); s != nil && s.node == p.node {
		s.settled = true
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
	if l.wasDeleted(info.uid) {
		return nil, fmt.Errorf("pod %s was deleted; lockstep no longer schedules it", info.key())
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
	p.node, p.gpuIDs = node, gpuIDs
	l.take(p)
	if g := l.gangOf(p); g != nil {
		g.noteBound()
	}
}

// resolve sets the rules that apply to a pod: its own, or those of the group object its markers
// name, which may not exist yet.
func (l *ledger) resolve(p *podInfo) {
	defer l.resolveQueue(p)
	p.spec, p.specErr, p.awaiting = p.inline, p.markerErr, ""
	if p.group == "" || p.markerErr != nil {
		return
	}
	r, ok := l.groups[p.group]
	if !ok {
		p.awaiting = p.group
		return
	}
	p.spec, p.specErr = r.spec, r.err
}

// resolveQueue sets the queue a pod counts toward: the one its gang's rules name, else the one
// its own markers name (Koordinator's quota label), else its namespace's quota, if any.
func (l *ledger) resolveQueue(p *podInfo) {
	ref := p.ownQueue
	if p.spec != nil && !p.spec.Queue.IsZero() {
		ref = p.spec.Queue
	}
	p.queue = l.quota.Resolve(p.namespace, ref)
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
		if p.namespace == namespace || namespace == quota.AllNamespaces {
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
	g.noteBound()
	return g
}

func (l *ledger) take(p *podInfo) {
	if p.holds() {
		if p.queue != "" {
			l.quota.Use(p.queue, p.requests)
		} else {
			l.unqueued = l.unqueued.Add(p.requests)
		}
		n := l.node(p.node)
		n.requested = n.requested.Add(p.requests)
		if p.deleting {
			n.leaving = n.leaving.Add(p.requests)
		}
		n.gpus.take(p.uid, p.gpuIDs, p.requests.GPU)
	}
}

func (l *ledger) release(p *podInfo) {
	if p.holds() {
		if p.queue != "" {
			l.quota.Unuse(p.queue, p.requests)
		} else {
			l.unqueued = l.unqueued.Sub(p.requests)
		}
		n := l.node(p.node)
		n.requested = n.requested.Sub(p.requests)
		if p.deleting {
			n.leaving = n.leaving.Sub(p.requests)
		}
		n.gpus.release(p.uid, p.gpuIDs, p.requests.GPU)
		l.dropNodeIfUnused(n)
	}
}

// gangKeyOf is the gang a pod names, even when its other markers are invalid, so that
// /debug/gangs lists the rejected member beside its gang mates.
func gangKeyOf(p *podInfo) string {
	if p.gangName == "" {
		return ""
	}
	return p.namespace + "/" + p.gangName
}

func (l *ledger) joinGang(p *podInfo) {
	key := gangKeyOf(p)
	if key == "" {
		return
	}
	g, ok := l.gangs[key]
	if !ok {
		g = &gangInfo{key: key, namespace: p.namespace, name: p.gangName, members: map[types.UID]*podInfo{}}
		l.gangs[key] = g
	}
	g.members[p.uid] = p
	if p.holds() {
		g.noteBound()
	}
}

func (l *ledger) leaveGang(p *podInfo) {
	key := gangKeyOf(p)
	if g, ok := l.gangs[key]; ok {
		delete(g.members, p.uid)
	}
}

// gangOf returns the gang a pod names, or nil for an ordinary pod.
func (l *ledger) gangOf(p *podInfo) *gangInfo {
	return l.gangs[gangKeyOf(p)]
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
