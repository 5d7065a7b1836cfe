package gang

import (
	"context"
	"fmt"
	"maps"
	"slices"

	corev1 "k8s.io/api/core/v1"
	resourceapi "k8s.io/api/resource/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/lockstep-sched/lockstep/decide"
	"github.com/lockstep-sched/lockstep/dra"
	"github.com/lockstep-sched/lockstep/gangspec"
	"github.com/lockstep-sched/lockstep/gpu"
	"github.com/lockstep-sched/lockstep/placement"
	"github.com/lockstep-sched/lockstep/views"
)

// The DRA side of the ledger (package dra). A node's GPUs are its device-plugin GPUs and its DRA
// devices of GPU classes; a pod's are its nvidia.com/gpu requests and what its claims ask; and a
// claim allocated for no pod the ledger counts (another scheduler's pod, one gone) takes its
// devices from its node as a pod would. Folded into the counts so, DRA GPUs are planned, packed,
// queued and explained by everything that counts GPUs. All of it runs under the manager's lock.

// nodeDevices is a node's DRA part.
type nodeDevices struct {
	// gpus are its GPU devices in whole pools; orphaned those of them that claims held by no pod
	// the ledger counts take.
	gpus, orphaned int64
	// devices are its GPUs as the inventory lists them, in topology index order.
	devices []dra.Device
}

// podDevices is a pod's DRA part: its claims as the pod names them (a pod that carries nothing
// else, for dra.Demand), its own nvidia.com/gpu requests, and what its claims ask.
type podDevices struct {
	refs   *corev1.Pod
	base   int64
	demand dra.Demand
}

// podDevicesOf is the DRA part of a pod that names claims, nil for one that names none.
func podDevicesOf(pod *corev1.Pod, requests placement.Resources) *podDevices {
	if len(pod.Spec.ResourceClaims) == 0 {
		return nil
	}
	refs := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: pod.Namespace, Name: pod.Name, UID: pod.UID},
		Spec:   corev1.PodSpec{ResourceClaims: slices.Clone(pod.Spec.ResourceClaims)},
		Status: corev1.PodStatus{ResourceClaimStatuses: slices.Clone(pod.Status.ResourceClaimStatuses)}}
	return &podDevices{refs: refs, base: requests.GPU}
}

// usesDevices reports whether the pod's GPUs on node are DRA devices: it names claims, or it asks
// nvidia.com/gpu of a node whose GPUs are all DRA's, where kube-scheduler makes a claim for them.
// Such a pod's devices are allocated in the scheduler's cycle, before its bind reaches lockstep,
// and only that cycle reserves them for it.
func (l *ledger) usesDevices(p *podInfo, node string) bool {
	if p.devices != nil {
		return true
	}
	n := l.nodes[node]
	return n != nil && p.Requests.GPU > 0 && n.nodeAllocatable.GPU == 0 && n.dra.gpus > 0
}

// demand works out what the pod's claims ask, now, into its requests. Call it before take.
func (l *ledger) demand(p *podInfo) {
	if p.devices == nil {
		delete(l.claimPods, p.UID)
		return
	}
	l.claimPods[p.UID] = true
	p.devices.demand = l.devices.Demand(p.devices.refs)
	p.Requests.GPU = p.devices.base + p.devices.demand.GPUs
	p.ClaimsErr = p.devices.demand.Err
	p.DevicesRefused = nil // what the allocator refused was of other claims or other devices
	p.GPUClass = ""
	if d := p.devices.demand; p.devices.base == 0 && len(d.Classes) == 1 {
		p.GPUClass = d.Classes[0]
	}
	if claim := p.devices.demand.NVLinkDomain; claim != "" && p.Topology.Key == "" && len(p.Topology.Layers) == 0 && p.Topology.Tier == 0 {
		// Its ComputeDomain's IMEX channel works inside one NVLink domain only.
		p.Topology = gangspec.Topology{Key: gpu.LabelGPUClique, Required: true,
			Source: claim + " (a ComputeDomain's channel, class " + dra.ComputeDomainChannelClass + ")"}
	}
}

// demandAgain works out the demand of every pod of namespace ("" for all) that names claims, after
// a claim, a template or a class changed.
func (l *ledger) demandAgain(namespace string) {
	for uid := range l.claimPods {
		p := l.pods[uid]
		if p == nil || (namespace != "" && p.Namespace != namespace) {
			continue
		}
		l.release(p)
		l.demand(p)
		l.take(p)
		l.podChanged(p.UID)
		if p.Gang != "" {
			l.gangChanged(p.Gang)
		}
	}
}

