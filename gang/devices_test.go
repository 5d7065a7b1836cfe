package gang

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	resourceapi "k8s.io/api/resource/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/ptr"

	"github.com/lockstep-sched/lockstep/dra"
	"github.com/lockstep-sched/lockstep/test/lib/builders"
	"github.com/lockstep-sched/lockstep/views"
)

// draNodes are count nodes of a driver's slices alone: no device-plugin GPUs in allocatable, gpus
// DRA GPUs each, NVIDIA's classes installed.
func draNodes(e *env, prefix string, count, gpus int) {
	for i := range count {
		name := fmt.Sprintf("%s-%d", prefix, i)
		e.m.UpsertNode(builders.Node(name).CPU("64").Memory("256Gi").Pods(110).Obj())
		e.nodes = append(e.nodes, name)
	}
	e.m.UpdateDevices("", func(inv *dra.Inventory) []string {
		var nodes []string
		for _, c := range builders.NVIDIADeviceClasses() {
			nodes = append(nodes, inv.SetClass(c)...)
		}
		for i := range count {
			nodes = append(nodes, inv.SetSlice(builders.GPUSlice(fmt.Sprintf("%s-%d", prefix, i), gpus).Obj())...)
		}
		return nodes
	})
}

func (e *env) setTemplate(t *resourceapi.ResourceClaimTemplate) {
	e.m.UpdateDevices(t.Namespace, func(inv *dra.Inventory) []string { inv.SetTemplate(t); return nil })
}

func (e *env) setClaim(c *resourceapi.ResourceClaim) {
	e.m.UpdateDevices(c.Namespace, func(inv *dra.Inventory) []string { return inv.SetClaim(c) })
}

func (e *env) node(name string) views.NodeStatus {
	for _, n := range e.m.Nodes(false) {
		if n.Name == name {
			return n
		}
	}
	e.t.Fatalf("no node %s", name)
	return views.NodeStatus{}
}

// A node of DRA GPUs alone has them as GPUs: pods asking nvidia.com/gpu (which a DeviceClass
// serves there) and gangs of claims are counted and planned on them as on device-plugin GPUs.
func TestDRAGPUsAreGPUs(t *testing.T) {
	e := newEnv(t, testConfig())
	draNodes(e, "n", 2, 4)
	require.Equal(t, int64(4), e.node("n-0").GPUs)
	require.Equal(t, "dra", e.node("n-0").TopologySource)

	fits := members("default", "fits", "f", 2, 2, 4)
	e.add(fits...)
	require.NotEmpty(t, e.filter(fits[0]).Feasible, "two 4-GPU members fit two 4-GPU DRA nodes")

	e.setTemplate(builders.ClaimTemplate("default", "two-gpus", builders.GPUDeviceClass, 2))
	big := members("default", "big", "b", 5, 5, 0, func(b *builders.PodBuilder) { b.ClaimFromTemplate("two-gpus") })
	e.add(big...)
	r := e.filter(big[0])
	require.Empty(t, r.Feasible)
	require.Equal(t, "gang default/big: 5 members need 10 devices of class gpu.nvidia.com, 0 free; gang default/fits holds 8 in reservations", r.Failed["n-0"])
}

// A claim allocated for no pod lockstep counts takes its devices as a pod would; a claim that
// names a missing class refuses its member by field.
func TestClaimsTakeDevicesAndBadClaimsRefuse(t *testing.T) {
	e := newEnv(t, testConfig())
	draNodes(e, "n", 1, 4)
	e.setClaim(builders.Allocated(builders.Claim("other", "theirs", builders.GPUDeviceClass, 3), "n-0", []string{"gpu-0", "gpu-1", "gpu-2"}))
	require.Equal(t, int64(1), e.node("n-0").GPUsFree, "another scheduler's claim")
	e.m.UpdateDevices("other", func(inv *dra.Inventory) []string { return inv.DeleteClaim("other", "theirs") })
	require.Equal(t, int64(4), e.node("n-0").GPUsFree)

	e.setTemplate(builders.ClaimTemplate("default", "typo", "gpu.nvidia.co", 1))
	bad := members("default", "bad", "w", 1, 1, 0, func(b *builders.PodBuilder) { b.ClaimFromTemplate("typo") })
	e.add(bad...)
	require.Equal(t, `a ResourceClaim to be made from ResourceClaimTemplate default/typo: spec.devices.requests[0].exactly.deviceClassName="gpu.nvidia.co": no such DeviceClass`,
		e.filter(bad[0]).Failed["n-0"])
}

