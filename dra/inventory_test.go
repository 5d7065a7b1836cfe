package dra

import (
	"context"
	"testing"

	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	resourceapi "k8s.io/api/resource/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/lockstep-sched/lockstep/test/lib/builders"
)

// inventoryOf is an inventory with NVIDIA's classes and the slices given.
func inventoryOf(slices ...*resourceapi.ResourceSlice) *Inventory {
	inv := NewInventory(DefaultGPUClasses)
	for _, c := range builders.NVIDIADeviceClasses() {
		inv.SetClass(c)
	}
	for _, s := range slices {
		inv.SetSlice(s)
	}
	return inv
}

func deviceNames(g *NodeGPUs) []string {
	var out []string
	for _, d := range g.Devices {
		out = append(out, d.Key.Name)
	}
	return out
}

func TestNodeGPUsAreTheDevicesOfGPUClasses(t *testing.T) {
	inv := inventoryOf(builders.GPUSlice("n-0", 4).Obj(), builders.GPUSlice("n-1", 2).MIG(1, 3, "1g.10gb", 19).Obj())
	g := inv.Node("n-0")
	require.Equal(t, []string{"gpu-0", "gpu-1", "gpu-2", "gpu-3"}, deviceNames(g))
	require.Equal(t, Device{Key: DeviceKey{"gpu.nvidia.com", "n-0", "gpu-2"}, Classes: []string{"gpu.nvidia.com"},
		UUID: "GPU-n-0-2", PCIeRoot: "pci0000:01"}, g.Devices[2])
	require.Empty(t, g.Problems)

	mig := inv.Node("n-1").Devices[2]
	require.Equal(t, []string{"mig.nvidia.com"}, mig.Classes, "a MIG device is of the MIG class alone")
	require.Equal(t, "GPU-n-1-1", mig.Parent)
	require.Equal(t, []string{"n-0", "n-1"}, inv.Nodes())
}

// A class counts as GPUs when it serves nvidia.com/gpu or is named; another class's devices are
// not GPUs, and a GPU class that selects nothing says so.
func TestWhichClassesCountAsGPUs(t *testing.T) {
	inv := NewInventory(nil)
	classes := builders.NVIDIADeviceClasses()
	nic := &resourceapi.DeviceClass{ObjectMeta: metav1.ObjectMeta{Name: "rdma.example.com"}}
	for _, c := range append(classes, nic) {
		inv.SetClass(c)
	}
	inv.SetSlice(builders.GPUSlice("n-0", 2).Obj())
	require.True(t, inv.IsGPUClass("gpu.nvidia.com"), "its extendedResourceName is nvidia.com/gpu")
	require.False(t, inv.IsGPUClass("mig.nvidia.com"), "not named here, and it serves no extended resource")
	require.False(t, inv.IsGPUClass("rdma.example.com"))
	require.Equal(t, "gpu.nvidia.com", inv.ExtendedGPUClass())
	require.Equal(t, []string{"gpu.nvidia.com"}, inv.Node("n-0").Devices[0].Classes, "a class of no selectors selects every device, but is no GPU class")

	named := NewInventory([]string{"h100.example.com"})
	named.SetClass(&resourceapi.DeviceClass{ObjectMeta: metav1.ObjectMeta{Name: "h100.example.com"},
		Spec: resourceapi.DeviceClassSpec{Selectors: []resourceapi.DeviceSelector{{CEL: &resourceapi.CELDeviceSelector{
			Expression: "device.attributes['gpu.nvidia.com'].productName.startsWith('NVIDIA H100')"}}}}})
	named.SetSlice(builders.GPUSlice("n-0", 2).Obj())
	require.Empty(t, named.Node("n-0").Devices, "its selector selects no A100")
	require.Equal(t, "DeviceClass h100.example.com: spec.selectors select none of the devices the ResourceSlices publish", named.ClassProblem("h100.example.com"))

	named.SetClass(&resourceapi.DeviceClass{ObjectMeta: metav1.ObjectMeta{Name: "h100.example.com"},
		Spec: resourceapi.DeviceClassSpec{Selectors: []resourceapi.DeviceSelector{{CEL: &resourceapi.CELDeviceSelector{Expression: "device.nope("}}}}})
	require.Contains(t, named.ClassProblem("h100.example.com"), "DeviceClass h100.example.com: spec.selectors[0].cel.expression: ")
}

