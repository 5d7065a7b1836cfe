package dra

import (
	"context"
	"fmt"
	"slices"
	"sort"

	resourceapi "k8s.io/api/resource/v1"
	"k8s.io/dynamic-resource-allocation/cel"
)

// DeviceKey names a device as an allocation result does.
type DeviceKey struct{ Driver, Pool, Name string }

func (k DeviceKey) String() string { return k.Driver + "/" + k.Pool + "/" + k.Name }

// Device is one GPU a node's ResourceSlices publish.
type Device struct {
	Key DeviceKey
	// Classes are the GPU classes that select it, sorted.
	Classes []string
	// UUID is the GPU's, or the MIG device's, as NVIDIA's driver publishes it; Parent is a MIG
	// device's GPU (its parentUUID), "" for a whole GPU.
	UUID, Parent string
	// PCIeRoot is the standard attribute resource.kubernetes.io/pcieRoot: devices that share one
	// talk over a PCIe switch rather than across the host.
	PCIeRoot string
}

// NodeGPUs are the DRA GPUs of one node: its devices of the GPU classes in whole pools, and why
// some of its slices' devices do not count.
type NodeGPUs struct {
	Devices  []Device
	Problems []string
}

// Inventory is what DRA publishes, as lockstep counts GPUs: the classes, the ResourceSlices by
// node, the claims and their templates. Make it with NewInventory. It is not safe for concurrent
// use: its owner calls it under its own lock.
type Inventory struct {
	named   map[string]bool
	cache   *cel.Cache
	classes map[string]*class
	slices  map[string]*resourceapi.ResourceSlice
	// pools are the slices of each pool, by name; a pool is whole when those of its newest
	// generation are as many as they say.
	pools map[poolKey]map[string]*resourceapi.ResourceSlice
	// nodes are the GPUs worked out of the slices naming each node.
	nodes     map[string]*NodeGPUs
	claims    map[string]*Claim
	templates map[string]*resourceapi.ResourceClaimTemplate
	// takenBy is the claim whose allocation names each device.
	takenBy map[DeviceKey]string
	// selected is how many published devices each class selects, kept as nodes are worked out.
	selected map[string]int
	// bySliceNode are the slices naming each node.
	bySliceNode map[string]map[string]*resourceapi.ResourceSlice
	// demandChanges counts the changes that can change what pods ask (classes, claims,
	// templates); slices cannot.
	demandChanges int
}

// DemandChanges counts the changes so far that can change what a pod's claims ask: its owner
// works out pods' demand again only when it moved.
func (inv *Inventory) DemandChanges() int { return inv.demandChanges }

type poolKey struct{ driver, pool string }

// NewInventory makes an empty inventory in which the classes named, and those serving
// nvidia.com/gpu, count as GPUs.
func NewInventory(gpuClasses []string) *Inventory {
	named := map[string]bool{}
	for _, c := range gpuClasses {
		named[c] = true
	}
	return &Inventory{named: named, cache: cel.NewCache(64, cel.Features{}),
		classes: map[string]*class{}, slices: map[string]*resourceapi.ResourceSlice{},
		pools: map[poolKey]map[string]*resourceapi.ResourceSlice{}, nodes: map[string]*NodeGPUs{},
		claims: map[string]*Claim{}, templates: map[string]*resourceapi.ResourceClaimTemplate{},
		takenBy: map[DeviceKey]string{}, selected: map[string]int{}, bySliceNode: map[string]map[string]*resourceapi.ResourceSlice{}}
}

// SetClass takes in a DeviceClass's latest version and DeleteClass its deletion; both return the
// nodes whose GPUs may have changed (every node: a class can select devices anywhere).
func (inv *Inventory) SetClass(obj *resourceapi.DeviceClass) []string {
	inv.classes[obj.Name] = newClass(obj, inv.named, inv.cache)
	inv.demandChanges++
	return inv.refreshAll()
}

func (inv *Inventory) DeleteClass(name string) []string {
	delete(inv.classes, name)
	inv.demandChanges++
	return inv.refreshAll()
}

// SetSlice takes in a ResourceSlice's latest version and DeleteSlice its deletion; both return the
// nodes whose GPUs may have changed: the slice's own, and every node of its pool, whose
// wholeness can change with it.
func (inv *Inventory) SetSlice(obj *resourceapi.ResourceSlice) []string {
	old := inv.slices[obj.Name]
	inv.slices[obj.Name] = obj
	if old != nil {
		inv.unindex(old)
	}
	inv.index(obj)
	key := poolKey{obj.Spec.Driver, obj.Spec.Pool.Name}
	if inv.pools[key] == nil {
		inv.pools[key] = map[string]*resourceapi.ResourceSlice{}
	}
	inv.pools[key][obj.Name] = obj
	nodes := inv.poolNodes(key)
	if old != nil {
		nodes = append(nodes, inv.dropFromPool(old)...)
	}
	return inv.refresh(nodes)
}