// A waiting member's allocated claim is its reservation's while that lasts, and given back after:
// devices taken for a gang that is not running go to the next job.
func TestDevicesOfAWaitingGangAreGivenBack(t *testing.T) {
	cfg := testConfig()
	rel := &fakeReleaser{released: make(chan string, 10)}
	cfg.ClaimReleaser = rel
	e := newEnv(t, cfg)
	draNodes(e, "n", 2, 2)
	e.setTemplate(builders.ClaimTemplate("default", "two-gpus", builders.GPUDeviceClass, 2))
	pods := members("default", "ring", "r", 2, 2, 0, func(b *builders.PodBuilder) { b.ClaimFromTemplate("two-gpus") })
	e.add(pods...)
	node := e.filterOne(pods[0])

	// The scheduler allocated r-0's claim in its cycle and holds it at bind.
	held := builders.Pod("default", "r-0").ClaimFromTemplate("two-gpus").ClaimCreated("r-0-gpus").Gang("ring", 2).Created(t0).Obj()
	claim := builders.OwnedBy(builders.Allocated(builders.Claim("default", "r-0-gpus", builders.GPUDeviceClass, 2), node, []string{"gpu-0", "gpu-1"}, held), held)
	e.add(held)
	e.setClaim(claim)
	var fx effects
	e.m.locked(func() { fx.releases = e.m.ledger.releases(e.m.book, e.m.now(), &fx) })
	require.Empty(t, fx.releases, "the reservation holds r-0, and its devices with it")
	require.Equal(t, int64(2), e.node(node).GPUsFree, "r-0's devices are its slot's, not taken a second time by its claim")

	e.m.locked(func() {
		for _, res := range e.m.book.reservations() {
			e.m.book.release(e.m.book.live(res.Gang))
		}
	})
	e.m.checkWaitingGangs()
	require.Equal(t, "default/r-0-gpus", recv(t, rel.released, "a release"))
	e.waitEvent(corev1.EventTypeNormal, "GangDevicesReleased", "default/r-0-gpus")
}

type fakeReleaser struct{ released chan string }

func (f *fakeReleaser) Release(_ context.Context, namespace, name string, _ types.UID, _ []types.UID) error {
	f.released <- namespace + "/" + name
	return nil
}

// A member of DRA devices held at bind stops counting toward its quorum when its bind answers:
// the scheduler then takes back its claims' reservation, so lockstep must not bind it alone.
func TestHeldMemberOfDevicesComesBackToBind(t *testing.T) {
	cfg := testConfig()
	cfg.BindWait = 50 * time.Millisecond
	e := newEnv(t, cfg)
	draNodes(e, "n", 2, 2)
	pods := members("default", "ring", "r", 2, 2, 2)
	e.add(pods...)
	node := e.filterOne(pods[0])
	err := e.bind(pods[0], node)
	require.ErrorIs(t, err, ErrAwaitingQuorum)
	require.Contains(t, err.Error(), "binds when it comes back with the quorum")
	require.Equal(t, "Reserved", e.memberStates("default", "ring")["default/r-0"], "no longer waiting at bind")
}

// The counts say a gang fits, the allocator that kube-scheduler runs says its claims do not (their
// selector asks an H100, the nodes have A100s): the gang waits with the allocator's reason, and
// nothing is reserved for it, so kube-scheduler is never asked to allocate for it.
func TestAllocatorRefusesWhatCountsAllow(t *testing.T) {
	e := newEnv(t, testConfig())
	draNodes(e, "n", 2, 4)
	h100 := builders.ClaimTemplate("default", "h100", builders.GPUDeviceClass, 2)
	h100.Spec.Spec.Devices.Requests[0].Exactly.Selectors = []resourceapi.DeviceSelector{{CEL: &resourceapi.CELDeviceSelector{
		Expression: "device.attributes['gpu.nvidia.com'].productName == 'NVIDIA H100 80GB HBM3'"}}}
	e.setTemplate(h100)
	e.setTemplate(builders.ClaimTemplate("default", "any", builders.GPUDeviceClass, 2))
	pods := members("default", "picky", "p", 2, 2, 0, func(b *builders.PodBuilder) { b.ClaimFromTemplate("h100") })
	e.add(pods...)
	r := e.filter(pods[0])
	require.Empty(t, r.Feasible)
	require.Contains(t, r.Failed["n-0"], "gang default/picky: node n-")
	require.Contains(t, r.Failed["n-0"], "has not the devices a ResourceClaim to be made from ResourceClaimTemplate default/h100")
	require.Equal(t, views.PhaseWaiting, e.status("default", "picky").Phase)

	plain := members("default", "plain", "q", 2, 2, 0, func(b *builders.PodBuilder) { b.ClaimFromTemplate("any") })
	e.add(plain...)
	require.NotEmpty(t, e.filter(plain[0]).Feasible, "the same gang without the selector fits")
}

