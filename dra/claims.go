package dra

import (
	"errors"
	"fmt"
	"slices"
	"strings"

	corev1 "k8s.io/api/core/v1"
	resourceapi "k8s.io/api/resource/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/dynamic-resource-allocation/resourceclaim"
)

// Claim is a ResourceClaim as lockstep counts it.
type Claim struct {
	Namespace, Name string
	UID             types.UID
	// Owner is the pod the claim was made for, from the pod's claim template or by kube-scheduler
	// for the pod's extended resources; "" for a claim pods share by name.
	Owner types.UID
	// ForExtendedResources: kube-scheduler made it for the owner's extended resources (annotation
	// resource.kubernetes.io/extended-resource-claim), which the pod's requests already count.
	ForExtendedResources bool
	// Allocated are the devices its allocation names, none while it is not allocated.
	Allocated []DeviceKey
	// ReservedFor are the pods its status.reservedFor names.
	ReservedFor []types.UID
	obj         *resourceapi.ResourceClaim
}

// Key is the claim's namespace/name.
func (c *Claim) Key() string { return c.Namespace + "/" + c.Name }

func claimOf(obj *resourceapi.ResourceClaim) *Claim {
	c := &Claim{Namespace: obj.Namespace, Name: obj.Name, UID: obj.UID, obj: obj,
		ForExtendedResources: obj.Annotations[resourceapi.ExtendedResourceClaimAnnotation] == "true"}
	if ref := metav1.GetControllerOf(obj); ref != nil && ref.Kind == "Pod" && ref.APIVersion == "v1" {
		c.Owner = ref.UID
	}
	if a := obj.Status.Allocation; a != nil {
		for _, r := range a.Devices.Results {
			c.Allocated = append(c.Allocated, DeviceKey{r.Driver, r.Pool, r.Device})
		}
	}
	for _, r := range obj.Status.ReservedFor {
		c.ReservedFor = append(c.ReservedFor, r.UID)
	}
	return c
}

// SetClaim takes in a ResourceClaim's latest version and DeleteClaim its deletion; both return
// the nodes whose devices it took or gave back.
func (inv *Inventory) SetClaim(obj *resourceapi.ResourceClaim) []string {
	inv.demandChanges++
	c := claimOf(obj)
	nodes := inv.release(inv.claims[c.Key()])
	inv.claims[c.Key()] = c
	for _, k := range c.Allocated {
		inv.takenBy[k] = c.Key()
	}
	return inv.nodesOf(append(nodes, c.Allocated...))
}

func (inv *Inventory) DeleteClaim(namespace, name string) []string {
	inv.demandChanges++
	key := namespace + "/" + name
	nodes := inv.release(inv.claims[key])
	delete(inv.claims, key)
	return inv.nodesOf(nodes)
}

func (inv *Inventory) release(old *Claim) []DeviceKey {
	if old == nil {
		return nil
	}
	for _, k := range old.Allocated {
		if inv.takenBy[k] == old.Key() {
			delete(inv.takenBy, k)
		}
	}
	return old.Allocated
}

// nodesOf are the nodes the devices are on, as far as the slices say, each once.
func (inv *Inventory) nodesOf(keys []DeviceKey) []string {
	var out []string
	for _, k := range keys {
		if n := inv.DeviceNode(k); n != "" && !slices.Contains(out, n) {
			out = append(out, n)
		}
	}
	return out
}

// DeviceNode is the node whose slice publishes the device, "" when none does.
func (inv *Inventory) DeviceNode(k DeviceKey) string {
	for _, s := range inv.pools[poolKey{k.Driver, k.Pool}] {
		for i := range s.Spec.Devices {
			if s.Spec.Devices[i].Name == k.Name {
				return sliceNode(s)
			}
		}
	}
	return ""
}

// Allocated are the claims whose allocation names devices, by key.
func (inv *Inventory) Allocated() []*Claim {
	var out []*Claim
	for _, c := range inv.claims {
		if len(c.Allocated) > 0 {
			out = append(out, c)
		}
	}
	slices.SortFunc(out, func(a, b *Claim) int { return strings.Compare(a.Key(), b.Key()) })
	return out
}

