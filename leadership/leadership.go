// Package leadership follows the leader-election Lease of the kube-scheduler that lockstep
// serves. With several scheduler replicas only the leader schedules, so only the leader's
// lockstep is called; the standbys keep their informers warm for the hand-over. What lockstep
// writes on its own initiative (PodGroup statuses, pod conditions) must come from the leader's
// alone: a standby has no reservations, so its view of a gang differs, and two replicas writing
// their views would overwrite each other forever.
//
// lockstep does not take part in the election: it reads the Lease the scheduler holds and
// recognises its own scheduler by identity. kube-scheduler names itself <hostname>_<uuid>, and
// the containers of one pod share its hostname.
package leadership

import (
	"context"
	"strings"
	"sync"
	"sync/atomic"

	coordinationv1 "k8s.io/api/coordination/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/cache"
	"k8s.io/klog/v2"
)

// Follower says whether this replica's scheduler holds the Lease.
type Follower struct {
	namespace, name, identity string
	client                    kubernetes.Interface

	leading atomic.Bool
	mu      sync.Mutex
	holder  string
	onLead  []func()
}

// Always is a follower for a scheduler without leader election: it always leads.
func Always() *Follower {
	f := &Follower{}
	f.leading.Store(true)
	return f
}

// New follows Lease namespace/name; identity is this pod's hostname, the prefix of its
// scheduler's holder identity.
func New(client kubernetes.Interface, namespace, name, identity string) *Follower {
	return &Follower{client: client, namespace: namespace, name: name, identity: identity}
}

// Leading reports whether this replica's scheduler holds the Lease now.
func (f *Follower) Leading() bool { return f.leading.Load() }

// Holder is the Lease's holder identity as last seen ("" before the first look or without one).
func (f *Follower) Holder() string {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.holder
}

// OnStartedLeading runs fn (on the informer's goroutine) each time this replica becomes leader:
// what a standby left unwritten is written then.
func (f *Follower) OnStartedLeading(fn func()) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.onLead = append(f.onLead, fn)
}

// Run watches the Lease until ctx ends; it returns at once for Always. synced reports when the
// first look is in.
func (f *Follower) Run(ctx context.Context) (synced func() bool) {
	if f.client == nil {
		return func() bool { return true }
	}
	factory := informers.NewSharedInformerFactoryWithOptions(f.client, 0, informers.WithNamespace(f.namespace),
		informers.WithTweakListOptions(func(o *metav1.ListOptions) { o.FieldSelector = "metadata.name=" + f.name }))
	inf := factory.Coordination().V1().Leases().Informer()
	_, _ = inf.AddEventHandler(cache.ResourceEventHandlerFuncs{
		AddFunc:    func(obj any) { f.observe(obj) },
		UpdateFunc: func(_, obj any) { f.observe(obj) },
		DeleteFunc: func(obj any) {
			if lease, ok := obj.(*coordinationv1.Lease); !ok || lease.Name == f.name {
				f.see("")
			}
		},
	})
	factory.Start(ctx.Done())
	return inf.HasSynced
}

func (f *Follower) observe(obj any) {
	lease, ok := obj.(*coordinationv1.Lease)
	if ok && lease.Name != f.name {
		return // the field selector keeps others out; a fake client's list may not
	}
	if !ok || lease.Spec.HolderIdentity == nil {
		f.see("")
		return
	}
	f.see(*lease.Spec.HolderIdentity)
}

func (f *Follower) see(holder string) {
	mine := holder != "" && (holder == f.identity || strings.HasPrefix(holder, f.identity+"_"))
	if was := f.leading.Swap(mine); mine && !was {
		f.mu.Lock()
		callbacks := f.onLead
		f.mu.Unlock()
		for _, fn := range callbacks {
			fn()
		}
	}
	// Published last, so that whoever sees the new holder sees what followed from it.
	f.mu.Lock()
	changed := holder != f.holder
	f.holder = holder
	f.mu.Unlock()
	if changed {
		klog.InfoS("Scheduler leader seen", "lease", f.namespace+"/"+f.name, "holder", holder, "leading", mine)
	}
}
