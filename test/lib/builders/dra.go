package builders

import (
	"fmt"
	"strings"

	corev1 "k8s.io/api/core/v1"
	resourceapi "k8s.io/api/resource/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
)

// The objects of NVIDIA's DRA driver for GPUs, as it publishes them, written from its own sources
// (kubernetes-sigs/dra-driver-nvidia-gpu, chart 0.5.0-dev of May 2026, commit 22407113):
// deployments/helm/dra-driver-nvidia-gpu/templates/deviceclass-{gpu,mig}.yaml for the classes,
// cmd/gpu-kubelet-plugin/deviceinfo.go and mig.go for what each device's slice entry carries.
// None of the driver's code runs: its module is not served here, and without a kubelet its
// kubelet plugin would have nothing to serve.
const (
	NVIDIADriver   = "gpu.nvidia.com"
	GPUDeviceClass = "gpu.nvidia.com"
	MIGDeviceClass = "mig.nvidia.com"
	// PCIeRootAttribute is the standard attribute the driver fills from the GPU's PCI path.
	PCIeRootAttribute = "resource.kubernetes.io/pcieRoot"
)

// NVIDIADeviceClasses are the driver's two classes of GPUs: whole GPUs, serving nvidia.com/gpu
// for pods that ask the extended resource (resource.k8s.io/v1 only), and MIG devices.
func NVIDIADeviceClasses() []*resourceapi.DeviceClass {
	gpu := &resourceapi.DeviceClass{ObjectMeta: metav1.ObjectMeta{Name: GPUDeviceClass},
		Spec: resourceapi.DeviceClassSpec{Selectors: []resourceapi.DeviceSelector{{CEL: &resourceapi.CELDeviceSelector{
			Expression: "device.driver == 'gpu.nvidia.com' && device.attributes['gpu.nvidia.com'].type == 'gpu'"}}},
			ExtendedResourceName: ptr.To("nvidia.com/gpu")}}
	mig := &resourceapi.DeviceClass{ObjectMeta: metav1.ObjectMeta{Name: MIGDeviceClass},
		Spec: resourceapi.DeviceClassSpec{Selectors: []resourceapi.DeviceSelector{{CEL: &resourceapi.CELDeviceSelector{
			Expression: "device.driver == 'gpu.nvidia.com' && device.attributes['gpu.nvidia.com'].type == 'mig'"}}}}}
	return []*resourceapi.DeviceClass{gpu, mig}
}

// ComputeDomainDriver and ComputeDomainChannelClass are the driver's second kubelet plugin, which
// publishes each node's IMEX channels, and the class a ComputeDomain's workload claims ask of
// them (deviceclass-compute-domain-default-channel.yaml; the claim template is
// templates/compute-domain-workload-claim-template.tmpl.yaml).
const (
	ComputeDomainDriver       = "compute-domain.nvidia.com"
	ComputeDomainChannelClass = "compute-domain-default-channel.nvidia.com"
)

// ComputeDomainChannelDeviceClass is the class of a ComputeDomain's default channel.
func ComputeDomainChannelDeviceClass() *resourceapi.DeviceClass {
	return &resourceapi.DeviceClass{ObjectMeta: metav1.ObjectMeta{Name: ComputeDomainChannelClass},
		Spec: resourceapi.DeviceClassSpec{Selectors: []resourceapi.DeviceSelector{{CEL: &resourceapi.CELDeviceSelector{
			Expression: "device.driver == 'compute-domain.nvidia.com' && device.attributes['compute-domain.nvidia.com'].type == 'channel' && device.attributes['compute-domain.nvidia.com'].id == 0"}}}}}
}

// ChannelSlice is the compute-domain plugin's slice of a node: its IMEX channel 0.
func ChannelSlice(node string) *resourceapi.ResourceSlice {
	return &resourceapi.ResourceSlice{ObjectMeta: metav1.ObjectMeta{Name: node + "-compute-domain.nvidia.com"},
		Spec: resourceapi.ResourceSliceSpec{Driver: ComputeDomainDriver, NodeName: ptr.To(node),
			Pool: resourceapi.ResourcePool{Name: node, Generation: 1, ResourceSliceCount: 1},
			Devices: []resourceapi.Device{{Name: "channel-0", Attributes: map[resourceapi.QualifiedName]resourceapi.DeviceAttribute{
				"type": {StringValue: ptr.To("channel")}, "id": {IntValue: ptr.To[int64](0)}}}}}}
}

