package gang

import (
	"sort"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/lockstep-sched/lockstep/gangspec"
	"github.com/lockstep-sched/lockstep/gpu"
	"github.com/lockstep-sched/lockstep/placement"
	"github.com/lockstep-sched/lockstep/quota"
	"github.com/lockstep-sched/lockstep/wellknown"
)

// podInfo is lockstep's record of one pod: what it asks for, where it is bound and which gang it
// belongs to. It is rebuilt from the pod informer after a restart.
type podInfo struct {
	uid       types.UID
	namespace string
	name      string
	created   time.Time
	requests  placement.Resources
	node      string // spec.nodeName, or the node lockstep just bound it to
	terminal  bool   // Succeeded or Failed: holds nothing on its node any more
	// deleting: the pod has a deletionTimestamp; it still holds its node until it is gone.
	deleting bool
	// evicting: lockstep asked for the pod's eviction and the informer has not shown it deleting
	// yet. Meanwhile it counts as going (going), so that the next plan neither chooses it again
	// nor counts what it frees twice; a refused eviction takes the mark back (unmarkEvicting).
	evicting bool
	// topology is what the pod asks of the network between its gang's nodes (tiers.go).
	topology topologyRule
	// priority is spec.priority, which the apiserver's Priority admission sets from the pod's
	// PriorityClass (0 without one); preemptNever is preemptionPolicy: Never.
	priority     int32
	preemptNever bool
	// nodeRules are a gang member's nodeSelector, required node affinity and tolerations
	// (noderules.go); nil for an ordinary pod, which the scheduler alone places.
	nodeRules *nodeRules
	// keepExtras: the pod's own opt-out (wellknown.AnnotationKeepExtras) from being taken back
	// while beyond its gang's quorum (extras.go).
	keepExtras bool
	// gated: the pod has scheduling gates (Kueue and others hold pods back this way); it cannot
	// reach the scheduler, so lockstep does not reserve capacity for it.
	gated bool
	// gangName, task and group are what the pod's markers say (gangspec.Membership): its gang,
	// "" for an ordinary pod; its task inside the gang; the group object holding its gang's rules.
	gangName string
	task     string
	group    string
	// inline are the rules the pod carries itself; markerErr is why its markers are unusable.
	inline    *gangspec.Spec
	markerErr error
	// spec and specErr are the rules that apply, resolved by the ledger from inline or from the
	// group object; both are nil while the group object does not exist (awaiting says which).
	spec    *gangspec.Spec
	specErr error
	// ownQueue is the queue the pod's own markers name (gangspec.Membership.Queue), which counts
	// when its gang's rules name none.
	ownQueue quota.Ref
	awaiting string
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
	// queue is the key of the team queue the pod counts toward (package quota), "" for none.
	queue string
}

func (p *podInfo) key() string { return p.namespace + "/" + p.name }

// holds reports whether the pod takes capacity on a node.
func (p *podInfo) holds() bool { return p.node != "" && !p.terminal }

// going reports whether the pod is on its way out: being deleted, or evicted by lockstep.
func (p *podInfo) going() bool { return p.deleting || p.evicting }

func (p *podInfo) ref() *corev1.ObjectReference {
	return &corev1.ObjectReference{Kind: "Pod", APIVersion: "v1", Namespace: p.namespace, Name: p.name, UID: p.uid}
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
	// binds pods in parallel, and a takeover decided for one must see the others (takeover.go).
	binding placement.Resources
	// softTaints are the node's PreferNoSchedule taints, which rank nodes on the shortlist;
	// hardTaints its NoSchedule and NoExecute ones, which keep members off it (noderules.go).
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
}

// free is what the node has left after bound pods and the ordinary binds on their way: a gang
// planned the moment a takeover let a pod through must not plan on what that pod is taking.
func (n *nodeInfo) free() placement.Resources { return n.allocatable.Sub(n.requested).Sub(n.binding) }

