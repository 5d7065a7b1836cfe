package gpu

import (
	"strings"
	"sync"
)

// DeviceWiring is what a DRA driver publishes of where one GPU sits: the standard attribute
// resource.kubernetes.io/pcieRoot, and for a MIG device the GPU it is carved from. Drivers
// publish no GPU-to-GPU NVLink matrix; a node's NVLink domain is a label (package fabric).
type DeviceWiring struct {
	PCIeRoot, Parent string
}

// FromDevices is the topology of a node whose GPUs are DRA devices, indices 0..n-1 in the order
// given: two MIG devices of one GPU are joined as closely as two GPUs on one NVLink bridge (they
// share the GPU's memory), two devices under one PCIe root as PXB, any others as SYS. Nodes
// wired alike share one Topology, and with it the scorer's caches.
func FromDevices(devices []DeviceWiring) *Topology {
	n := len(devices)
	if n == 0 || n > MaxGPUs {
		return nil
	}
	key := wiringKey(devices)
	if t, ok := deviceTopologies.Load(key); ok {
		return t.(*Topology)
	}
	t, err := newFromFunc(n, func(a, b int) Link {
		da, db := devices[a], devices[b]
		switch {
		case da.Parent != "" && da.Parent == db.Parent:
			return NVLink(12)
		case da.PCIeRoot != "" && da.PCIeRoot == db.PCIeRoot:
			return LinkPXB
		}
		return LinkSYS
	})
	if err != nil {
		return nil // n was checked
	}
	actual, _ := deviceTopologies.LoadOrStore(key, t)
	return actual.(*Topology)
}

// deviceTopologies caches FromDevices by the node's wiring (wiringKey): nodes of one model share
// an entry, so the cache holds as many as the cluster has kinds of node.
var deviceTopologies sync.Map

// wiringKey says which devices share a root or a parent, not what the roots are called: every
// DGX of a cluster then has one key.
func wiringKey(devices []DeviceWiring) string {
	roots, parents := map[string]int{}, map[string]int{}
	var b strings.Builder
	for _, d := range devices {
		b.WriteString(class(roots, d.PCIeRoot))
		b.WriteByte('/')
		b.WriteString(class(parents, d.Parent))
		b.WriteByte(',')
	}
	return b.String()
}

func class(seen map[string]int, v string) string {
	if v == "" {
		return "-"
	}
	if _, ok := seen[v]; !ok {
		seen[v] = len(seen)
	}
	return string(rune('a'+seen[v]%26)) + strings.Repeat("'", seen[v]/26)
}
