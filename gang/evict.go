package gang

import (
	"context"
	"fmt"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	policyv1 "k8s.io/api/policy/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/kubernetes"
	"k8s.io/klog/v2"

	"github.com/lockstep-sched/lockstep/wellknown"
)

// Evicter evicts a pod through the Eviction API, which honours PodDisruptionBudgets. dryRun asks
// whether the eviction would be allowed, without evicting.
type Evicter interface {
	Evict(ctx context.Context, namespace, name string, uid types.UID, dryRun bool) error
}

// evictRefusedFor is how long a pod whose eviction was refused (a PodDisruptionBudget, say) is
// not chosen as a victim again: the next plan looks for others instead of asking again at once.
const evictRefusedFor = time.Minute

// eviction is one preemption's evictions, carried out once the lock is let go.
type eviction struct {
	preemptor *gangInfo
	res       *reservation
	victims   []victimUnit
	cause     evictCause
}

// mayPreempt reports whether the gang may evict others for its quorum: preemption is on and its
// members do not say preemptionPolicy: Never.
func (m *Manager) mayPreempt(g *gangInfo) bool {
	_, ref := g.reference()
	return m.cfg.Evicter != nil && ref != nil && !ref.preemptNever
}

func (m *Manager) evictRefusedLately(p *podInfo) bool {
	at, ok := m.evictRefused[p.uid]
	return ok && m.now().Sub(at) < evictRefusedFor
}

// evictCause is why a gang evicts: the words of its reason and Events, and the metric's label.
type evictCause struct {
	kind evictKind
	// queue is, for reclaim, the queue below its fair share the evictions take capacity back for.
	queue string
}

type evictKind string

const (
	// byPriority: lower-priority pods make room for the gang's quorum (victims.go).
	byPriority evictKind = "priority"
	// forQueue: queues above their fair share give back to the gang's queue (reclaim.go).
	forQueue evictKind = "reclaim"
	// forQuorum: members beyond other gangs' quorums make room for the gang's (extras.go).
	forQuorum evictKind = "extras"
)

// verb says, in the preemptor's reason, what it is doing to the victims.
func (c evictCause) verb() string {
	switch c.kind {
	case forQueue:
		return "reclaiming for " + c.queue + ", below its fair share,"
	case forQuorum:
		return "taking back"
	}
	return "preempting"
}

// victimWords tells a victim's pods why they go.
func (m *Manager) victimWords(c evictCause, g *gangInfo, prio int32, u victimUnit) string {
	var why string
	switch c.kind {
	case forQueue:
		why = fmt.Sprintf("reclaimed for gang %s of %s, which is below its fair share while this pod's queue is above its own", g.key, c.queue)
	case forQuorum:
		return fmt.Sprintf("evicted as a member beyond gang %s's min-available %d, for gang %s (priority %d) to place its quorum: members beyond a gang's quorum yield to the quorums of gangs of equal or higher priority; annotation %s: \"true\" keeps a member",
			u.gang, m.ledger.gangs[u.gang].minAvailable(), g.key, prio, wellknown.AnnotationKeepExtras)
	default:
		why = fmt.Sprintf("preempted by gang %s (priority %d) to place its quorum", g.key, prio)
	}
	if u.gang != "" && !u.extra {
		why += fmt.Sprintf("; lockstep evicts gang %s whole (%d members)", u.gang, len(u.pods))
	}
	return why
}

// preemptLocked records a preemption the gang's new reservation r depends on: the reasons, the
// Events naming victims and preemptor to each other, and the evictions to make.
func (m *Manager) preemptLocked(g *gangInfo, r *reservation, victims []victimUnit, cause evictCause, fx *effects) {
	names := make([]string, len(victims))
	for i, u := range victims {
		names[i] = fmt.Sprintf("%s (priority %d)", u.name(), u.prio)
	}
	list := strings.Join(names, ", ")
	g.lastReason = fmt.Sprintf("gang %s: %s %s for its quorum; %d members reserved on what they free, until %s",
		g.key, cause.verb(), list, len(r.slots), r.expires.UTC().Format("15:04:05"))
	klog.InfoS("Gang preempting", "gang", g.key, "priority", r.priority, "victims", list, "cause", cause.kind, "queue", cause.queue)
	for _, u := range victims {
		msg := m.victimWords(cause, g, r.priority, u)
		for _, p := range u.pods {
			p.evicting = true
			fx.podEvent(p, corev1.EventTypeWarning, wellknown.ReasonPreempted, msg)
		}
	}
	for _, s := range r.slots {
		if s.pod != nil {
			fx.podEvent(s.pod, corev1.EventTypeNormal, wellknown.ReasonGangPreempting, g.lastReason)
		}
	}
	fx.evictions = append(fx.evictions, eviction{preemptor: g, res: r, victims: victims, cause: cause})
}

