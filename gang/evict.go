package gang

import (
	"context"
	"fmt"

	corev1 "k8s.io/api/core/v1"
	policyv1 "k8s.io/api/policy/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/kubernetes"
	"k8s.io/klog/v2"

	"github.com/lockstep-sched/lockstep/decide"
	"github.com/lockstep-sched/lockstep/wellknown"
)

// Evicter evicts a pod through the Eviction API, which honours PodDisruptionBudgets. dryRun asks
// whether the eviction would be allowed, without evicting.
type Evicter interface {
	Evict(ctx context.Context, namespace, name string, uid types.UID, dryRun bool) error
}

// eviction is one preemption's evictions, carried out once the lock is let go. Its victims are
// the gang's own copies: the snapshot they were chosen from moves on meanwhile.
type eviction struct {
	preemptor *gangInfo
	res       *reservation
	victims   []victim
	cause     decide.Cause
}

// victim is one unit evicted as one (decide.Victim): an ordinary pod, a whole gang, or one member
// beyond its gang's quorum (extra).
type victim struct {
	pods  []podRef
	gang  string
	extra bool
}

type podRef struct {
	namespace, name string
	uid             types.UID
}

func (p podRef) key() string { return p.namespace + "/" + p.name }

// evictRun carries one eviction out, after the lock that decided it was let go.
type evictRun struct {
	m *Manager
	eviction
}

// run asks the apiserver whether every victim may go before evicting any: a budget that refused
// one member of a victim gang after its mates were gone would leave that gang partial.
func (r evictRun) run() {
	m, e := r.m, r.eviction
	ctx, cancel := context.WithTimeout(context.Background(), m.cfg.CommitTimeout)
	defer cancel()
	for _, u := range e.victims {
		for _, p := range u.pods {
			if err := m.cfg.Evicter.Evict(ctx, p.namespace, p.name, p.uid, true); err != nil && !apierrors.IsNotFound(err) {
				r.refused(p, err)
				return
			}
		}
	}
	taken := map[string]int{}
	for _, u := range e.victims {
		for _, p := range u.pods {
			err := m.cfg.Evicter.Evict(ctx, p.namespace, p.name, p.uid, false)
			m.metrics.observeEviction(e.cause.Kind, err)
			if err != nil && !apierrors.IsNotFound(err) {
				r.failed(p, err)
			} else if u.extra {
				taken[u.gang]++
			}
		}
	}
	r.countExtrasTaken(taken)
}

// countExtrasTaken adds the extras each gang lost to its count in /debug/gangs.
func (r evictRun) countExtrasTaken(taken map[string]int) {
	m := r.m
	if len(taken) == 0 {
		return
	}
	m.locked(func() {
		for key, n := range taken {
			if g := m.ledger.gangs[key]; g != nil {
				g.extrasTaken += n
			}
		}
	})
}

// failed reports an eviction that failed after its dry run passed (the pod changed, or the
// apiserver failed): the preemptor's reason and an Event say so, not only the log. Its reservation
// stays until it expires: the victims that did go free capacity for it.
func (r evictRun) failed(p podRef, err error) {
	m, e := r.m, r.eviction
	klog.ErrorS(err, "Eviction failed after its dry run passed", "pod", p.key(), "preemptor", e.preemptor.key)
	var fx effects
	m.locked(func() {
		m.ledger.unmarkEvicting(p.uid)
		g := e.preemptor
		g.lastReason = fmt.Sprintf("gang %s: preempting: evicting pod %s failed after its dry run passed: %v; its reservation stays until %s",
			g.key, p.key(), err, e.res.expires.UTC().Format("15:04:05"))
		for _, s := range e.res.slots {
			if s.pod != nil {
				fx.podEvent(s.pod, corev1.EventTypeWarning, wellknown.ReasonGangPreempting, g.lastReason)
			}
		}
		fx.touched(g.key)
	})
	m.emit(&fx)
}

// refused gives up a preemption the apiserver would not allow: the preemptor's
// reservation goes, the refused pod is left alone for decide.EvictRefusedFor, and the gang plans
// again.
func (r evictRun) refused(p podRef, err error) {
	m, e := r.m, r.eviction
	var fx effects
	m.locked(func() {
		for uid, at := range m.evictRefused { // forget the old ones, so the map stays small
			if m.now().Sub(at) >= decide.EvictRefusedFor {
				delete(m.evictRefused, uid)
			}
		}
		m.evictRefused[p.uid] = m.now()
		for _, u := range e.victims { // the dry run refused before any eviction was made
			for _, v := range u.pods {
				m.ledger.unmarkEvicting(v.uid)
			}
		}
		g := e.preemptor
		g.lastReason = fmt.Sprintf("gang %s: preemption given up: evicting pod %s was refused: %v; it plans again without that pod", g.key, p.key(), err)
		klog.InfoS("Gang preemption refused", "gang", g.key, "pod", p.key(), "err", err)
		if e.res.state == decide.Reserving {
			m.book.release(e.res)
			m.wake.capacityFreed(g.key, &fx)
		}
		for _, q := range g.sortedMembers() {
			if !q.Holds() && !q.Terminal {
				fx.podEvent(q, corev1.EventTypeWarning, wellknown.ReasonGangWaiting, g.lastReason)
			}
		}
		m.wake.gang(g, wellknown.ConditionReasonPreemptionRefused, g.lastReason, &fx)
		fx.touched(g.key)
	})
	m.emit(&fx)
}

// APIEvicter posts pods/eviction through client-go.
type APIEvicter struct {
	Client kubernetes.Interface
}

// Evict evicts the pod of that uid (a pod recreated under its name is left alone). A budget's
// refusal is a 429 with Retry-After, which client-go's typed client would wait out and retry ten
// times; lockstep wants the refusal at once, to choose other victims, so it posts without retries.
func (e APIEvicter) Evict(ctx context.Context, namespace, name string, uid types.UID, dryRun bool) error {
	opts := &metav1.DeleteOptions{Preconditions: &metav1.Preconditions{UID: &uid}}
	if dryRun {
		opts.DryRun = []string{metav1.DryRunAll}
	}
	ev := &policyv1.Eviction{
		TypeMeta:      metav1.TypeMeta{APIVersion: "policy/v1", Kind: "Eviction"},
		ObjectMeta:    metav1.ObjectMeta{Namespace: namespace, Name: name},
		DeleteOptions: opts,
	}
	err := e.Client.CoreV1().RESTClient().Post().Namespace(namespace).Resource("pods").Name(name).
		SubResource("eviction").MaxRetries(0).Body(ev).Do(ctx).Error()
	if err != nil {
		return fmt.Errorf("evicting pod %s/%s: %w", namespace, name, err)
	}
	return nil
}
