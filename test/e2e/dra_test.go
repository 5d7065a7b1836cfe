package e2e

import (
	"context"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	resourceapi "k8s.io/api/resource/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"

	"github.com/lockstep-sched/lockstep/test/lib/builders"
	"github.com/lockstep-sched/lockstep/test/lib/cluster"
	"github.com/lockstep-sched/lockstep/views"
	"github.com/lockstep-sched/lockstep/wellknown"
)

// GPUs from Dynamic Resource Allocation (resource.k8s.io/v1), with kube-scheduler's own
// DynamicResources plugin allocating devices as shipped, kube-controller-manager's
// resourceclaim-controller making pods' claims from their templates and its garbage collector
// removing them. Nodes have no device-plugin GPUs: each publishes its GPUs in a ResourceSlice the
// way NVIDIA's DRA driver's kubelet plugin does (builders.GPUSlice), and NVIDIA's DeviceClasses
// are installed as its chart writes them, gpu.nvidia.com serving nvidia.com/gpu.

var nvidiaClasses sync.Once

// installNVIDIAClasses creates NVIDIA's DeviceClasses once for the suite; they stay, as a driver's
// classes stay installed beside nodes that have none of its devices.
func installNVIDIAClasses(t *testing.T) {
	nvidiaClasses.Do(func() {
		for _, c := range append(builders.NVIDIADeviceClasses(), builders.ComputeDomainChannelDeviceClass()) {
			_, err := env.client.ResourceV1().DeviceClasses().Create(t.Context(), c, metav1.CreateOptions{})
			if !apierrors.IsAlreadyExists(err) {
				require.NoError(t, err)
			}
		}
	})
}

// draNode is one node of a DRA scenario: its labels, the GPU slice its driver publishes, and
// whether the compute-domain plugin publishes its IMEX channel.
type draNode struct {
	labels   map[string]string
	slice    func(node string) *builders.SliceBuilder
	channels bool
}

func draGPUs(n int) draNode {
	return draNode{slice: func(node string) *builders.SliceBuilder { return builders.GPUSlice(node, n) }}
}

// newDRAScenario makes the nodes, publishes their slices (owned by the Node, as the kubelet plugin
// owns them) and waits until lockstep counts every node's GPUs.
func newDRAScenario(t *testing.T, nodes ...draNode) *scenario {
	t.Helper()
	installNVIDIAClasses(t)
	specs := make([]cluster.NodeSpec, len(nodes))
	for i, n := range nodes {
		specs[i] = cluster.NodeSpec{Name: fmt.Sprintf("dra-%d", i), Labels: n.labels}
	}
	s := newScenarioWithNodes(t, specs...)
	want := map[string]int64{}
	for i, name := range s.nodes {
		node, err := env.client.CoreV1().Nodes().Get(s.ctx, name, metav1.GetOptions{})
		require.NoError(t, err)
		slice := nodes[i].slice(name).Obj()
		s.publish(node, slice)
		want[name] = int64(len(slice.Spec.Devices))
		if nodes[i].channels {
			s.publish(node, builders.ChannelSlice(name))
		}
	}
	s.eventually(30*time.Second, "lockstep to count every node's DRA GPUs", func() bool {
		list, err := env.lockstep.Nodes(s.ctx)
		if err != nil {
			return false
		}
		seen := 0
		for _, n := range list {
			if w, ok := want[n.Name]; ok && n.GPUs == w && n.TopologySource == "dra" {
				seen++
			}
		}
		return seen == len(want)
	})
	return s
}

// publish creates a slice of node's, owned by the Node as a kubelet plugin's slices are.
func (s *scenario) publish(node *corev1.Node, slice *resourceapi.ResourceSlice) {
	s.t.Helper()
	slice.OwnerReferences = []metav1.OwnerReference{{APIVersion: "v1", Kind: "Node", Name: node.Name, UID: node.UID, Controller: ptr.To(true)}}
	_, err := env.client.ResourceV1().ResourceSlices().Create(s.ctx, slice, metav1.CreateOptions{})
	require.NoError(s.t, err)
	s.t.Cleanup(func() {
		_ = env.client.ResourceV1().ResourceSlices().Delete(context.Background(), slice.Name, metav1.DeleteOptions{})
	})
}

