package inspect

import (
	"context"
	"fmt"
	"net"
	"sort"
	"strconv"
	"strings"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
)

// DefaultSelector is the label the Helm chart and deploy/manifests both put on the lockstep pod.
// The gpu-agent's pods carry it too; the container name tells them apart.
const DefaultSelector = "app.kubernetes.io/part-of=lockstep"

// Container is lockstep's container in the chart's and the manifests' pod.
const Container = "lockstep"

// DefaultDebugPort is the port of lockstep's --debug-listen default, 127.0.0.1:8889.
const DefaultDebugPort = 8889

// Target is the lockstep pod to read and the port its debug address listens on inside the pod.
type Target struct {
	Pod  *corev1.Pod
	Port int
}

// Name is the pod as namespace/name.
func (t Target) Name() string { return t.Pod.Namespace + "/" + t.Pod.Name }

// Finder finds the lockstep pod by label.
type Finder struct {
	Client kubernetes.Interface
	// Namespace is where to look; "" looks in every namespace.
	Namespace string
	Selector  string
	// Port overrides the debug port read from the container's --debug-listen; 0 keeps it.
	Port int
}

// NotInstalledError says no lockstep pod was found, and where the search looked.
type NotInstalledError struct {
	Selector, Namespace string
	// Others counts pods that carry the label but have no lockstep container (the gpu-agent's).
	Others int
}

func (e *NotInstalledError) Error() string {
	where := "in any namespace"
	if e.Namespace != "" {
		where = "in namespace " + e.Namespace
	}
	msg := fmt.Sprintf("lockstep is not installed or not found: no pod labelled %s with a container named %q %s", e.Selector, Container, where)
	if e.Others > 0 {
		msg += fmt.Sprintf(" (%d labelled pods have no such container)", e.Others)
	}
	return msg + "; install it (docs/helm.md), or point at it with --lockstep-namespace and --lockstep-selector"
}

// Find picks the lockstep pod to read: a running and ready one first, the one whose scheduler
// leads next, then by name so that repeated runs agree.
func (f Finder) Find(ctx context.Context) (Target, error) {
	sel := f.Selector
	if sel == "" {
		sel = DefaultSelector
	}
	list, err := f.Client.CoreV1().Pods(f.Namespace).List(ctx, metav1.ListOptions{LabelSelector: sel})
	if err != nil {
		return Target{}, f.listError(sel, err)
	}
	var found []*corev1.Pod
	for i := range list.Items {
		if lockstepContainer(&list.Items[i]) != nil {
			found = append(found, &list.Items[i])
		}
	}
	if len(found) == 0 {
		return Target{}, &NotInstalledError{Selector: sel, Namespace: f.Namespace, Others: len(list.Items)}
	}
	leaders := f.leaders(ctx, found)
	sort.SliceStable(found, func(i, j int) bool { return better(found[i], found[j], leaders) })
	return f.target(found[0])
}

func (f Finder) listError(sel string, err error) error {
	where := "in all namespaces"
	if f.Namespace != "" {
		where = "in namespace " + f.Namespace
	}
	if apierrors.IsForbidden(err) {
		return fmt.Errorf("finding lockstep: you may not list pods %s (RBAC: list on pods); if you may read the lockstep namespace only, pass --lockstep-namespace: %w", where, err)
	}
	return fmt.Errorf("finding lockstep: listing pods labelled %s %s: %w", sel, where, err)
}

func (f Finder) target(p *corev1.Pod) (Target, error) {
	if f.Port > 0 {
		return Target{Pod: p, Port: f.Port}, nil
	}
	port, err := debugPort(lockstepContainer(p))
	if err != nil {
		return Target{}, fmt.Errorf("lockstep pod %s/%s: %w", p.Namespace, p.Name, err)
	}
	return Target{Pod: p, Port: port}, nil
}

func lockstepContainer(p *corev1.Pod) *corev1.Container {
	for i := range p.Spec.Containers {
		if p.Spec.Containers[i].Name == Container {
			return &p.Spec.Containers[i]
		}
	}
	return nil
}

// debugPort reads the port of the container's --debug-listen, so that a release that moved it
// needs no flag here.
func debugPort(c *corev1.Container) (int, error) {
	addr, set := flagValue(append(append([]string{}, c.Command...), c.Args...), "--debug-listen")
	if !set {
		return DefaultDebugPort, nil
	}
	if addr == "" {
		return 0, fmt.Errorf("container %s runs with --debug-listen empty, which turns the debug address off", c.Name)
	}
	_, port, err := net.SplitHostPort(addr)
	if err != nil {
		return 0, fmt.Errorf("container %s: --debug-listen=%q: %w", c.Name, addr, err)
	}
	n, err := strconv.Atoi(port)
	if err != nil {
		return 0, fmt.Errorf("container %s: --debug-listen=%q: port %q is not a number", c.Name, addr, port)
	}
	return n, nil
}

// flagValue finds --name=value or --name value in args; set is false when the flag is absent.
func flagValue(args []string, name string) (value string, set bool) {
	for i, a := range args {
		if v, ok := strings.CutPrefix(a, name+"="); ok {
			return v, true
		}
		if a == name && i+1 < len(args) {
			return args[i+1], true
		}
	}
	return "", false
}

// leaders names the pods whose scheduler holds the Lease lockstep follows
// (--leader-election-lease): only the leader's lockstep is called, so only it has reservations to
// show. Best effort: without the Lease or the right to read it, no pod leads.
func (f Finder) leaders(ctx context.Context, pods []*corev1.Pod) map[*corev1.Pod]bool {
	out := map[*corev1.Pod]bool{}
	if len(pods) < 2 {
		return out
	}
	for _, p := range pods {
		ref, _ := flagValue(lockstepContainer(p).Args, "--leader-election-lease")
		ns, name, ok := strings.Cut(ref, "/")
		if !ok {
			continue
		}
		lease, err := f.Client.CoordinationV1().Leases(ns).Get(ctx, name, metav1.GetOptions{})
		if err != nil || lease.Spec.HolderIdentity == nil {
			continue
		}
		// The scheduler's identity is <hostname>_<uuid>, and a pod's hostname is its name.
		out[p] = strings.HasPrefix(*lease.Spec.HolderIdentity, p.Name+"_")
	}
	return out
}

func better(a, b *corev1.Pod, leaders map[*corev1.Pod]bool) bool {
	if ra, rb := ready(a), ready(b); ra != rb {
		return ra
	}
	if leaders[a] != leaders[b] {
		return leaders[a]
	}
	if a.Namespace != b.Namespace {
		return a.Namespace < b.Namespace
	}
	return a.Name < b.Name
}

func ready(p *corev1.Pod) bool {
	if p.Status.Phase != corev1.PodRunning || p.DeletionTimestamp != nil {
		return false
	}
	for _, c := range p.Status.Conditions {
		if c.Type == corev1.PodReady {
			return c.Status == corev1.ConditionTrue
		}
	}
	return false
}
