package main

import (
	"context"
	"errors"
	"fmt"
	"sort"
	"strconv"
	"sync"
	"time"

	"github.com/lockstep-sched/lockstep/dialect"
	"github.com/lockstep-sched/lockstep/fabric"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/lockstep-sched/lockstep/gang"
	"github.com/lockstep-sched/lockstep/gpu"
	"github.com/lockstep-sched/lockstep/test/lib/schedsim"
	"github.com/lockstep-sched/lockstep/wellknown"
)

const namespace = "openb"

// managerVerbs is the manager as schedsim drives it.
type managerVerbs struct{ *gang.Manager }

func (v managerVerbs) Filter(pod *corev1.Pod, nodes []string) ([]string, map[string]string) {
	r := v.Manager.Filter(pod, nodes)
	return r.Passing(nodes), r.Failed
}

// lockstepPolicy drives a real gang.Manager the way kube-scheduler and the informers would:
// nodes and pods arrive through UpsertNode/UpsertPod, each member goes through Filter and
// Prioritize on every node, the members' binds are called concurrently, and the bound pods come
// back through UpsertPod with spec.nodeName and the gpu-ids annotation set.
type lockstepPolicy struct {
	m      *gang.Manager
	binder *schedsim.Binder
	names  []string
	pods   map[types.UID]*corev1.Pod
	podsMu sync.Mutex
	seq    int
	// noIDs counts members lockstep bound without GPU indices.
	noIDs int
	t0    time.Time
	// onPlaced, when set, is told about each member before it is mirrored into the cluster.
	onPlaced func(g *gangSpec, member int, n *nodeState, ids []int)
}

// newLockstep starts a manager with the given network tiers (nil: none) on c's nodes, labelled
// with their place in fab (nil: no labels). Both lockstep runs see the same labels: the tiers in
// its configuration are all that tells them apart.
func newLockstep(c *cluster, fab *netFabric, tiers fabric.Tiers) (*lockstepPolicy, error) {
	l := &lockstepPolicy{binder: &schedsim.Binder{}, pods: map[types.UID]*corev1.Pod{},
		t0: time.Date(2023, 7, 10, 0, 0, 0, 0, time.UTC)}
	getPod := func(_ context.Context, ns, name string) (*corev1.Pod, error) {
		l.podsMu.Lock()
		defer l.podsMu.Unlock()
		if p, ok := l.pods[uidOf(name)]; ok && p.Namespace == ns {
			return p.DeepCopy(), nil
		}
		return nil, fmt.Errorf("pod %s/%s not found", ns, name)
	}
	l.m = gang.NewManager(gang.Config{BindWait: 10 * time.Second, DefaultWaitingTime: time.Hour, Reader: dialect.Pods{}, Tiers: tiers},
		l.binder, getPod, nil, nil)
	for _, n := range c.nodes {
		obj := nodeObject(n.traceNode, n.topo)
		fab.label(obj)
		// What lockstep will read back from the annotation must be the topology the metrics use.
		if t, src, err := gpu.FromNode(obj); err != nil || src != gpu.SourceAnnotation || !t.Equal(n.topo) {
			return nil, fmt.Errorf("node %s: gpu.FromNode gives source %v, error %v, same topology %v", n.name, src, err, t.Equal(n.topo))
		}
		l.m.UpsertNode(obj)
		l.names = append(l.names, n.name)
	}
	return l, nil
}

func uidOf(podName string) types.UID { return types.UID("uid-" + namespace + "-" + podName) }