// /debug/nodes shows a node's DRA GPUs by pool, a pool being updated, and slices of a node that
// does not exist; a gang asking a class that selects nothing says so.
func TestDRAInNodesAndReasons(t *testing.T) {
	e := newEnv(t, testConfig())
	draNodes(e, "n", 1, 4)
	e.setClaim(builders.Allocated(builders.Claim("other", "theirs", builders.GPUDeviceClass, 1), "n-0", []string{"gpu-0"}))
	e.m.UpdateDevices("", func(inv *dra.Inventory) []string {
		nodes := inv.SetSlice(builders.GPUSlice("ghost", 2).Obj())
		nodes = append(nodes, inv.SetSlice(builders.GPUSlice("n-0", 4).Pool(1, 2).Obj())...)
		return append(nodes, inv.SetSlice(builders.GPUSlice("n-0", 0).MIG(3, 2, "3g.40gb", 9).Name("n-0-extra").Pool(1, 2).Obj())...)
	})
	n := e.node("n-0")
	require.Equal(t, []views.DRAPool{{Driver: "gpu.nvidia.com", Pool: "n-0", Classes: []string{"gpu.nvidia.com", "mig.nvidia.com"}, GPUs: 6, Free: 5}}, n.DRA,
		"the pool's second slice joins it")
	require.Equal(t, "ResourceSlices publish devices of node ghost, which does not exist: they count nowhere", e.node("ghost").Problems[0])

	e.m.UpdateDevices("", func(inv *dra.Inventory) []string {
		return inv.SetSlice(builders.GPUSlice("n-0", 0).MIG(3, 2, "3g.40gb", 9).Name("n-0-extra").Pool(2, 2).Obj())
	})
	problems := e.m.Nodes(true)
	require.Len(t, problems, 2, "the ghost, and n-0 mid-update: %+v", problems)
	require.Contains(t, problems[1].Problems[0], "ResourceSlice pool gpu.nvidia.com/n-0: 1 of the 2 slices of generation 2 are published")

	e.m.UpdateDevices("", func(inv *dra.Inventory) []string {
		return inv.SetClass(&resourceapi.DeviceClass{ObjectMeta: metav1.ObjectMeta{Name: "h100.example.com"},
			Spec: resourceapi.DeviceClassSpec{ExtendedResourceName: ptr.To("nvidia.com/gpu"),
				Selectors: []resourceapi.DeviceSelector{{CEL: &resourceapi.CELDeviceSelector{Expression: "device.attributes['gpu.nvidia.com'].productName == 'H100'"}}}}})
	})
	e.setTemplate(builders.ClaimTemplate("default", "h100", "h100.example.com", 1))
	pods := members("default", "picky", "p", 1, 1, 0, func(b *builders.PodBuilder) { b.ClaimFromTemplate("h100") })
	e.add(pods...)
	require.Contains(t, e.filter(pods[0]).Failed["n-0"], "DeviceClass h100.example.com: spec.selectors select none of the devices the ResourceSlices publish")
}

// The informers deliver a node's slices and its Node object in either order.
func TestSlicesBeforeTheirNode(t *testing.T) {
	e := newEnv(t, testConfig())
	e.m.UpdateDevices("", func(inv *dra.Inventory) []string {
		var nodes []string
		for _, c := range builders.NVIDIADeviceClasses() {
			nodes = append(nodes, inv.SetClass(c)...)
		}
		return append(nodes, inv.SetSlice(builders.GPUSlice("late", 4).Obj())...)
	})
	e.m.UpsertNode(builders.Node("late").CPU("64").Memory("256Gi").Pods(110).Obj())
	require.Equal(t, int64(4), e.node("late").GPUs)
	require.Equal(t, "dra", e.node("late").TopologySource)
}