// gangInfo groups the pods that name the same gang.
type gangInfo struct {
	key        string
	namespace  string
	name       string
	members    map[types.UID]*podInfo
	lastReason string
	// attempts counts how often a member was turned away at filter: how long the gang has been
	// trying, in the scheduler's own retries.
	attempts   int
	timedOut   bool
	timedOutAt time.Time
	// reservation is the last one admitGang made, live or not: one that is still reserving but
	// no longer in the cache has expired without sweepExpired having reported it yet.
	reservation *reservation
	// lastCommit is the gang's latest commit, running or done; nil before its first.
	lastCommit *commitRecord
	// satisfiedOnce: the gang has had its quorum bound, for the once-satisfied match policy.
	satisfiedOnce bool
	// bundleWait says which gangs of its gang group this gang's ready quorum waits for.
	bundleWait string
	// takenBy says who took the gang's last reservation over (takeover.go), until it reserves
	// again: its reason moves on at the next retry, this stays for /debug/gangs.
	takenBy string
	// waitingSince is when the gang's last reservation was made; zero before its first, when
	// it has waited since its oldest member was created (see waitedSince).
	waitingSince time.Time
	// lackedMembers: a member was turned away because too few members existed. The scheduler
	// does not try a parked pod again when another pod is created, so the next member to arrive
	// wakes one of those turned away (memberArrivedLocked), and a reservation recalls the others
	// (recallParkedLocked).
	lackedMembers bool
	// extrasTaken counts the members beyond its quorum lockstep evicted for other gangs' quorums
	// (extras.go), for /debug/gangs.
	extrasTaken int
	// turnedAway is when a member was last turned away at filter, and woken when lockstep last
	// woke the gang because its quorum fit (wakeStrandedLocked).
	turnedAway, woken time.Time
	// arrivals lets a member wait at filter for the rest being created (gather.go).
	arrivals arrivals
}

// reference is the spec every member must agree with: the one of the oldest member whose
// annotations parse. Choosing the oldest keeps the answer stable while members come and go.
func (g *gangInfo) reference() (*gangspec.Spec, *podInfo) {
	var ref *podInfo
	for _, p := range g.members {
		if p.spec == nil {
			continue
		}
		if ref == nil || olderThan(p, ref) {
			ref = p
		}
	}
	if ref == nil {
		return nil, nil
	}
	return ref.spec, ref
}

func olderThan(a, b *podInfo) bool {
	if !a.created.Equal(b.created) {
		return a.created.Before(b.created)
	}
	return a.name < b.name
}

// boundCount is how many members hold a node now.
func (g *gangInfo) boundCount() int {
	n := 0
	for _, p := range g.members {
		if p.holds() {
			n++
		}
	}
	return n
}

// oldest is the gang's oldest member; the gang must have one.
func (g *gangInfo) oldest() *podInfo {
	var out *podInfo
	for _, p := range g.members {
		if out == nil || olderThan(p, out) {
			out = p
		}
	}
	return out
}

// sortedMembers returns the members oldest first, the order lockstep plans and shows them in.
func (g *gangInfo) sortedMembers() []*podInfo {
	out := make([]*podInfo, 0, len(g.members))
	for _, p := range g.members {
		out = append(out, p)
	}
	sort.Slice(out, func(i, j int) bool { return olderThan(out[i], out[j]) })
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
	p := &podInfo{
		uid:       pod.UID,
		namespace: pod.Namespace,
		name:      pod.Name,
		created:   pod.CreationTimestamp.Time,
		requests:  placement.PodRequests(pod),
		node:      pod.Spec.NodeName,
		terminal:  pod.Status.Phase == corev1.PodSucceeded || pod.Status.Phase == corev1.PodFailed,
		gated:     len(pod.Spec.SchedulingGates) > 0,
		deleting:  pod.DeletionTimestamp != nil,
	}
	p.priority = podPriority(pod)
	p.preemptNever = pod.Spec.PreemptionPolicy != nil && *pod.Spec.PreemptionPolicy == corev1.PreemptNever
	p.gangName, p.task, p.group, p.inline, p.markerErr = ms.Gang, ms.Task, ms.Group, ms.Spec, ms.Err
	p.topology = ruleOf(ms.Topology)
	p.keepExtras = ms.KeepExtras
	if ms.Gang != "" {
		p.nodeRules = nodeRulesOf(pod)
	}
	p.ownQueue = ms.Queue
	p.spec, p.specErr = p.inline, p.markerErr
	if raw, ok := pod.Annotations[wellknown.AnnotationGPUIDs]; ok && p.requests.GPU > 0 {
		// A malformed list counts as unknown indices: the GPUs still count as taken.
		p.gpuIDs, _ = ParseGPUIDs(raw, p.requests.GPU)
	}
	for _, c := range pod.Status.Conditions {
		if c.Type == corev1.PodScheduled && c.Status == corev1.ConditionFalse {
			p.condition = c.Message
		}
	}
	return p
}

// podPriority is a pod's spec.priority, 0 without one.
func podPriority(pod *corev1.Pod) int32 {
	if pod.Spec.Priority != nil {
		return *pod.Spec.Priority
	}
	return 0
}

// priority is the gang's: its reference member's, which every member must share (memberError).
func (g *gangInfo) priority() int32 {
	if _, ref := g.reference(); ref != nil {
		return ref.priority
	}
	return 0
}

func (g *gangInfo) minAvailable() int {
	if spec, _ := g.reference(); spec != nil {
		return spec.MinAvailable
	}
	return 0
}
