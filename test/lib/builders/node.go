package builders

import (
	"strconv"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/lockstep-sched/lockstep/wellknown"
)

// NodeBuilder builds a *corev1.Node. Resource setters set capacity and allocatable alike.
type NodeBuilder struct {
	node corev1.Node
}

// Node starts a Ready node with no capacity.
func Node(name string) *NodeBuilder {
	return &NodeBuilder{node: corev1.Node{
		TypeMeta:   metav1.TypeMeta{Kind: "Node", APIVersion: "v1"},
		ObjectMeta: metav1.ObjectMeta{Name: name, UID: types.UID("uid-node-" + name)},
		Status: corev1.NodeStatus{
			Capacity:    corev1.ResourceList{},
			Allocatable: corev1.ResourceList{},
			Conditions:  []corev1.NodeCondition{{Type: corev1.NodeReady, Status: corev1.ConditionTrue}},
		},
	}}
}

// Obj returns a deep copy of the node built so far.
func (b *NodeBuilder) Obj() *corev1.Node { return b.node.DeepCopy() }

// Clone returns an independent builder with the same settings.
func (b *NodeBuilder) Clone() *NodeBuilder { return &NodeBuilder{node: *b.node.DeepCopy()} }

// Name renames the node.
func (b *NodeBuilder) Name(name string) *NodeBuilder {
	b.node.Name, b.node.UID = name, types.UID("uid-node-"+name)
	return b
}

// Resource sets one resource's capacity and allocatable.
func (b *NodeBuilder) Resource(name corev1.ResourceName, quantity string) *NodeBuilder {
	q := resource.MustParse(quantity)
	b.node.Status.Capacity[name] = q
	b.node.Status.Allocatable[name] = q.DeepCopy()
	return b
}

// Allocatable sets only allocatable (below capacity, as kubelet reservations make it).
func (b *NodeBuilder) Allocatable(name corev1.ResourceName, quantity string) *NodeBuilder {
	b.node.Status.Allocatable[name] = resource.MustParse(quantity)
	return b
}

// GPU sets the nvidia.com/gpu count.
func (b *NodeBuilder) GPU(n int64) *NodeBuilder {
	return b.Resource(wellknown.ResourceGPU, strconv.FormatInt(n, 10))
}

// CPU sets the CPU, e.g. "64".
func (b *NodeBuilder) CPU(quantity string) *NodeBuilder {
	return b.Resource(corev1.ResourceCPU, quantity)
}

// Memory sets the memory, e.g. "256Gi".
func (b *NodeBuilder) Memory(quantity string) *NodeBuilder {
	return b.Resource(corev1.ResourceMemory, quantity)
}

// Pods sets the pod count the node takes.
func (b *NodeBuilder) Pods(n int64) *NodeBuilder {
	return b.Resource(corev1.ResourcePods, strconv.FormatInt(n, 10))
}

// Unschedulable cordons the node.
func (b *NodeBuilder) Unschedulable() *NodeBuilder {
	b.node.Spec.Unschedulable = true
	return b
}

// Label sets a label.
func (b *NodeBuilder) Label(key, value string) *NodeBuilder {
	if b.node.Labels == nil {
		b.node.Labels = map[string]string{}
	}
	b.node.Labels[key] = value
	return b
}

// Taint adds a taint.
func (b *NodeBuilder) Taint(key, value string, effect corev1.TaintEffect) *NodeBuilder {
	b.node.Spec.Taints = append(b.node.Spec.Taints, corev1.Taint{Key: key, Value: value, Effect: effect})
	return b
}

// NotReady sets the Ready condition to False.
func (b *NodeBuilder) NotReady() *NodeBuilder {
	for i := range b.node.Status.Conditions {
		if b.node.Status.Conditions[i].Type == corev1.NodeReady {
			b.node.Status.Conditions[i].Status = corev1.ConditionFalse
		}
	}
	return b
}

// GPUNodes makes count nodes named prefix-0, prefix-1, ... each with gpus GPUs, 64 CPUs, 256Gi of
// memory and 110 pods: the common test cluster in one call.
func GPUNodes(prefix string, count int, gpus int64) []*corev1.Node {
	out := make([]*corev1.Node, count)
	for i := range out {
		out[i] = Node(prefix + "-" + strconv.Itoa(i)).GPU(gpus).CPU("64").Memory("256Gi").Pods(110).Obj()
	}
	return out
}

// Names lists the nodes' names in order.
func Names(nodes []*corev1.Node) []string {
	out := make([]string, len(nodes))
	for i, n := range nodes {
		out[i] = n.Name
	}
	return out
}
