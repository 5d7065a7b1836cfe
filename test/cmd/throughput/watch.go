package main

import (
	"context"
	"fmt"
	"sort"
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/cache"
)

// pollEvery is how often waits look at what the informer recorded. Bind times come from the
// informer's event handler, not from these polls, so the interval costs no precision.
const pollEvery = 50 * time.Millisecond

// bindWatch records, from a pod informer on the bench namespace, when each pod was first seen
// bound (spec.nodeName set). Pods keep their names from mode to mode; reset forgets the previous
// mode's binds once its pods are gone.
type bindWatch struct {
	store cache.Store
	mu    sync.Mutex
	at    map[string]time.Time // pod name -> when this process first saw it bound
}

func watchBinds(ctx context.Context, client kubernetes.Interface) (*bindWatch, error) {
	factory := informers.NewSharedInformerFactoryWithOptions(client, 0, informers.WithNamespace(namespace),
		// Only names, labels, spec.nodeName and conditions are read: keep the copies small.
		informers.WithTransform(func(obj any) (any, error) {
			if p, ok := obj.(*corev1.Pod); ok {
				p.ManagedFields = nil
			}
			return obj, nil
		}))
	inf := factory.Core().V1().Pods().Informer()
	b := &bindWatch{store: inf.GetStore(), at: map[string]time.Time{}}
	_, err := inf.AddEventHandler(cache.ResourceEventHandlerFuncs{
		AddFunc:    b.saw,
		UpdateFunc: func(_, obj any) { b.saw(obj) },
	})
	if err != nil {
		return nil, err
	}
	factory.Start(ctx.Done())
	if !cache.WaitForCacheSync(ctx.Done(), inf.HasSynced) {
		return nil, fmt.Errorf("pod informer did not sync")
	}
	return b, nil
}

func (b *bindWatch) saw(obj any) {
	p, ok := obj.(*corev1.Pod)
	if !ok || p.Spec.NodeName == "" {
		return
	}
	now := time.Now()
	b.mu.Lock()
	if _, seen := b.at[p.Name]; !seen {
		b.at[p.Name] = now
	}
	b.mu.Unlock()
}

// boundAt returns when each named pod was seen bound; unbound pods are missing from the map.
func (b *bindWatch) boundAt(names []string) map[string]time.Time {
	b.mu.Lock()
	defer b.mu.Unlock()
	out := make(map[string]time.Time, len(names))
	for _, n := range names {
		if t, ok := b.at[n]; ok {
			out[n] = t
		}
	}
	return out
}

func (b *bindWatch) reset() {
	b.mu.Lock()
	b.at = map[string]time.Time{}
	b.mu.Unlock()
}

// awaitBound waits until every named pod is bound, or until none of them has bound for stall
// (counting from since). It returns the bind times and the pods still unbound.
func (b *bindWatch) awaitBound(ctx context.Context, names []string, since time.Time, stall time.Duration) (map[string]time.Time, []string) {
	var at map[string]time.Time
	_ = wait.PollUntilContextCancel(ctx, pollEvery, true, func(context.Context) (bool, error) {
		at = b.boundAt(names)
		if len(at) == len(names) {
			return true, nil
		}
		progress := since
		for _, t := range at {
			if t.After(progress) {
				progress = t
			}
		}
		return time.Since(progress) > stall, nil
	})
	var unbound []string
	for _, n := range names {
		if _, ok := at[n]; !ok {
			unbound = append(unbound, n)
		}
	}
	return at, unbound
}

// storeTimeout bounds how long created pods may take to reach the informer, and deleted ones to
// leave it.
const storeTimeout = 2 * time.Minute

// awaitStore waits until every named pod is in the informer (present) or none is (!present): the
// pods just created have arrived, or the ones just deleted are gone.
func (b *bindWatch) awaitStore(ctx context.Context, names []string, present bool) error {
	return b.awaitEach(ctx, names, fmt.Sprintf("present=%t in the informer", present), func(_ *corev1.Pod, ok bool) bool {
		return ok == present
	})
}

// awaitEach waits until holds is true of every named pod (nil and !ok when the informer has
// none of that name); what says what holds means, for the error.
func (b *bindWatch) awaitEach(ctx context.Context, names []string, what string, holds func(p *corev1.Pod, ok bool) bool) error {
	missing := func() int {
		n := 0
		for _, name := range names {
			obj, ok, _ := b.store.GetByKey(namespace + "/" + name)
			p, _ := obj.(*corev1.Pod)
			if !holds(p, ok) {
				n++
			}
		}
		return n
	}
	err := wait.PollUntilContextTimeout(ctx, pollEvery, storeTimeout, true, func(context.Context) (bool, error) {
		return missing() == 0, nil
	})
	if err != nil {
		return fmt.Errorf("waiting for %d pods to be %s (%d are not): %w", len(names), what, missing(), err)
	}
	return nil
}

// awaitEmpty waits until the informer holds no pod: a mode's clean-up is complete.
func (b *bindWatch) awaitEmpty(ctx context.Context) error {
	err := wait.PollUntilContextTimeout(ctx, pollEvery, storeTimeout, true, func(context.Context) (bool, error) {
		return len(b.store.ListKeys()) == 0, nil
	})
	if err != nil {
		return fmt.Errorf("waiting for the namespace to empty (%d pods left): %w", len(b.store.ListKeys()), err)
	}
	return nil
}

// whyUnbound describes unbound pods for a stall report: how many, and the scheduler's last word
// on the first of them (its PodScheduled condition).
func (b *bindWatch) whyUnbound(unbound []string) string {
	sort.Strings(unbound)
	first := unbound[0]
	why := "no PodScheduled condition"
	if obj, ok, _ := b.store.GetByKey(namespace + "/" + first); ok {
		for _, c := range obj.(*corev1.Pod).Status.Conditions {
			if c.Type == corev1.PodScheduled {
				why = fmt.Sprintf("PodScheduled=%s %s: %s", c.Status, c.Reason, c.Message)
			}
		}
	}
	return fmt.Sprintf("%d unbound, first %s (%s)", len(unbound), first, why)
}

// awaitAnnotated waits until every named pod carries the annotation key: a controller has done
// its part for them (Volcano's makes a PodGroup for each pod outside a gang and names it there).
func (b *bindWatch) awaitAnnotated(ctx context.Context, names []string, key string) error {
	return b.awaitEach(ctx, names, "annotated "+key, func(p *corev1.Pod, ok bool) bool {
		return ok && p.Annotations[key] != ""
	})
}

// nodeOf is the node a pod is bound to, as the informer has it ("" when unbound or unknown).
func (b *bindWatch) nodeOf(name string) string {
	obj, ok, _ := b.store.GetByKey(namespace + "/" + name)
	if !ok {
		return ""
	}
	return obj.(*corev1.Pod).Spec.NodeName
}
