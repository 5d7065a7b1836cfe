package main

import (
	"context"
	"errors"
	"fmt"
	"sync"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/kubernetes"

	"github.com/lockstep-sched/lockstep/test/lib/builders"
	"github.com/lockstep-sched/lockstep/test/lib/cluster"
)

const (
	namespace = "throughput"
	// gangLabel names a gang member's gang in every mode, for the bench's own bookkeeping.
	gangLabel = "throughput.lockstep.dev/gang"
	// writers is how many creates or deletes run at once: enough that the client does not set
	// the pace of a bulk load through the apiserver.
	writers = 32
)

// workload is the load every mode gets: the same nodes, and pods of the same names and shapes.
type workload struct {
	nodes, gpusPerNode       int
	ordinary                 int
	gangs, gangSize, gangGPU int
	idleSamples              int
}

func (w workload) nodeName(i int) string     { return fmt.Sprintf("node-%04d", i) }
func (w workload) ordinaryName(i int) string { return fmt.Sprintf("pod-%05d", i) }
func (w workload) gangName(g int) string     { return fmt.Sprintf("gang-%04d", g) }
func (w workload) idleGangName(s int) string { return fmt.Sprintf("idle-%03d", s) }

// members are the pod names of a gang, in creation order.
func (w workload) members(gang string) []string {
	names := make([]string, w.gangSize)
	for i := range names {
		names[i] = fmt.Sprintf("%s-%d", gang, i)
	}
	return names
}

func (w workload) gangNames() []string {
	names := make([]string, w.gangs)
	for g := range names {
		names[g] = w.gangName(g)
	}
	return names
}

// pod is one bench pod: gpus nvidia.com/gpu, and a little CPU and memory so that the resource
// plugins have something to weigh.
func pod(name string, gpus int) *builders.PodBuilder {
	return builders.Pod(namespace, name).CPU("100m").Memory("256Mi").GPU(int64(gpus)).Label("app", "throughput")
}

// gangPod is a member of gang in the mode's dialect.
func (w workload) gangPod(name, gang string, d dialect) *corev1.Pod {
	return d.member(name, gang, w.gangSize, w.gangGPU)
}

// parallel runs do(0..n-1) on writers goroutines and returns the first error.
func parallel(n int, do func(i int) error) error {
	next := make(chan int)
	errs := make([]error, writers)
	var wg sync.WaitGroup
	for w := range writers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range next {
				if err := do(i); err != nil && errs[w] == nil {
					errs[w] = err
				}
			}
		}()
	}
	for i := range n {
		next <- i
	}
	close(next)
	wg.Wait()
	return errors.Join(errs...)
}

func (w workload) createNodes(ctx context.Context, c *cluster.Cluster) error {
	return parallel(w.nodes, func(i int) error {
		_, err := c.CreateNode(ctx, cluster.NodeSpec{Name: w.nodeName(i), GPUs: w.gpusPerNode, CPU: "64", Memory: "256Gi", Pods: 110})
		return err
	})
}

func createPods(ctx context.Context, client kubernetes.Interface, pods []*corev1.Pod) error {
	return parallel(len(pods), func(i int) error {
		_, err := client.CoreV1().Pods(namespace).Create(ctx, pods[i], metav1.CreateOptions{})
		return err
	})
}

func (w workload) ordinaryPods(d dialect) []*corev1.Pod {
	pods := make([]*corev1.Pod, w.ordinary)
	for i := range pods {
		pods[i] = d.pod(w.ordinaryName(i), 1).Obj()
	}
	return pods
}

func (w workload) gangPods(d dialect) []*corev1.Pod {
	var pods []*corev1.Pod
	for _, g := range w.gangNames() {
		for _, name := range w.members(g) {
			pods = append(pods, w.gangPod(name, g, d))
		}
	}
	return pods
}

// createPodGroups creates the named gangs' PodGroups, when the dialect has them.
func (w workload) createPodGroups(ctx context.Context, dyn dynamic.Interface, d dialect, names []string) error {
	return parallel(len(names), func(i int) error {
		return d.createPodGroup(ctx, dyn, names[i], w.gangSize, w.gangPod(w.members(names[i])[0], names[i], d))
	})
}

// deleteAll deletes every pod of the namespace (and the dialect's PodGroups) at once: with no
// kubelet, grace period 0 removes a bound pod right away.
func deleteAll(ctx context.Context, client kubernetes.Interface, dyn dynamic.Interface, d dialect) error {
	now := metav1.NewDeleteOptions(0)
	if err := client.CoreV1().Pods(namespace).DeleteCollection(ctx, *now, metav1.ListOptions{}); err != nil {
		return fmt.Errorf("deleting pods: %w", err)
	}
	if gvr, ok := d.podGroups(); ok {
		if err := dyn.Resource(gvr).Namespace(namespace).DeleteCollection(ctx, metav1.DeleteOptions{}, metav1.ListOptions{}); err != nil {
			return fmt.Errorf("deleting %s: %w", gvr.GroupResource(), err)
		}
	}
	return nil
}

// boundInAPI counts the pods of the namespace that the apiserver has bound, optionally only those
// matching a label selector.
func boundInAPI(ctx context.Context, client kubernetes.Interface, selector string) (int, error) {
	list, err := client.CoreV1().Pods(namespace).List(ctx, metav1.ListOptions{LabelSelector: selector})
	if err != nil {
		return 0, err
	}
	n := 0
	for _, p := range list.Items {
		if p.Spec.NodeName != "" {
			n++
		}
	}
	return n, nil
}