// shapeGPUs makes a node's GPU capacity and topology from its device-plugin GPUs (node, nil when
// only its DRA devices changed) and its DRA devices.
func (l *ledger) shapeGPUs(n *nodeInfo, node *corev1.Node) {
	n.allocatable = n.nodeAllocatable
	n.allocatable.GPU += n.dra.gpus
	switch {
	case n.nodeAllocatable.GPU > 0:
		if node != nil {
			n.topo, n.topoSource, n.topoErr = gpu.FromNode(node)
		}
	case n.dra.gpus > 0:
		wiring := make([]gpu.DeviceWiring, len(n.dra.devices))
		for i, d := range n.dra.devices {
			wiring[i] = gpu.DeviceWiring{PCIeRoot: d.PCIeRoot, Parent: d.Parent}
		}
		n.topo, n.topoSource, n.topoErr = gpu.FromDevices(wiring), gpu.SourceDRA, nil
	default:
		n.topo, n.topoSource, n.topoErr = nil, gpu.SourceNone, nil
	}
	n.gpuIndices = nil
	if n.topo != nil {
		n.gpuIndices = n.topo.Indices()
	}
}

// refreshDevices takes in a node's DRA devices and the claims allocated there anew, once they
// changed; a node whose Node object lockstep has not seen yet takes them when it arrives
// (upsertNode), in whichever order the informers deliver the two.
func (l *ledger) refreshDevices(name string) {
	n, ok := l.nodes[name]
	if !ok {
		return
	}
	l.countSchedulable(n, -1)
	l.takeDevices(n)
	l.shapeGPUs(n, nil)
	l.countSchedulable(n, 1)
}

// takeDevices reads the node's DRA GPUs from the inventory and counts its orphans.
func (l *ledger) takeDevices(n *nodeInfo) {
	n.dra.devices, n.dra.gpus = nil, 0
	if g := l.devices.Node(n.name); g != nil {
		n.dra.devices, n.dra.gpus = g.Devices, int64(len(g.Devices))
	}
	l.countOrphans(n)
}

// countOrphans counts anew the node's devices that claims take for no pod the ledger counts: a
// bound pod counts its claims in its requests, and a gang member's claims are its reservation's
// while it lasts and given back after (releaseHeld).
func (l *ledger) countOrphans(n *nodeInfo) {
	n.requested.GPU -= n.dra.orphaned
	n.gpus.unknown -= n.dra.orphaned
	n.dra.orphaned = 0
	for _, c := range l.devices.AllocatedOn(n.name) {
		if !l.countsClaim(c) {
			n.dra.orphaned += l.devices.GPUsOf(c, n.name)
		}
	}
	n.requested.GPU += n.dra.orphaned
	n.gpus.unknown += n.dra.orphaned
	l.nodeChanged(n.name)
}

func (l *ledger) countsClaim(c *dra.Claim) bool {
	for _, uid := range consumers(c) {
		if p := l.pods[uid]; p != nil && (p.Holds() || p.Gang != "") {
			return true
		}
	}
	return false
}

func consumers(c *dra.Claim) []types.UID {
	out := slices.Clone(c.ReservedFor)
	if c.Owner != "" {
		out = append(out, c.Owner)
	}
	return out
}

// devicesMoved counts the orphans of the nodes a pod's change touches again: where it was, where
// it is, and where its claims are allocated.
func (l *ledger) devicesMoved(prev, next *podInfo) {
	var nodes []string
	for _, p := range []*podInfo{prev, next} {
		if p == nil || (p.devices == nil && !p.Holds()) {
			continue
		}
		nodes = append(nodes, p.Node)
		if p.devices != nil {
			for _, c := range p.devices.demand.Claims {
				if claim := l.devices.Claim(c.Namespace, c.Name); claim != nil {
					for _, k := range claim.Allocated {
						nodes = append(nodes, l.devices.DeviceNode(k))
					}
				}
			}
		}
	}
	slices.Sort(nodes)
	for _, name := range slices.Compact(nodes) {
		if n := l.nodes[name]; n != nil && n.dra.gpus > 0 {
			l.countOrphans(n)
		}
	}
}

// UpdateDevices takes in a change to what DRA publishes (package drawatch): change applies it to
// the inventory and returns the nodes whose devices or allocations it changed. namespace is the
// changed object's, "" for a cluster-wide one (a class, a slice): the demand of the pods whose
// claims it may touch is worked out again.
func (m *Manager) UpdateDevices(namespace string, change func(*dra.Inventory) []string) {
	m.locked(func() {
		l := m.ledger
		before := l.devices.DemandChanges()
		for _, node := range change(l.devices) {
			l.refreshDevices(node)
		}
		if l.devices.DemandChanges() != before {
			l.demandAgain(namespace)
		}
	})
}