func (inv *Inventory) DeleteSlice(name string) []string {
	old := inv.slices[name]
	if old == nil {
		return nil
	}
	delete(inv.slices, name)
	inv.unindex(old)
	nodes := inv.dropFromPool(old)
	return inv.refresh(append(nodes, sliceNode(old)))
}

func (inv *Inventory) index(s *resourceapi.ResourceSlice) {
	n := sliceNode(s)
	if inv.bySliceNode[n] == nil {
		inv.bySliceNode[n] = map[string]*resourceapi.ResourceSlice{}
	}
	inv.bySliceNode[n][s.Name] = s
}

func (inv *Inventory) unindex(s *resourceapi.ResourceSlice) {
	n := sliceNode(s)
	delete(inv.bySliceNode[n], s.Name)
	if len(inv.bySliceNode[n]) == 0 {
		delete(inv.bySliceNode, n)
	}
}

// dropFromPool forgets old as its pool's member when it moved pools or went, and returns the
// nodes of the pool it left.
func (inv *Inventory) dropFromPool(old *resourceapi.ResourceSlice) []string {
	key := poolKey{old.Spec.Driver, old.Spec.Pool.Name}
	members := inv.pools[key]
	if cur := inv.slices[old.Name]; cur != nil && (poolKey{cur.Spec.Driver, cur.Spec.Pool.Name}) == key {
		return nil
	}
	delete(members, old.Name)
	if len(members) == 0 {
		delete(inv.pools, key)
	}
	return append(inv.poolNodes(key), sliceNode(old))
}

func (inv *Inventory) poolNodes(key poolKey) []string {
	var out []string
	for _, s := range inv.pools[key] {
		if n := sliceNode(s); n != "" {
			out = append(out, n)
		}
	}
	return out
}

// sliceNode is the node a slice publishes devices of, "" for slices of many nodes (a node
// selector, all nodes, or per device), which lockstep does not count as any node's GPUs.
func sliceNode(s *resourceapi.ResourceSlice) string {
	if s.Spec.NodeName == nil {
		return ""
	}
	return *s.Spec.NodeName
}

func (inv *Inventory) refreshAll() []string {
	nodes := make([]string, 0, len(inv.nodes))
	for n := range inv.bySliceNode {
		nodes = append(nodes, n)
	}
	for n := range inv.nodes {
		nodes = append(nodes, n)
	}
	return inv.refresh(nodes)
}

// refresh works out the GPUs of the nodes named again and returns them, each once, sorted.
func (inv *Inventory) refresh(nodes []string) []string {
	slices.Sort(nodes)
	nodes = slices.Compact(nodes)
	if len(nodes) > 0 && nodes[0] == "" {
		nodes = nodes[1:]
	}
	for _, n := range nodes {
		inv.countSelected(inv.nodes[n], -1)
		if g := inv.workOut(n); g != nil {
			inv.nodes[n] = g
			inv.countSelected(g, 1)
		} else {
			delete(inv.nodes, n)
		}
	}
	return nodes
}

func (inv *Inventory) countSelected(g *NodeGPUs, sign int) {
	if g == nil {
		return
	}
	for _, d := range g.Devices {
		for _, c := range d.Classes {
			inv.selected[c] += sign
		}
	}
}

// workOut is a node's GPUs from the slices naming it, nil when none names it.
func (inv *Inventory) workOut(node string) *NodeGPUs {
	var mine []*resourceapi.ResourceSlice
	for _, s := range inv.bySliceNode[node] {
		mine = append(mine, s)
	}
	if len(mine) == 0 {
		return nil
	}
	sort.Slice(mine, func(i, j int) bool { return mine[i].Name < mine[j].Name })
	g := &NodeGPUs{}
	seenPools := map[poolKey]bool{}
	for _, s := range mine {
		key := poolKey{s.Spec.Driver, s.Spec.Pool.Name}
		newest, whole := inv.poolState(key)
		if s.Spec.Pool.Generation < newest {
			continue // superseded: the driver is replacing it
		}
		if !whole {
			if !seenPools[key] {
				g.Problems = append(g.Problems, inv.poolProblem(key, newest))
			}
			seenPools[key] = true
			continue
		}
		g.Devices = append(g.Devices, inv.gpusOf(s)...)
	}
	return g
}