// Claim is the claim of that name, nil when unknown.
func (inv *Inventory) Claim(namespace, name string) *Claim { return inv.claims[namespace+"/"+name] }

// AllocatedOn are the claims whose allocation takes GPUs of the node, by key.
func (inv *Inventory) AllocatedOn(node string) []*Claim {
	g := inv.nodes[node]
	if g == nil {
		return nil
	}
	var keys []string
	for _, d := range g.Devices {
		if k := inv.takenBy[d.Key]; k != "" && !slices.Contains(keys, k) {
			keys = append(keys, k)
		}
	}
	slices.Sort(keys)
	out := make([]*Claim, len(keys))
	for i, k := range keys {
		out[i] = inv.claims[k]
	}
	return out
}

// GPUsOf is how many of the claim's allocated devices are GPUs of the node.
func (inv *Inventory) GPUsOf(c *Claim, node string) int64 {
	g := inv.nodes[node]
	if g == nil {
		return 0
	}
	var n int64
	for _, d := range g.Devices {
		if slices.Contains(c.Allocated, d.Key) {
			n++
		}
	}
	return n
}

// SetTemplate takes in a ResourceClaimTemplate's latest version, DeleteTemplate its deletion.
func (inv *Inventory) SetTemplate(obj *resourceapi.ResourceClaimTemplate) {
	inv.demandChanges++
	inv.templates[obj.Namespace+"/"+obj.Name] = obj
}

func (inv *Inventory) DeleteTemplate(namespace, name string) {
	inv.demandChanges++
	delete(inv.templates, namespace+"/"+name)
}

// Demand is what a pod's claims ask of GPUs.
type Demand struct {
	// GPUs is how many GPU devices the pod's claims ask that another pod's claim does not hold
	// already. A request for All of a class counts one: which devices all are depends on the node,
	// and Fits answers for the node.
	GPUs int64
	// Classes are the GPU classes asked, sorted.
	Classes []string
	// Claims are the pod's claims, those not created yet made from their templates: what Fits
	// allocates.
	Claims []*resourceapi.ResourceClaim
	// Err is why the claims cannot be allocated anywhere: one names a DeviceClass that does not
	// exist, say.
	Err error
	// Awaiting names a claim the pod needs that does not exist yet.
	Awaiting string
	// NVLinkDomain names the claim that asks a channel of an NVIDIA ComputeDomain, "" for none: its
	// pods must share one multi-node NVLink domain (one nvidia.com/gpu.clique).
	NVLinkDomain string
}

// ComputeDomainChannelClass is the class of the IMEX channel a ComputeDomain's workload claims
// ask (NVIDIA's chart, deviceclass-compute-domain-default-channel.yaml, and the workload claim
// template its ComputeDomain controller writes): a pod with such a claim runs inside the
// ComputeDomain's one NVLink domain.
const ComputeDomainChannelClass = "compute-domain-default-channel.nvidia.com"

// Demand is what the pod's claims ask. The claims kube-scheduler makes for a pod's extended
// resources are not among them: the pod's requests count those.
func (inv *Inventory) Demand(pod *corev1.Pod) Demand {
	var d Demand
	for i := range pod.Spec.ResourceClaims {
		pc := &pod.Spec.ResourceClaims[i]
		spec, obj, err := inv.claimFor(pod, pc)
		switch {
		case err != nil:
			d.Err = errors.Join(d.Err, err)
			continue
		case spec == nil:
			if d.Awaiting == "" {
				d.Awaiting = fmt.Sprintf("ResourceClaim of pod claim %s", pc.Name)
			}
			continue
		}
		d.Claims = append(d.Claims, obj)
		if d.NVLinkDomain == "" && asksClass(spec, ComputeDomainChannelClass) {
			d.NVLinkDomain = objectName(obj)
		}
		if c := inv.claims[obj.Namespace+"/"+obj.Name]; c != nil && heldByAnother(c, pod.UID) {
			continue
		}
		n, classes, err := inv.count(spec, objectName(obj))
		d.GPUs += n
		d.Err = errors.Join(d.Err, err)
		for _, cl := range classes {
			if !slices.Contains(d.Classes, cl) {
				d.Classes = append(d.Classes, cl)
			}
		}
	}
	slices.Sort(d.Classes)
	return d
}

