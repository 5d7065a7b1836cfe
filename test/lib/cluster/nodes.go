package cluster

import (
	"context"
	"fmt"
	"runtime"
	"strconv"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/lockstep-sched/lockstep/wellknown"
)

// NodeSpec describes a node that has no kubelet behind it.
type NodeSpec struct {
	Name string
	// GPUs is the node's nvidia.com/gpu capacity; 0 leaves the resource out (a CPU-only node).
	GPUs   int
	CPU    string // default "64"
	Memory string // default "256Gi"
	Pods   int    // default 110
	// Labels and Annotations are added to (and override) the labels a kubelet would set:
	// kubernetes.io/hostname=<Name>, kubernetes.io/os=linux, kubernetes.io/arch=<GOARCH>.
	Labels, Annotations map[string]string
	// Taints are copied into the node's spec.
	Taints []corev1.Taint
}

// CreateNode creates the Node, then sets its status through the status subresource (the API
// server ignores status on create): capacity = allocatable = cpu, memory, pods and nvidia.com/gpu,
// and a Ready=True condition. Nothing heartbeats afterwards, but no controller is there to notice.
func (c *Cluster) CreateNode(ctx context.Context, n NodeSpec) (*corev1.Node, error) {
	if n.Name == "" {
		return nil, fmt.Errorf("cluster: CreateNode needs a name")
	}
	if n.CPU == "" {
		n.CPU = "64"
	}
	if n.Memory == "" {
		n.Memory = "256Gi"
	}
	if n.Pods == 0 {
		n.Pods = 110
	}
	resources := corev1.ResourceList{}
	for name, q := range map[corev1.ResourceName]string{
		corev1.ResourceCPU:    n.CPU,
		corev1.ResourceMemory: n.Memory,
		corev1.ResourcePods:   strconv.Itoa(n.Pods),
		// Every kubelet reports its disk; without it pods that ask for some (the MPI operator's
		// launcher does) fit no node.
		corev1.ResourceEphemeralStorage: "100Gi",
	} {
		qty, err := resource.ParseQuantity(q)
		if err != nil {
			return nil, fmt.Errorf("cluster: node %s: %s %q: %w", n.Name, name, q, err)
		}
		resources[name] = qty
	}
	if n.GPUs > 0 {
		resources[wellknown.ResourceGPU] = *resource.NewQuantity(int64(n.GPUs), resource.DecimalSI)
	}
	labels := map[string]string{
		corev1.LabelHostname:   n.Name,
		corev1.LabelOSStable:   "linux",
		corev1.LabelArchStable: runtime.GOARCH,
	}
	for k, v := range n.Labels {
		labels[k] = v
	}
	node := &corev1.Node{
		ObjectMeta: metav1.ObjectMeta{Name: n.Name, Labels: labels, Annotations: n.Annotations},
		Spec:       corev1.NodeSpec{Taints: n.Taints},
	}
	created, err := c.Client.CoreV1().Nodes().Create(ctx, node, metav1.CreateOptions{})
	if err != nil {
		return nil, fmt.Errorf("cluster: creating node %s: %w", n.Name, err)
	}
	now := metav1.Now()
	created.Status = corev1.NodeStatus{
		Capacity:    resources,
		Allocatable: resources.DeepCopy(),
		Phase:       corev1.NodeRunning,
		Conditions: []corev1.NodeCondition{{
			Type:               corev1.NodeReady,
			Status:             corev1.ConditionTrue,
			Reason:             "KubeletReady",
			Message:            "fake node: no kubelet runs on the lockstep test cluster",
			LastHeartbeatTime:  now,
			LastTransitionTime: now,
		}},
		Addresses: []corev1.NodeAddress{{Type: corev1.NodeHostName, Address: n.Name}},
	}
	updated, err := c.Client.CoreV1().Nodes().UpdateStatus(ctx, created, metav1.UpdateOptions{})
	if err != nil {
		return nil, fmt.Errorf("cluster: setting status of node %s: %w", n.Name, err)
	}
	return updated, nil
}
