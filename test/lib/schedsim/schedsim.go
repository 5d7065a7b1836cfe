// Package schedsim stands in for kube-scheduler and the apiserver around a gang manager, for the
// programs and tests that drive one in process: the gang package's tests, the packing replay
// (make bench-packing) and the verb bench's in-process measurements. It holds the one fake binder
// they share and the one scheduling step they repeat: filter, prioritize, take the best node.
//
// It imports no lockstep package, so that package gang's own tests can use it: Verbs is the
// manager as the scheduler sees it, and callers adapt theirs in a line.
package schedsim

import (
	"context"
	"sync"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"
)

// Binding is one binding a manager asked its Binder to write.
type Binding struct {
	Namespace, Name string
	UID             types.UID
	Node            string
	GPUIDs          []int
}

// Pod is the bound pod's namespace/name.
func (b Binding) Pod() string { return b.Namespace + "/" + b.Name }

// Binder plays the apiserver's side of bindings: it records each one and succeeds, unless told
// otherwise. Errors are set per pod and stay until cleared; a block holds every call until it is
// closed; a check may veto a call (a test's invariants). The zero value is ready to use.
type Binder struct {
	mu    sync.Mutex
	calls []Binding
	// latest indexes calls by UID: the packing replay asks for each of thousands of pods.
	latest map[types.UID]int
	errs   map[string]error
	block  chan struct{}
	check  func(Binding) error
}

// Bind has gang.Binder's signature.
func (b *Binder) Bind(ctx context.Context, namespace, name string, uid types.UID, node string, gpuIDs []int) error {
	c := Binding{Namespace: namespace, Name: name, UID: uid, Node: node, GPUIDs: gpuIDs}
	b.mu.Lock()
	block, check := b.block, b.check
	b.mu.Unlock()
	if block != nil {
		select {
		case <-block:
		case <-ctx.Done():
			return ctx.Err()
		}
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	if err := b.errs[c.Pod()]; err != nil {
		return err
	}
	if check != nil {
		if err := check(c); err != nil {
			return err
		}
	}
	if b.latest == nil {
		b.latest = map[types.UID]int{}
	}
	b.latest[uid] = len(b.calls)
	b.calls = append(b.calls, c)
	return nil
}

// Fail makes every binding of pod (namespace/name) fail with err; nil clears it.
func (b *Binder) Fail(pod string, err error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.errs == nil {
		b.errs = map[string]error{}
	}
	if err == nil {
		delete(b.errs, pod)
	} else {
		b.errs[pod] = err
	}
}

// Block holds every binding until release is closed.
func (b *Binder) Block(release chan struct{}) {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.block = release
}

// Check runs check before recording each binding; an error fails the binding.
func (b *Binder) Check(check func(Binding) error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.check = check
}

// Bound returns the successful bindings so far, in order.
func (b *Binder) Bound() []Binding {
	b.mu.Lock()
	defer b.mu.Unlock()
	return append([]Binding(nil), b.calls...)
}

// Bindings maps each bound pod (namespace/name) to its node.
func (b *Binder) Bindings() map[string]string {
	out := map[string]string{}
	for _, c := range b.Bound() {
		out[c.Pod()] = c.Node
	}
	return out
}

// Count is how many bindings succeeded.
func (b *Binder) Count() int {
	b.mu.Lock()
	defer b.mu.Unlock()
	return len(b.calls)
}

// Of returns the latest successful binding of a pod by UID.
func (b *Binder) Of(uid types.UID) (Binding, bool) {
	b.mu.Lock()
	defer b.mu.Unlock()
	i, ok := b.latest[uid]
	if !ok {
		return Binding{}, false
	}
	return b.calls[i], true
}

// Verbs is a manager as kube-scheduler calls it, with filter's answer given as the nodes that
// pass.
type Verbs interface {
	Filter(pod *corev1.Pod, nodes []string) (passing []string, failed map[string]string)
	Prioritize(pod *corev1.Pod, nodes []string, dst []int64) []int64
}

// Place is one scheduling step as kube-scheduler takes it with lockstep as its only scorer: filter
// the offered nodes, prioritize those that pass, take the highest score (the first on ties). It
// returns "" and filter's reasons when no node passes.
func Place(v Verbs, pod *corev1.Pod, nodes []string) (node string, failed map[string]string) {
	passing, failed := v.Filter(pod, nodes)
	if len(passing) == 0 {
		return "", failed
	}
	scores := v.Prioritize(pod, passing, nil)
	best := 0
	for i := range scores {
		if scores[i] > scores[best] {
			best = i
		}
	}
	return passing[best], nil
}