// A pool being replaced by the driver counts its devices once every slice of its newest
// generation is there, and the node says why meanwhile.
func TestPoolMidUpdate(t *testing.T) {
	inv := inventoryOf(builders.GPUSlice("n-0", 2).Obj())
	require.Len(t, inv.Node("n-0").Devices, 2)

	nodes := inv.SetSlice(builders.GPUSlice("n-0", 4).Name("n-0-a").Pool(2, 2).Obj())
	require.Equal(t, []string{"n-0"}, nodes)
	g := inv.Node("n-0")
	require.Empty(t, g.Devices, "generation 1 is superseded, generation 2 is not whole")
	require.Equal(t, []string{"ResourceSlice pool gpu.nvidia.com/n-0: 1 of the 2 slices of generation 2 are published (spec.pool.resourceSliceCount): the pool is being updated, and its devices count once it is whole"}, g.Problems)

	inv.SetSlice(builders.GPUSlice("n-0", 1).Name("n-0-b").Pool(2, 2).Obj())
	inv.DeleteSlice("n-0-gpu.nvidia.com")
	require.Len(t, inv.Node("n-0").Devices, 5)
	require.Empty(t, inv.Node("n-0").Problems)

	inv.DeleteSlice("n-0-a")
	inv.DeleteSlice("n-0-b")
	require.Nil(t, inv.Node("n-0"))
}

func TestAllocationsTakeDevices(t *testing.T) {
	inv := inventoryOf(builders.GPUSlice("n-0", 4).Obj())
	pod := builders.Pod("ns", "w-0").Obj()
	claim := builders.Allocated(builders.Claim("ns", "w-0-gpus", "gpu.nvidia.com", 2), "n-0", []string{"gpu-0", "gpu-1"}, pod)
	require.Equal(t, []string{"n-0"}, inv.SetClaim(claim))
	require.Equal(t, "ns/w-0-gpus", inv.TakenBy(DeviceKey{"gpu.nvidia.com", "n-0", "gpu-1"}))
	require.Equal(t, int64(2), inv.FreeOfClass("n-0", "gpu.nvidia.com", nil))
	require.Equal(t, int64(1), inv.FreeOfClass("n-0", "gpu.nvidia.com", []DeviceKey{{"gpu.nvidia.com", "n-0", "gpu-3"}}))
	on := inv.AllocatedOn("n-0")
	require.Len(t, on, 1)
	require.Equal(t, int64(2), inv.GPUsOf(on[0], "n-0"))
	require.Equal(t, []string{"n-0"}, inv.DeleteClaim("ns", "w-0-gpus"))
	require.Equal(t, int64(4), inv.FreeOfClass("n-0", "gpu.nvidia.com", nil))
}

func TestDemand(t *testing.T) {
	inv := inventoryOf(builders.GPUSlice("n-0", 4).Obj())
	inv.SetTemplate(builders.ClaimTemplate("ns", "two-gpus", "gpu.nvidia.com", 2))
	inv.SetTemplate(builders.ClaimTemplate("ns", "wrong-class", "gpu.example.com", 1))
	other := builders.Pod("ns", "other").Obj()
	inv.SetClaim(builders.Allocated(builders.Claim("ns", "shared", "gpu.nvidia.com", 1), "n-0", []string{"gpu-3"}, other))
	inv.SetClaim(builders.Claim("ns", "shared-unallocated", "gpu.nvidia.com", 1))
	firstAvailable := builders.Claim("ns", "either", "gpu.nvidia.com", 1)
	firstAvailable.Spec.Devices.Requests[0] = resourceapi.DeviceRequest{Name: "gpus", FirstAvailable: []resourceapi.DeviceSubRequest{
		{Name: "whole", DeviceClassName: "gpu.nvidia.com", AllocationMode: resourceapi.DeviceAllocationModeExactCount, Count: 2},
		{Name: "slices", DeviceClassName: "mig.nvidia.com", AllocationMode: resourceapi.DeviceAllocationModeExactCount, Count: 1}}}
	inv.SetClaim(firstAvailable)
	all := builders.Claim("ns", "all", "gpu.nvidia.com", 0)
	all.Spec.Devices.Requests[0].Exactly.AllocationMode = resourceapi.DeviceAllocationModeAll
	inv.SetClaim(all)

	cases := []struct {
		name     string
		pod      *corev1.Pod
		want     Demand
		wantErr  string
		claims   int
		awaiting bool
	}{
		{name: "a template whose claim is not made yet", pod: builders.Pod("ns", "w-0").ClaimFromTemplate("two-gpus").Obj(),
			want: Demand{GPUs: 2, Classes: []string{"gpu.nvidia.com"}}, claims: 1},
		{name: "the claim made from it", pod: func() *corev1.Pod {
			p := builders.Pod("ns", "w-1").ClaimFromTemplate("two-gpus").ClaimCreated("w-1-gpus").Obj()
			inv.SetClaim(builders.OwnedBy(builders.Claim("ns", "w-1-gpus", "gpu.nvidia.com", 3), p))
			return p
		}(), want: Demand{GPUs: 3, Classes: []string{"gpu.nvidia.com"}}, claims: 1},
		{name: "a shared claim another pod holds asks nothing more", pod: builders.Pod("ns", "w-2").SharedClaim("shared").Obj(), claims: 1},
		{name: "a shared claim nobody holds yet", pod: builders.Pod("ns", "w-3").SharedClaim("shared-unallocated").Obj(),
			want: Demand{GPUs: 1, Classes: []string{"gpu.nvidia.com"}}, claims: 1},
		{name: "first available: the fewest any alternative asks", pod: builders.Pod("ns", "w-4").SharedClaim("either").Obj(),
			want: Demand{GPUs: 1, Classes: []string{"mig.nvidia.com"}}, claims: 1},
		{name: "all of a class counts one; the node decides how many", pod: builders.Pod("ns", "w-5").SharedClaim("all").Obj(),
			want: Demand{GPUs: 1, Classes: []string{"gpu.nvidia.com"}}, claims: 1},
		{name: "a claim not made yet", pod: builders.Pod("ns", "w-6").SharedClaim("later").Obj(), awaiting: true},
		{name: "a class that does not exist", pod: builders.Pod("ns", "w-7").ClaimFromTemplate("wrong-class").Obj(), claims: 1,
			wantErr: `a ResourceClaim to be made from ResourceClaimTemplate ns/wrong-class: spec.devices.requests[0].exactly.deviceClassName="gpu.example.com": no such DeviceClass`},
		{name: "no claims", pod: builders.Pod("ns", "w-8").GPU(2).Obj()},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			got := inv.Demand(tc.pod)
			if tc.wantErr != "" {
				require.EqualError(t, got.Err, tc.wantErr)
			} else {
				require.NoError(t, got.Err)
			}
			require.Len(t, got.Claims, tc.claims)
			require.Equal(t, tc.awaiting, got.Awaiting != "", got.Awaiting)
			got.Claims, got.Err, got.Awaiting = nil, nil, ""
			require.Equal(t, tc.want, got)
		})
	}
}