func asksClass(spec *resourceapi.ResourceClaimSpec, class string) bool {
	for _, r := range spec.Devices.Requests {
		if r.Exactly != nil && r.Exactly.DeviceClassName == class {
			return true
		}
		for _, sub := range r.FirstAvailable {
			if sub.DeviceClassName == class {
				return true
			}
		}
	}
	return false
}

func objectName(obj *resourceapi.ResourceClaim) string {
	if obj.Name == "" {
		return "a ResourceClaim to be made from ResourceClaimTemplate " + obj.Namespace + "/" + obj.GenerateName
	}
	return "ResourceClaim " + obj.Namespace + "/" + obj.Name
}

// heldByAnother: another pod's status.reservedFor entry holds the claim's devices already.
func heldByAnother(c *Claim, pod types.UID) bool {
	return len(c.ReservedFor) > 0 && !slices.Contains(c.ReservedFor, pod) && c.Allocated != nil
}

// claimFor is a pod claim's claim: the object when it exists, else one made from its template
// (named by its generateName, as the controller would); nil spec when neither exists yet.
func (inv *Inventory) claimFor(pod *corev1.Pod, pc *corev1.PodResourceClaim) (*resourceapi.ResourceClaimSpec, *resourceapi.ResourceClaim, error) {
	name, _, err := resourceclaim.Name(pod, pc)
	if err == nil && name == nil {
		return nil, nil, nil // intentionally not created: nothing to allocate
	}
	if err == nil {
		if c := inv.claims[pod.Namespace+"/"+*name]; c != nil {
			return &c.obj.Spec, c.obj, nil
		}
		if pc.ResourceClaimTemplateName == nil {
			return nil, nil, nil // a claim by name that is not there yet
		}
	} else if !errors.Is(err, resourceclaim.ErrClaimNotFound) {
		return nil, nil, err
	}
	t := inv.templates[pod.Namespace+"/"+*pc.ResourceClaimTemplateName]
	if t == nil {
		return nil, nil, nil
	}
	obj := &resourceapi.ResourceClaim{ObjectMeta: metav1.ObjectMeta{Namespace: pod.Namespace, GenerateName: t.Name},
		Spec: t.Spec.Spec}
	return &obj.Spec, obj, nil
}

// count is how many GPU devices a claim's requests ask, and of which classes. A request whose
// class does not exist is an error naming the field.
func (inv *Inventory) count(spec *resourceapi.ResourceClaimSpec, object string) (int64, []string, error) {
	var n int64
	var classes []string
	var errs []error
	for i, r := range spec.Devices.Requests {
		field := fmt.Sprintf("%s: spec.devices.requests[%d]", object, i)
		if r.Exactly != nil {
			c, class, err := inv.exactCount(r.Exactly.DeviceClassName, r.Exactly.AllocationMode, r.Exactly.Count, r.Exactly.AdminAccess, field+".exactly")
			n, errs = n+c, append(errs, err)
			if class != "" {
				classes = append(classes, class)
			}
			continue
		}
		least, asked := int64(-1), ""
		for j, sub := range r.FirstAvailable {
			c, class, err := inv.exactCount(sub.DeviceClassName, sub.AllocationMode, sub.Count, nil, fmt.Sprintf("%s.firstAvailable[%d]", field, j))
			errs = append(errs, err)
			if least < 0 || c < least {
				least, asked = c, class
			}
		}
		if least > 0 {
			n += least
			classes = append(classes, asked)
		}
	}
	return n, classes, errors.Join(errs...)
}

func (inv *Inventory) exactCount(className string, mode resourceapi.DeviceAllocationMode, count int64, admin *bool, field string) (int64, string, error) {
	c := inv.classes[className]
	switch {
	case c == nil:
		return 0, "", fmt.Errorf("%s.deviceClassName=%q: no such DeviceClass", field, className)
	case !c.gpu, admin != nil && *admin:
		return 0, "", nil // not GPUs; an admin's access takes no device from anyone
	case mode == resourceapi.DeviceAllocationModeAll:
		return 1, className, nil
	case count < 1:
		return 1, className, nil
	}
	return count, className, nil
}