// poolState is the newest generation of a pool's slices, and whether all the slices of that
// generation it says exist are there.
func (inv *Inventory) poolState(key poolKey) (newest int64, whole bool) {
	count, want := 0, int64(0)
	for _, s := range inv.pools[key] {
		switch g := s.Spec.Pool.Generation; {
		case g > newest:
			newest, count, want = g, 1, s.Spec.Pool.ResourceSliceCount
		case g == newest:
			count++
		}
	}
	return newest, int64(count) == want
}

func (inv *Inventory) poolProblem(key poolKey, newest int64) string {
	count, want := 0, int64(0)
	for _, s := range inv.pools[key] {
		if s.Spec.Pool.Generation == newest {
			count++
			want = s.Spec.Pool.ResourceSliceCount
		}
	}
	return fmt.Sprintf("ResourceSlice pool %s/%s: %d of the %d slices of generation %d are published (spec.pool.resourceSliceCount): the pool is being updated, and its devices count once it is whole",
		key.driver, key.pool, count, want, newest)
}

func (inv *Inventory) gpusOf(s *resourceapi.ResourceSlice) []Device {
	ctx := context.Background()
	var out []Device
	for i := range s.Spec.Devices {
		d := &s.Spec.Devices[i]
		classes := gpuClassesOf(ctx, inv.classes, s.Spec.Driver, d)
		if len(classes) == 0 {
			continue
		}
		out = append(out, Device{Key: DeviceKey{s.Spec.Driver, s.Spec.Pool.Name, d.Name}, Classes: classes,
			UUID: stringAttr(d, "uuid"), Parent: stringAttr(d, "parentUUID"), PCIeRoot: stringAttr(d, "resource.kubernetes.io/pcieRoot")})
	}
	return out
}

// stringAttr is a device's string attribute of that name, unqualified names in the driver's own
// domain as the API has them.
func stringAttr(d *resourceapi.Device, name resourceapi.QualifiedName) string {
	if a, ok := d.Attributes[name]; ok && a.StringValue != nil {
		return *a.StringValue
	}
	return ""
}

// HasNodes reports whether some ResourceSlice names a node: until one does, no pod's change can
// move a DRA GPU.
func (inv *Inventory) HasNodes() bool { return len(inv.nodes) > 0 }

// Node is the GPUs of a node, nil when no ResourceSlice names it.
func (inv *Inventory) Node(name string) *NodeGPUs { return inv.nodes[name] }

// Nodes are the names of every node some ResourceSlice names, sorted.
func (inv *Inventory) Nodes() []string {
	out := make([]string, 0, len(inv.nodes))
	for n := range inv.nodes {
		out = append(out, n)
	}
	slices.Sort(out)
	return out
}

// TakenBy is the claim ("namespace/name") whose allocation names the device, "" for none.
func (inv *Inventory) TakenBy(k DeviceKey) string { return inv.takenBy[k] }

// ClassProblem says what is wrong with a GPU class as lockstep reads it: a selector that does not
// compile, or none of the devices published selected. "" when nothing is, or the class is unknown.
func (inv *Inventory) ClassProblem(name string) string {
	c := inv.classes[name]
	switch {
	case c == nil:
		return ""
	case c.err != nil:
		return c.err.Error()
	}
	if !c.gpu || inv.selected[name] > 0 {
		return ""
	}
	return fmt.Sprintf("DeviceClass %s: spec.selectors select none of the devices the ResourceSlices publish", name)
}

// IsGPUClass reports whether the class counts as GPUs.
func (inv *Inventory) IsGPUClass(name string) bool {
	c := inv.classes[name]
	return c != nil && c.gpu
}

// ExtendedGPUClass is the class whose spec.extendedResourceName is nvidia.com/gpu, "" for none:
// it serves pods that ask nvidia.com/gpu on nodes whose allocatable lacks it. Of several, the
// newest, the lower name on a tie, as kube-scheduler's extended-resource cache prefers
// (k8s.io/dynamic-resource-allocation/deviceclass/extendedresourcecache).
func (inv *Inventory) ExtendedGPUClass() string {
	var best *resourceapi.DeviceClass
	for _, c := range inv.classes {
		if !servesGPUs(c.obj) {
			continue
		}
		switch {
		case best == nil, c.obj.CreationTimestamp.After(best.CreationTimestamp.Time):
			best = c.obj
		case c.obj.CreationTimestamp.Equal(&best.CreationTimestamp) && c.obj.Name < best.Name:
			best = c.obj
		}
	}
	if best == nil {
		return ""
	}
	return best.Name
}