// evict asks the apiserver whether every victim may go before evicting any: a budget that
// refused one member of a victim gang after its mates were gone would leave that gang partial.
func (m *Manager) evict(e eviction) {
	ctx, cancel := context.WithTimeout(context.Background(), m.cfg.CommitTimeout)
	defer cancel()
	for _, u := range e.victims {
		for _, p := range u.pods {
			if err := m.cfg.Evicter.Evict(ctx, p.namespace, p.name, p.uid, true); err != nil && !apierrors.IsNotFound(err) {
				m.preemptionRefused(e, p, err)
				return
			}
		}
	}
	taken := map[string]int{}
	for _, u := range e.victims {
		for _, p := range u.pods {
			err := m.cfg.Evicter.Evict(ctx, p.namespace, p.name, p.uid, false)
			m.metrics.observeEviction(e.cause.kind, err)
			if err != nil && !apierrors.IsNotFound(err) {
				m.evictionFailed(e, p, err)
			} else if u.extra {
				taken[u.gang]++
			}
		}
	}
	m.countExtrasTaken(taken)
}

// countExtrasTaken adds the extras each gang lost to its count in /debug/gangs.
func (m *Manager) countExtrasTaken(taken map[string]int) {
	if len(taken) == 0 {
		return
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	for key, n := range taken {
		if g := m.ledger.gangs[key]; g != nil {
			g.extrasTaken += n
		}
	}
}

// evictionFailed reports an eviction that failed after its dry run passed (the pod changed, or the
// apiserver failed): the preemptor's reason and an Event say so, not only the log. Its reservation
// stays until it expires: the victims that did go free capacity for it.
func (m *Manager) evictionFailed(e eviction, p *podInfo, err error) {
	klog.ErrorS(err, "Eviction failed after its dry run passed", "pod", p.key(), "preemptor", e.preemptor.key)
	var fx effects
	m.mu.Lock()
	m.unmarkEvicting(p)
	g := e.preemptor
	g.lastReason = fmt.Sprintf("gang %s: preempting: evicting pod %s failed after its dry run passed: %v; its reservation stays until %s",
		g.key, p.key(), err, e.res.expires.UTC().Format("15:04:05"))
	for _, s := range e.res.slots {
		if s.pod != nil {
			fx.podEvent(s.pod, corev1.EventTypeWarning, wellknown.ReasonGangPreempting, g.lastReason)
		}
	}
	fx.touched(g.key)
	m.mu.Unlock()
	m.apply(&fx)
}

// preemptionRefused gives up a preemption the apiserver would not allow: the preemptor's
// reservation goes, the refused pod is left alone for evictRefusedFor, and the gang plans again.
func (m *Manager) preemptionRefused(e eviction, p *podInfo, err error) {
	var fx effects
	m.mu.Lock()
	for uid, at := range m.evictRefused { // forget the old ones, so the map stays small
		if m.now().Sub(at) >= evictRefusedFor {
			delete(m.evictRefused, uid)
		}
	}
	m.evictRefused[p.uid] = m.now()
	for _, u := range e.victims { // the dry run refused before any eviction was made
		for _, v := range u.pods {
			m.unmarkEvicting(v)
		}
	}
	g := e.preemptor
	g.lastReason = fmt.Sprintf("gang %s: preemption given up: evicting pod %s was refused: %v; it plans again without that pod", g.key, p.key(), err)
	klog.InfoS("Gang preemption refused", "gang", g.key, "pod", p.key(), "err", err)
	if e.res.state == reserving {
		m.book.release(e.res)
		m.capacityFreedLocked(g.key, &fx)
	}
	for _, q := range g.sortedMembers() {
		if !q.holds() && !q.terminal {
			fx.podEvent(q, corev1.EventTypeWarning, wellknown.ReasonGangWaiting, g.lastReason)
		}
	}
	m.wakeLocked(g, wellknown.ConditionReasonPreemptionRefused, g.lastReason, &fx)
	fx.touched(g.key)
	m.mu.Unlock()
	m.apply(&fx)
}

// unmarkEvicting takes back a victim's evicting mark: its eviction was refused or failed, and it
// stays. The ledger may hold a newer record of the pod than the victim's.
func (m *Manager) unmarkEvicting(p *podInfo) {
	if q := m.ledger.pods[p.uid]; q != nil {
		q.evicting = false
	}
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