// ChannelClaimTemplate is a ComputeDomain's workload claim template, as its controller writes
// it, without the opaque channel configuration only the driver reads.
func ChannelClaimTemplate(namespace, name string) *resourceapi.ResourceClaimTemplate {
	return &resourceapi.ResourceClaimTemplate{ObjectMeta: metav1.ObjectMeta{Namespace: namespace, Name: name},
		Spec: resourceapi.ResourceClaimTemplateSpec{Spec: resourceapi.ResourceClaimSpec{Devices: resourceapi.DeviceClaim{
			Requests: []resourceapi.DeviceRequest{{Name: "channel", Exactly: &resourceapi.ExactDeviceRequest{DeviceClassName: ComputeDomainChannelClass,
				AllocationMode: resourceapi.DeviceAllocationModeExactCount, Count: 1}}}}}}}
}

// SliceBuilder builds the one ResourceSlice the driver's kubelet plugin publishes for a node: pool
// named after the node, generation 1, one slice.
type SliceBuilder struct{ slice resourceapi.ResourceSlice }

// GPUSlice is node's slice with gpus whole GPUs, gpu-0 to gpu-<n-1>, an A100 each; GPUs i and
// i+1 (i even) share a PCIe root, as on a DGX board.
func GPUSlice(node string, gpus int) *SliceBuilder {
	b := &SliceBuilder{slice: resourceapi.ResourceSlice{ObjectMeta: metav1.ObjectMeta{Name: node + "-gpu.nvidia.com"},
		Spec: resourceapi.ResourceSliceSpec{Driver: NVIDIADriver, NodeName: ptr.To(node),
			Pool: resourceapi.ResourcePool{Name: node, Generation: 1, ResourceSliceCount: 1}}}}
	for i := range gpus {
		b.slice.Spec.Devices = append(b.slice.Spec.Devices, resourceapi.Device{Name: fmt.Sprintf("gpu-%d", i),
			Attributes: map[resourceapi.QualifiedName]resourceapi.DeviceAttribute{
				"type":            {StringValue: ptr.To("gpu")},
				"uuid":            {StringValue: ptr.To(fmt.Sprintf("GPU-%s-%d", node, i))},
				"productName":     {StringValue: ptr.To("NVIDIA A100-SXM4-80GB")},
				"brand":           {StringValue: ptr.To("Nvidia")},
				"architecture":    {StringValue: ptr.To("Ampere")},
				"driverVersion":   {VersionValue: ptr.To("580.65.6")},
				PCIeRootAttribute: {StringValue: ptr.To(fmt.Sprintf("pci0000:%02x", i/2))},
			},
			Capacity: map[resourceapi.QualifiedName]resourceapi.DeviceCapacity{"memory": {Value: resource.MustParse("80Gi")}}})
	}
	return b
}

// MIG adds n MIG devices of profile (e.g. "1g.10gb", GPU instance profile id profileID) carved
// from GPU parent of the slice, named as the driver names them (MigSpecTuple.ToCanonicalName:
// gpu-<parent>-mig-<profile without dots>-<profile id>-<placement start>).
func (b *SliceBuilder) MIG(parent, n int, profile string, profileID int) *SliceBuilder {
	node := *b.slice.Spec.NodeName
	for i := range n {
		name := fmt.Sprintf("gpu-%d-mig-%s-%d-%d", parent, strings.ReplaceAll(profile, ".", ""), profileID, i)
		b.slice.Spec.Devices = append(b.slice.Spec.Devices, resourceapi.Device{Name: name,
			Attributes: map[resourceapi.QualifiedName]resourceapi.DeviceAttribute{
				"type":            {StringValue: ptr.To("mig")},
				"uuid":            {StringValue: ptr.To(fmt.Sprintf("MIG-%s-%d-%d", node, parent, i))},
				"parentUUID":      {StringValue: ptr.To(fmt.Sprintf("GPU-%s-%d", node, parent))},
				"profile":         {StringValue: ptr.To(profile)},
				"productName":     {StringValue: ptr.To("NVIDIA A100-SXM4-80GB")},
				PCIeRootAttribute: {StringValue: ptr.To(fmt.Sprintf("pci0000:%02x", parent/2))},
			}})
	}
	return b
}

// Pool sets the slice's pool: its generation and how many slices it has.
func (b *SliceBuilder) Pool(generation, count int64) *SliceBuilder {
	b.slice.Spec.Pool.Generation, b.slice.Spec.Pool.ResourceSliceCount = generation, count
	return b
}

// Name renames the slice.
func (b *SliceBuilder) Name(name string) *SliceBuilder { b.slice.Name = name; return b }