func (s *scenario) createClaimTemplate(name, class string, count int64) {
	s.t.Helper()
	_, err := env.client.ResourceV1().ResourceClaimTemplates(s.ns).Create(s.ctx, builders.ClaimTemplate(s.ns, name, class, count), metav1.CreateOptions{})
	require.NoError(s.t, err)
}

// claimGang creates count members of gang, each with a claim made from template.
func (s *scenario) claimGang(gang string, count, minAvailable int, template string) {
	s.t.Helper()
	for i := range count {
		s.create(builders.Pod("", fmt.Sprintf("%s-%d", gang, i)).CPU("100m").Gang(gang, minAvailable).ClaimFromTemplate(template).Obj())
	}
}

// allocatedOn is how many devices the scenario's claims are allocated, per node, as the
// apiserver has them.
func (s *scenario) allocated() map[string]int {
	list, err := env.client.ResourceV1().ResourceClaims(s.ns).List(s.ctx, metav1.ListOptions{})
	require.NoError(s.t, err)
	out := map[string]int{}
	for _, c := range list.Items {
		if a := c.Status.Allocation; a != nil {
			for _, r := range a.Devices.Results {
				out[r.Pool]++
			}
		}
	}
	return out
}

func sum(m map[string]int) int {
	n := 0
	for _, v := range m {
		n += v
	}
	return n
}

// The seed pair on 4 nodes x 2 DRA GPUs, pods unchanged from a device-plugin cluster: they ask
// nvidia.com/gpu, which the gpu.nvidia.com class serves where allocatable lacks it. The 5 x 2 job
// binds nothing and says why; the 4 x 2 job binds whole, and the scheduler's claims for it hold
// its 8 devices.
func TestDRAExtendedResourceSeedPair(t *testing.T) {
	s := newDRAScenario(t, draGPUs(2), draGPUs(2), draGPUs(2), draGPUs(2))
	for i := range 5 {
		s.create(podSpec{name: fmt.Sprintf("big-%d", i), gpus: 2, gang: "big", minAvailable: 5}.pod())
	}
	s.eventually(60*time.Second, "lockstep to say why the 5 x 2-GPU job waits", func() bool {
		return s.waitsFor("big", "5 members need 10 nvidia.com/gpu, 8 free")
	})
	for i := range 4 {
		s.create(podSpec{name: fmt.Sprintf("fits-%d", i), gpus: 2, gang: "fits", minAvailable: 4}.pod())
	}
	s.eventually(90*time.Second, "the 4 x 2-GPU job bound whole", func() bool { return s.boundIn("fits-") == 4 })
	s.binds.assertNeverPartial(t, "fits", 4)
	s.eventually(30*time.Second, "its devices allocated, 2 on each node", func() bool { return sum(s.allocated()) == 8 })
	require.Zero(t, s.boundIn("big-"))
}

// The seed pair as ResourceClaimTemplates: each member's claim asks 2 devices of class
// gpu.nvidia.com. The job that cannot fit is refused at filter, so kube-scheduler allocates none
// of its devices; the reason names the class.
func TestDRAClaimTemplateSeedPair(t *testing.T) {
	s := newDRAScenario(t, draGPUs(2), draGPUs(2), draGPUs(2), draGPUs(2))
	s.createClaimTemplate("two-gpus", builders.GPUDeviceClass, 2)
	s.claimGang("big", 5, 5, "two-gpus")
	s.eventually(60*time.Second, "lockstep to say why the 5-member job waits, in devices of its class", func() bool {
		return s.waitsFor("big", "5 members need 10 devices of class gpu.nvidia.com, 8 free")
	})
	require.Zero(t, sum(s.allocated()), "a job that cannot run holds no device")
	s.claimGang("fits", 4, 4, "two-gpus")
	s.eventually(90*time.Second, "the 4-member job bound whole", func() bool { return s.boundIn("fits-") == 4 })
	s.binds.assertNeverPartial(t, "fits", 4)
	require.Equal(t, map[string]int{s.nodes[0]: 2, s.nodes[1]: 2, s.nodes[2]: 2, s.nodes[3]: 2}, s.allocated())
	require.Zero(t, s.boundIn("big-"))
}