// devicesChecked is a member's admission once DRA's allocator agrees with its plan: a new
// reservation whose claims do not fit some node is planned again without it, at most
// maxDevicePlans times, and a gang no plan of which fits waits with the allocator's reason rather
// than the counts' (which, every refused node ruled out, would say no node has room). Under the
// lock, as the rest of filter.
func devicesChecked(l *ledger, book *reservationBook, snaps *snapshots, p *decide.Pod, gang string, a decide.Admission, offered []string) decide.Admission {
	why := ""
	for try := 1; a.Reserve != nil; try++ {
		if why = l.refuseDevices(a.Reserve, book); why == "" {
			return withClassProblem(l, p, a)
		}
		if try == maxDevicePlans {
			break
		}
		s := snaps.current()
		a = s.Admit(s.Pods[p.UID], offered)
	}
	if why == "" {
		return withClassProblem(l, p, a)
	}
	return decide.Admission{Slot: -1, Wait: fmt.Sprintf("gang %s: %s", gang, why), Want: a.Want}
}

// withClassProblem adds to a waiting member's reason what is wrong with the class of its GPUs,
// a class that selects none of the devices published, say: no capacity freeing would help it.
func withClassProblem(l *ledger, p *decide.Pod, a decide.Admission) decide.Admission {
	if a.Wait == "" || p.GPUClass == "" {
		return a
	}
	if problem := l.devices.ClassProblem(p.GPUClass); problem != "" {
		a.Wait += "; " + problem
	}
	return a
}

// maxDevicePlans bounds how often one filter call plans a gang again after the allocator
// refused nodes of a plan: each try rules out what it refused, and a plan the counts allow that
// the allocator refuses three times over is better explained by the counts' reason.
const maxDevicePlans = 3

// refuseDevices asks DRA's structured allocator whether the claims of the members a new
// reservation plans on each node fit there, beside the claims allocated and the devices other
// live reservations were found on. It rules the nodes that do not fit out for their members
// (DevicesRefused) and says why the first did not, "" when every node fits; a plan that fits
// keeps the devices it was found on for the gang, so that the next gang's plan leaves them alone.
func (l *ledger) refuseDevices(res *decide.Reservation, book *reservationBook) string {
	byNode := map[string][]*podInfo{}
	for _, s := range res.Slots {
		if p := l.pods[s.PlannedFor]; p != nil && p.devices != nil && len(p.devices.demand.Claims) > 0 {
			byNode[s.Node] = append(byNode[s.Node], p)
		}
	}
	if len(byNode) == 0 {
		return ""
	}
	held := l.devicesHeld(res.Gang, book)
	var took []dra.DeviceKey
	refused := ""
	for _, node := range sortedKeys(byNode) {
		n := l.nodes[node]
		if n == nil || n.object == nil {
			continue
		}
		var claims []*resourceapi.ResourceClaim
		for _, p := range byNode[node] {
			claims = append(claims, p.devices.demand.Claims...)
		}
		got, err := l.devices.Fits(context.Background(), n.object, claims, append(held, took...))
		if err == nil {
			took = append(took, got...)
			continue
		}
		if refused == "" {
			refused = err.Error()
		}
		for _, p := range byNode[node] {
			next := maps.Clone(p.DevicesRefused)
			if next == nil {
				next = map[string]string{}
			}
			next[node] = err.Error()
			p.DevicesRefused = next // replaced, never written into: the snapshot shares the old one
			l.podChanged(p.UID)
		}
	}
	if refused == "" {
		l.heldDevices[res.Gang] = took
	}
	return refused
}

// devicesHeld are the devices the allocator found for other gangs' live reservations.
func (l *ledger) devicesHeld(except string, book *reservationBook) []dra.DeviceKey {
	var out []dra.DeviceKey
	for gang, keys := range l.heldDevices {
		switch {
		case book.live(gang) == nil:
			delete(l.heldDevices, gang)
		case gang != except:
			out = append(out, keys...)
		}
	}
	return out
}

func sortedKeys[V any](m map[string]V) []string {
	out := make([]string, 0, len(m))
	for k := range m {
		out = append(out, k)
	}
	slices.Sort(out)
	return out
}

// draPools are the node's DRA GPUs by pool, for /debug/nodes.
func (l *ledger) draPools(node string) []views.DRAPool {
	g := l.devices.Node(node)
	if g == nil {
		return nil
	}
	var out []views.DRAPool
	for _, d := range g.Devices {
		if len(out) == 0 || out[len(out)-1].Driver != d.Key.Driver || out[len(out)-1].Pool != d.Key.Pool {
			out = append(out, views.DRAPool{Driver: d.Key.Driver, Pool: d.Key.Pool})
		}
		pool := &out[len(out)-1]
		pool.GPUs++
		if l.devices.TakenBy(d.Key) == "" {
			pool.Free++
		}
		for _, c := range d.Classes {
			if !slices.Contains(pool.Classes, c) {
				pool.Classes = append(pool.Classes, c)
			}
		}
	}
	for i := range out {
		slices.Sort(out[i].Classes)
	}
	return out
}