func (l *lockstepPolicy) podObject(p tracePod, g *gangSpec) *corev1.Pod {
	l.seq++
	req := corev1.ResourceList{
		corev1.ResourceCPU:    *resource.NewMilliQuantity(p.cpuMilli, resource.DecimalSI),
		corev1.ResourceMemory: *resource.NewQuantity(p.memMiB<<20, resource.BinarySI),
		wellknown.ResourceGPU: *resource.NewQuantity(int64(p.numGPU), resource.DecimalSI),
	}
	limits := corev1.ResourceList{wellknown.ResourceGPU: req[wellknown.ResourceGPU].DeepCopy()}
	return &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{
			Namespace: namespace, Name: p.name, UID: uidOf(p.name),
			CreationTimestamp: metav1.NewTime(l.t0.Add(time.Duration(l.seq) * time.Second)),
			Annotations: map[string]string{
				wellknown.AnnotationGangName:         g.name,
				wellknown.AnnotationGangMinAvailable: strconv.Itoa(len(g.pods)),
			},
		},
		Spec: corev1.PodSpec{Containers: []corev1.Container{{
			Name: "main", Image: "registry.k8s.io/pause:3.10",
			Resources: corev1.ResourceRequirements{Requests: req, Limits: limits},
		}}},
		Status: corev1.PodStatus{Phase: corev1.PodPending},
	}
}

func (l *lockstepPolicy) placeGang(c *cluster, g *gangSpec) (ok bool, reason string, err error) {
	objs := make([]*corev1.Pod, len(g.pods))
	l.podsMu.Lock()
	for i, p := range g.pods {
		objs[i] = l.podObject(p, g)
		l.pods[objs[i].UID] = objs[i]
	}
	l.podsMu.Unlock()
	for _, o := range objs {
		l.m.UpsertPod(o.DeepCopy())
	}

	// kube-scheduler: filter over every node, prioritize the feasible ones, take the top score.
	nodes := make([]string, len(objs))
	for i, o := range objs {
		node, failed := schedsim.Place(managerVerbs{l.m}, o.DeepCopy(), l.names)
		if node == "" {
			return false, fmt.Sprintf("member %d of %d (%s): filter passes no node: %s", i+1, len(objs), o.Name, someReason(failed)), nil
		}
		nodes[i] = node
	}

	// Every member's bind, concurrently: each is held until the quorum arrives, then all commit.
	errs := make([]error, len(objs))
	var wg sync.WaitGroup
	for i, o := range objs {
		wg.Go(func() {
			errs[i] = l.m.Bind(context.Background(), o.Namespace, o.Name, o.UID, nodes[i])
		})
	}
	wg.Wait()
	if err := errors.Join(errs...); err != nil {
		return false, "", fmt.Errorf("gang %s: bind: %w", g.name, err)
	}

	for i, o := range objs {
		b, ok := l.binder.Of(o.UID)
		if !ok {
			return false, "", fmt.Errorf("gang %s: pod %s: Bind returned nil but the binder was never called", g.name, o.Name)
		}
		if b.Node != nodes[i] {
			return false, "", fmt.Errorf("gang %s: pod %s: scheduler bound it to %s, the binder got %s", g.name, o.Name, nodes[i], b.Node)
		}
		n := c.byName[b.Node]
		ids := append([]int(nil), b.GPUIDs...)
		sort.Ints(ids)
		if len(ids) == 0 {
			// lockstep bound without choosing indices (no topology, or too few free by index): the
			// device plugin picks, modelled as the lowest free ones. Counted and reported.
			l.noIDs++
			ids = n.lowestFree(g.pods[i].numGPU)
		}
		if l.onPlaced != nil {
			l.onPlaced(g, i, n, ids)
		}
		if err := c.place(g.pods[i], g, n, ids); err != nil {
			return false, "", fmt.Errorf("gang %s: lockstep's placement is inconsistent: %w", g.name, err)
		}
		// The informer's view of the bound pod.
		bound := o.DeepCopy()
		bound.Spec.NodeName = b.Node
		bound.Status.Phase = corev1.PodRunning
		if len(b.GPUIDs) > 0 {
			bound.Annotations[wellknown.AnnotationGPUIDs] = gang.FormatGPUIDs(b.GPUIDs)
		}
		l.podsMu.Lock()
		l.pods[o.UID] = bound
		l.podsMu.Unlock()
		l.m.UpsertPod(bound)
	}
	return true, "", nil
}

// someReason is one of filter's per-node reasons (lockstep gives every node the same one when a
// gang waits), the alphabetically first for a stable output.
func someReason(failed map[string]string) string {
	first := ""
	for n := range failed {
		if first == "" || n < first {
			first = n
		}
	}
	if first == "" {
		return "no reason given"
	}
	return failed[first]
}
