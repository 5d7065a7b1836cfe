package e2e

import (
	"context"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/lockstep-sched/lockstep/views"
	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/tools/cache"
)

// kube-scheduler's own preemption, with lockstep's preempt verb in the loop: it goes ahead for
// ordinary pods as it would without lockstep, and never breaks a bound gang.

// deletionLog records, from a watch, each pod of a namespace the first time it is seen being
// deleted (a deletionTimestamp) or gone, so that no eviction slips between two looks.
type deletionLog struct {
	mu    sync.Mutex
	names []string
	seen  map[string]bool
}

func watchDeletions(t *testing.T, ctx context.Context, ns string) *deletionLog {
	l := &deletionLog{seen: map[string]bool{}}
	record := func(obj any, gone bool) {
		if tomb, ok := obj.(cache.DeletedFinalStateUnknown); ok {
			obj = tomb.Obj
		}
		p, ok := obj.(*corev1.Pod)
		if !ok || (!gone && p.DeletionTimestamp == nil) {
			return
		}
		l.mu.Lock()
		defer l.mu.Unlock()
		if !l.seen[p.Name] {
			l.seen[p.Name] = true
			l.names = append(l.names, p.Name)
		}
	}
	watchPods(t, ctx, ns, cache.ResourceEventHandlerFuncs{
		AddFunc:    func(o any) { record(o, false) },
		UpdateFunc: func(_, o any) { record(o, false) },
		DeleteFunc: func(o any) { record(o, true) },
	})
	return l
}

// deleted lists the pods seen being deleted, in the order they were.
func (l *deletionLog) deleted() []string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return append([]string(nil), l.names...)
}

// assertNoneFor watches for a bounded window in which an eviction would show, failing the test if
// any pod is seen being deleted, then or before.
func (l *deletionLog) assertNoneFor(t *testing.T, ctx context.Context, window time.Duration) {
	t.Helper()
	err := wait.PollUntilContextTimeout(ctx, 100*time.Millisecond, window, true, func(context.Context) (bool, error) {
		if gone := l.deleted(); len(gone) > 0 {
			return false, fmt.Errorf("pods evicted: %v", gone)
		}
		return false, nil
	})
	require.True(t, wait.Interrupted(err), "%v", err)
}

// preemptAnswers is how many preempt calls lockstep has answered with 200, from its /metrics.
func preemptAnswers(t *testing.T) int {
	t.Helper()
	n, _, err := env.lockstep.Metric(context.Background(), `lockstep_extender_request_duration_seconds_count{code="200",verb="preempt"}`)
	require.NoError(t, err)
	return int(n)
}

// (a) Two 2-GPU nodes full of priority-100 ordinary pods: a priority-1000 ordinary pod has the
// scheduler evict one of them, lockstep agreeing, and binds where it was.
func TestSchedulerPreemptsOrdinaryPods(t *testing.T) {
	s := newScenario(t, 2, 2)
	deletions := watchDeletions(t, s.ctx, s.ns)
	for i, node := range s.nodes {
		for j := range 2 {
			s.create(s.withPriority(podSpec{name: fmt.Sprintf("low-%d-%d", i, j), gpus: 1, nodeName: node}.pod(), "e2e-low"))
		}
	}
	answered := preemptAnswers(t)
	s.create(s.withPriority(podSpec{name: "urgent", gpus: 1}.pod(), "e2e-high"))

	s.eventually(60*time.Second, "the scheduler to evict a priority-100 pod for urgent", func() bool { return len(deletions.deleted()) > 0 })
	victims := deletions.deleted()
	require.Len(t, victims, 1, "one GPU is needed and each victim frees one: %v", victims)
	victim, err := env.client.CoreV1().Pods(s.ns).Get(s.ctx, victims[0], metav1.GetOptions{})
	require.NoError(t, err, "without a kubelet an evicted pod stays, being deleted")
	require.NotNil(t, victim.DeletionTimestamp)
	require.True(t, strings.HasPrefix(victim.Name, "low-"), "victim %s", victim.Name)
	s.eventually(30*time.Second, "urgent nominated to the victim's node "+victim.Spec.NodeName, func() bool {
		return s.pod("urgent").Status.NominatedNodeName == victim.Spec.NodeName
	})
	require.Greater(t, preemptAnswers(t), answered, "the scheduler asked lockstep before it evicted")

	// No kubelet ends the victim's grace period: finish it as one would once its containers stopped.
	s.deletePod(victim.Name)
	s.eventually(60*time.Second, "urgent bound on the victim's node", func() bool {
		return s.pod("urgent").Spec.NodeName == victim.Spec.NodeName
	})
}

// (b) Two 2-GPU nodes full of one bound priority-100 gang that needs every member: for a
// priority-1000 ordinary pod the scheduler's preemption would evict one member; lockstep drops every
// candidate, no member is ever evicted, and the pod stays pending, saying so.
func TestSchedulerPreemptionNeverBreaksBoundGang(t *testing.T) {
	s := newScenario(t, 2, 2)
	deletions := watchDeletions(t, s.ctx, s.ns)
	for i := range 2 {
		s.create(s.withPriority(podSpec{name: fmt.Sprintf("train-%d", i), gpus: 2, gang: "train", minAvailable: 2}.pod(), "e2e-low"))
	}
	s.eventually(60*time.Second, "gang train bound whole", func() bool { return s.boundIn("train-") == 2 })
	s.binds.assertNeverPartial(t, "train", 2)

	s.create(s.withPriority(podSpec{name: "urgent", gpus: 2}.pod(), "e2e-high"))
	s.eventually(60*time.Second, "the scheduler to find no node to preempt on", func() bool {
		return strings.Contains(s.schedulingMessage("urgent"), "preemption: no candidate node for preemption") || len(deletions.deleted()) > 0
	})
	require.Empty(t, deletions.deleted(), "the scheduler evicted gang members")
	s.eventually(30*time.Second, "lockstep's reason in its log", func() bool {
		return s.lockstepLogged(fmt.Sprintf(`pod="%s/urgent"`, s.ns), fmt.Sprintf(`reason="gang %s/train: evicting %s/train-`, s.ns, s.ns))
	})

	// The scheduler retries the pod now and then; none of its tries may evict a member.
	deletions.assertNoneFor(t, s.ctx, 5*time.Second)
	require.Equal(t, 2, s.boundIn("train-"))
	require.Equal(t, views.PhaseBound, s.gangs()["train"].Phase)
	urgent := s.pod("urgent")
	require.Empty(t, urgent.Spec.NodeName)
	require.Empty(t, urgent.Status.NominatedNodeName)
}

// pod reads one of the scenario's pods.
func (s *scenario) pod(name string) *corev1.Pod {
	s.t.Helper()
	p, err := env.client.CoreV1().Pods(s.ns).Get(s.ctx, name, metav1.GetOptions{})
	require.NoError(s.t, err)
	return p
}

// lockstepLogged reports whether one line of lockstep's recent log holds every part.
func (s *scenario) lockstepLogged(parts ...string) bool {
	for _, line := range strings.Split(env.lockstep.Tail(256<<10), "\n") {
		all := true
		for _, part := range parts {
			all = all && strings.Contains(line, part)
		}
		if all {
			return true
		}
	}
	return false
}