// Fits is the structured allocator's answer, CEL selectors included, beside what allocations
// take and what lockstep holds for others.
func TestFits(t *testing.T) {
	ctx := context.Background()
	inv := inventoryOf(builders.GPUSlice("n-0", 4).Obj(), builders.GPUSlice("n-1", 4).Obj())
	node := &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: "n-0", Labels: map[string]string{"kubernetes.io/hostname": "n-0"}}}
	two := func(name string) *resourceapi.ResourceClaim { return builders.Claim("ns", name, "gpu.nvidia.com", 2) }

	took, err := inv.Fits(ctx, node, []*resourceapi.ResourceClaim{two("a"), two("b")}, nil)
	require.NoError(t, err)
	require.Len(t, took, 4)

	_, err = inv.Fits(ctx, node, []*resourceapi.ResourceClaim{two("a"), two("b")}, []DeviceKey{{"gpu.nvidia.com", "n-0", "gpu-0"}})
	require.EqualError(t, err, "node n-0 has not the devices ResourceClaim ns/a, ResourceClaim ns/b ask (3 of class gpu.nvidia.com free)")

	inv.SetClaim(builders.Allocated(builders.Claim("ns", "taken", "gpu.nvidia.com", 3), "n-0", []string{"gpu-0", "gpu-1", "gpu-2"}))
	_, err = inv.Fits(ctx, node, []*resourceapi.ResourceClaim{two("a")}, nil)
	require.ErrorContains(t, err, "(1 of class gpu.nvidia.com free)")

	h100 := two("h100")
	h100.Spec.Devices.Requests[0].Exactly.Count = 1
	h100.Spec.Devices.Requests[0].Exactly.Selectors = []resourceapi.DeviceSelector{{CEL: &resourceapi.CELDeviceSelector{
		Expression: "device.attributes['gpu.nvidia.com'].productName == 'NVIDIA H100 80GB HBM3'"}}}
	_, err = inv.Fits(ctx, node, []*resourceapi.ResourceClaim{h100}, nil)
	require.Error(t, err, "the one free GPU is an A100")

	elsewhere := builders.Allocated(two("elsewhere"), "n-1", []string{"gpu-0", "gpu-1"})
	_, err = inv.Fits(ctx, node, []*resourceapi.ResourceClaim{elsewhere}, nil)
	require.EqualError(t, err, "ResourceClaim ns/elsewhere is allocated on node n-1 already")
	took, err = inv.Fits(ctx, &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: "n-1"}}, []*resourceapi.ResourceClaim{elsewhere}, nil)
	require.NoError(t, err)
	require.Empty(t, took, "allocated already: it takes nothing more")
}