func (b *SliceBuilder) Obj() *resourceapi.ResourceSlice { return b.slice.DeepCopy() }

// ClaimTemplate is a ResourceClaimTemplate of one request, "gpus", for count devices of class.
func ClaimTemplate(namespace, name, class string, count int64) *resourceapi.ResourceClaimTemplate {
	return &resourceapi.ResourceClaimTemplate{ObjectMeta: metav1.ObjectMeta{Namespace: namespace, Name: name},
		Spec: resourceapi.ResourceClaimTemplateSpec{Spec: ClaimSpec(class, count)}}
}

// Claim is a ResourceClaim of one request, "gpus", for count devices of class.
func Claim(namespace, name, class string, count int64) *resourceapi.ResourceClaim {
	return &resourceapi.ResourceClaim{ObjectMeta: metav1.ObjectMeta{Namespace: namespace, Name: name, UID: UIDFor(namespace, "claim-"+name)},
		Spec: ClaimSpec(class, count)}
}

// ClaimSpec asks count devices of class in one request, "gpus".
func ClaimSpec(class string, count int64) resourceapi.ResourceClaimSpec {
	return resourceapi.ResourceClaimSpec{Devices: resourceapi.DeviceClaim{Requests: []resourceapi.DeviceRequest{{Name: "gpus",
		Exactly: &resourceapi.ExactDeviceRequest{DeviceClassName: class, AllocationMode: resourceapi.DeviceAllocationModeExactCount, Count: count}}}}}
}

// Allocated gives the claim an allocation of the devices named, of node's pool, reserved for
// the pods named.
func Allocated(c *resourceapi.ResourceClaim, node string, devices []string, reservedFor ...*corev1.Pod) *resourceapi.ResourceClaim {
	c = c.DeepCopy()
	a := &resourceapi.AllocationResult{}
	for _, d := range devices {
		a.Devices.Results = append(a.Devices.Results, resourceapi.DeviceRequestAllocationResult{Request: "gpus", Driver: NVIDIADriver, Pool: node, Device: d})
	}
	c.Status.Allocation = a
	for _, p := range reservedFor {
		c.Status.ReservedFor = append(c.Status.ReservedFor, resourceapi.ResourceClaimConsumerReference{Resource: "pods", Name: p.Name, UID: p.UID})
	}
	return c
}

// ClaimFromTemplate gives the pod a claim, pod claim "gpus", that the resourceclaim controller
// makes from template (owned by the pod).
func (b *PodBuilder) ClaimFromTemplate(template string) *PodBuilder {
	return b.NamedClaimFromTemplate("gpus", template)
}

// NamedClaimFromTemplate is ClaimFromTemplate for a pod claim of another name.
func (b *PodBuilder) NamedClaimFromTemplate(name, template string) *PodBuilder {
	b.pod.Spec.ResourceClaims = append(b.pod.Spec.ResourceClaims, corev1.PodResourceClaim{Name: name, ResourceClaimTemplateName: ptr.To(template)})
	b.pod.Spec.Containers[0].Resources.Claims = append(b.pod.Spec.Containers[0].Resources.Claims, corev1.ResourceClaim{Name: name})
	return b
}

// SharedClaim makes the pod use the claim of that name (pod claim "gpus").
func (b *PodBuilder) SharedClaim(claim string) *PodBuilder {
	b.pod.Spec.ResourceClaims = append(b.pod.Spec.ResourceClaims, corev1.PodResourceClaim{Name: "gpus", ResourceClaimName: ptr.To(claim)})
	b.pod.Spec.Containers[0].Resources.Claims = append(b.pod.Spec.Containers[0].Resources.Claims, corev1.ResourceClaim{Name: "gpus"})
	return b
}

// ClaimCreated records in the pod's status the claim the controller made from its template.
func (b *PodBuilder) ClaimCreated(claim string) *PodBuilder {
	b.pod.Status.ResourceClaimStatuses = append(b.pod.Status.ResourceClaimStatuses, corev1.PodResourceClaimStatus{Name: "gpus", ResourceClaimName: ptr.To(claim)})
	return b
}

// OwnedBy makes the claim the pod's own, as the resourceclaim controller makes claims from a
// pod's template.
func OwnedBy(c *resourceapi.ResourceClaim, pod *corev1.Pod) *resourceapi.ResourceClaim {
	c = c.DeepCopy()
	c.OwnerReferences = []metav1.OwnerReference{{APIVersion: "v1", Kind: "Pod", Name: pod.Name, UID: pod.UID, Controller: ptr.To(true)}}
	return c
}