// A waiting gang holds no device: a gang whose reservation expires before its quorum (one member
// can never be placed) has had its members' claims allocated while held at bind; lockstep gives
// them back, and the job created after it binds at once.
func TestDRAWaitingGangHoldsNoDevice(t *testing.T) {
	s := newDRAScenario(t, draGPUs(2), draGPUs(2))
	s.createClaimTemplate("two-gpus", builders.GPUDeviceClass, 2)
	for i := range 2 {
		s.create(builders.Pod("", fmt.Sprintf("stuck-%d", i)).CPU("100m").Gang("stuck", 3).WaitingTime("15s").ClaimFromTemplate("two-gpus").Obj())
	}
	s.create(builders.Pod("", "stuck-2").CPU("100m").Gang("stuck", 3).WaitingTime("15s").Affinity(unplaceable).Obj())
	s.eventually(60*time.Second, "the held members' devices allocated by the scheduler", func() bool { return sum(s.allocated()) == 4 })
	s.eventually(60*time.Second, "stuck to time out", func() bool { return s.gangs()["stuck"].Phase == views.PhaseTimedOut })
	s.eventually(30*time.Second, "lockstep to give the devices back", func() bool { return sum(s.allocated()) == 0 })
	require.True(t, s.hasEvent("stuck-0", wellknown.ReasonGangDevicesReleased, "gave back the devices") ||
		s.hasEvent("stuck-1", wellknown.ReasonGangDevicesReleased, "gave back the devices"))

	s.claimGang("next", 2, 2, "two-gpus")
	s.eventually(60*time.Second, "the next job bound whole on the devices given back", func() bool { return s.boundIn("next-") == 2 })
	s.binds.assertNeverPartial(t, "next", 2)
	require.Zero(t, s.boundIn("stuck"))
}

// Two 3 x 2-GPU claim gangs arriving together on 4 nodes x 2 devices: one binds whole, the other
// waits holding nothing; neither deadlocks.
func TestDRAGangsArrivingTogether(t *testing.T) {
	s := newDRAScenario(t, draGPUs(2), draGPUs(2), draGPUs(2), draGPUs(2))
	s.createClaimTemplate("two-gpus", builders.GPUDeviceClass, 2)
	for i := range 3 {
		for _, g := range []string{"a", "b"} {
			s.create(builders.Pod("", fmt.Sprintf("%s-%d", g, i)).CPU("100m").Gang(g, 3).ClaimFromTemplate("two-gpus").Obj())
		}
	}
	s.eventually(90*time.Second, "one gang bound whole", func() bool { return s.boundIn("a-") == 3 || s.boundIn("b-") == 3 })
	s.binds.assertNeverPartial(t, "a", 3)
	s.binds.assertNeverPartial(t, "b", 3)
	waiting := "b"
	if s.boundIn("b-") == 3 {
		waiting = "a"
	}
	s.eventually(30*time.Second, "the other waiting, holding no device", func() bool {
		return s.boundIn(waiting+"-") == 0 && sum(s.allocated()) == 6
	})
}

// Nodes of both kinds: two of device-plugin GPUs, two of DRA GPUs. A 4 x 2-GPU gang asking
// nvidia.com/gpu spans them; lockstep counts both.
func TestDRAAndDevicePluginNodesTogether(t *testing.T) {
	s := newDRAScenario(t, draGPUs(2), draGPUs(2))
	for i := range 2 {
		name := fmt.Sprintf("%s-dp-%d", strings.TrimPrefix(s.ns, "e2e-"), i)
		_, err := env.cluster.CreateNode(s.ctx, cluster.NodeSpec{Name: name, GPUs: 2})
		require.NoError(t, err)
		s.nodes = append(s.nodes, name)
	}
	for i := range 4 {
		s.create(podSpec{name: fmt.Sprintf("mixed-%d", i), gpus: 2, gang: "mixed", minAvailable: 4}.pod())
	}
	s.eventually(90*time.Second, "the gang bound whole over both kinds of node", func() bool { return s.boundIn("mixed-") == 4 })
	s.binds.assertNeverPartial(t, "mixed", 4)
	require.Equal(t, 4, sum(s.allocated()), "the two members on DRA nodes hold 2 devices each")
}

