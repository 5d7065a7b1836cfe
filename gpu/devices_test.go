package gpu

import (
	"testing"

	"github.com/stretchr/testify/require"
)

func TestFromDevices(t *testing.T) {
	devs := []DeviceWiring{{PCIeRoot: "pci0000:00"}, {PCIeRoot: "pci0000:00"}, {PCIeRoot: "pci0000:01"},
		{PCIeRoot: "pci0000:01", Parent: "GPU-3"}, {PCIeRoot: "pci0000:01", Parent: "GPU-3"}}
	topo := FromDevices(devs)
	require.Equal(t, 5, topo.Len())
	link := func(a, b int) Link { l, _ := topo.Link(a, b); return l }
	require.Equal(t, LinkPXB, link(0, 1), "one PCIe root")
	require.Equal(t, LinkSYS, link(1, 2), "across roots")
	require.Equal(t, NVLink(12), link(3, 4), "two MIG devices of one GPU")
	best, _, ok := topo.BestSet([]int{0, 2, 3, 4}, 2)
	require.True(t, ok)
	require.Equal(t, []int{3, 4}, best, "the packer keeps a pair on one GPU")

	other := []DeviceWiring{{PCIeRoot: "pci0001:00"}, {PCIeRoot: "pci0001:00"}, {PCIeRoot: "pci0001:07"},
		{PCIeRoot: "pci0001:07", Parent: "GPU-x"}, {PCIeRoot: "pci0001:07", Parent: "GPU-x"}}
	require.Same(t, topo, FromDevices(other), "a node wired alike shares the topology")
	require.Nil(t, FromDevices(nil))
}