// MIG devices (class mig.nvidia.com): a gang of 4 members asking one MIG device each fits the 7
// slices of one node's GPU, and a gang asking more slices than any node has waits naming the class.
func TestDRAMIGDevices(t *testing.T) {
	s := newDRAScenario(t, draNode{slice: func(node string) *builders.SliceBuilder {
		return builders.GPUSlice(node, 0).MIG(0, 7, "1g.10gb", 19)
	}})
	s.createClaimTemplate("one-mig", builders.MIGDeviceClass, 1)
	s.claimGang("big", 8, 8, "one-mig")
	s.eventually(60*time.Second, "the 8-slice gang to wait naming the class", func() bool {
		return s.waitsFor("big", "8 members need 8 devices of class mig.nvidia.com, 7 free")
	})
	for _, p := range s.pods() {
		s.deletePod(p.Name)
	}
	s.claimGang("small", 4, 4, "one-mig")
	s.eventually(90*time.Second, "the 4-slice gang bound whole", func() bool { return s.boundIn("small-") == 4 })
	s.binds.assertNeverPartial(t, "small", 4)
	require.Equal(t, 4, sum(s.allocated()))
}

// Bad input: a claim naming a class that does not exist refuses its member by field, and the
// other gangs keep working.
func TestDRABadClaimIsRefusedByField(t *testing.T) {
	s := newDRAScenario(t, draGPUs(2))
	s.createClaimTemplate("typo", "gpu.nvidia.co", 1)
	s.create(builders.Pod("", "bad-0").CPU("100m").Gang("bad", 1).ClaimFromTemplate("typo").Obj())
	s.createClaimTemplate("one-gpu", builders.GPUDeviceClass, 1)
	s.claimGang("good", 2, 2, "one-gpu")
	s.eventually(60*time.Second, "the good gang bound", func() bool { return s.boundIn("good-") == 2 })
	g := s.gangs()["bad"]
	if g.Phase == views.PhaseWaiting && len(g.Members) > 0 && g.Members[0].State == "Rejected" {
		require.Contains(t, g.Members[0].Reason, `deviceClassName="gpu.nvidia.co": no such DeviceClass`)
		return
	}
	// kube-scheduler's own DynamicResources plugin refuses the pod before lockstep is asked when
	// the class is missing; its condition then says so.
	s.eventually(60*time.Second, "the pod refused, naming the class", func() bool {
		return strings.Contains(s.schedulingMessage("bad-0"), "gpu.nvidia.co")
	})
	require.Zero(t, s.boundIn("bad-"))
}

// A gang whose claims ask a ComputeDomain's IMEX channel needs one multi-node NVLink domain.
// Each clique has room for one 2-GPU member (its second node has 1 GPU): the channel gang waits,
// saying so, and holds no device, while the same gang without channels binds across the cliques.
func TestDRAGangInsideOneNVLinkClique(t *testing.T) {
	// An NVL72 rack is one NVLink domain: clique a is rack r-a, clique b rack r-b, in one block.
	clique := func(name string, n int) draNode {
		return draNode{labels: map[string]string{cliqueLabel: "cluster-1." + name, rackLabel: "r-" + name, blockLabel: "block-1"}, channels: true,
			slice: func(node string) *builders.SliceBuilder { return builders.GPUSlice(node, n) }}
	}
	s := newDRAScenario(t, clique("a", 2), clique("a", 1), clique("b", 2), clique("b", 1))
	s.createClaimTemplate("two-gpus", builders.GPUDeviceClass, 2)
	_, err := env.client.ResourceV1().ResourceClaimTemplates(s.ns).Create(s.ctx, builders.ChannelClaimTemplate(s.ns, "imex-channel"), metav1.CreateOptions{})
	require.NoError(t, err)
	for i := range 2 {
		s.create(builders.Pod("", fmt.Sprintf("nvl-%d", i)).CPU("100m").Gang("nvl", 2).ClaimFromTemplate("two-gpus").
			NamedClaimFromTemplate("channel", "imex-channel").Obj())
	}
	s.eventually(60*time.Second, "the channel gang to wait for one clique", func() bool {
		return s.waitsFor("nvl", "need one gpu.clique")
	})
	require.Equal(t, "required nvidia.com/gpu.clique", s.gangs()["nvl"].Topology)
	require.Zero(t, sum(s.allocated()), "a gang waiting for its clique holds no device")

	s.claimGang("plain", 2, 2, "two-gpus")
	s.eventually(90*time.Second, "the same gang without channels bound, across the cliques", func() bool { return s.boundIn("plain-") == 2 })
	s.binds.assertNeverPartial(t, "plain", 2)
	require.Zero(t, s.boundIn("nvl-"))
}
