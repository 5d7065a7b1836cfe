package e2e

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	policyv1 "k8s.io/api/policy/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"

	"github.com/lockstep-sched/lockstep/test/lib/kubeletsim"
	"github.com/lockstep-sched/lockstep/views"
)

// playKubelet finishes the pods of the scenario that are being deleted, as a kubelet would once
// their containers stopped: no kubelet runs here, and an evicted pod would otherwise keep its
// node's capacity forever. It runs until the test ends and returns what it finished.
func (s *scenario) playKubelet() func() []string {
	s.t.Helper()
	ctx, cancel := context.WithCancel(s.ctx)
	s.t.Cleanup(cancel)
	k, err := kubeletsim.Start(ctx, env.client, s.ns)
	require.NoError(s.t, err)
	s.t.Cleanup(func() { require.NoError(s.t, k.Err()) })
	return func() []string {
		cancel()
		return k.Finished()
	}
}

// fillWithLowPriority binds, at priority 100, a gang "lowgang" of 2 x 2 GPUs and 2-GPU ordinary
// pods "low-<i>" until every GPU of the scenario's nodes is taken.
func (s *scenario) fillWithLowPriority(gpus int) {
	s.t.Helper()
	for i := range 2 {
		p := podSpec{name: fmt.Sprintf("lowgang-%d", i), gpus: 2, gang: "lowgang", minAvailable: 2}.pod()
		p.Labels = map[string]string{"job": "lowgang"}
		s.create(s.withPriority(p, "e2e-low"))
	}
	for i := range gpus/2 - 2 {
		s.create(s.withPriority(podSpec{name: fmt.Sprintf("low-%d", i), gpus: 2}.pod(), "e2e-low"))
	}
	s.eventually(60*time.Second, "every GPU taken by priority-100 pods", func() bool {
		return s.boundIn("lowgang-")+s.boundIn("low-") == gpus/2
	})
	s.binds.assertNeverPartial(s.t, "lowgang", 2)
}

// A priority-1000 gang of 2 x 4 GPUs on 3 nodes x 4 GPUs full of priority-100 pods and one
// priority-100 bound gang: lockstep evicts whole units only, the gang binds whole, and the victims
// and the preemptor name each other.
func TestGangPreemptsLowerPriorityPodsWhole(t *testing.T) {
	s := newScenario(t, 3, 4)
	s.fillWithLowPriority(12)
	kubelet := s.playKubelet()

	for i := range 2 {
		s.create(s.withPriority(podSpec{name: fmt.Sprintf("urgent-%d", i), gpus: 4, gang: "urgent", minAvailable: 2}.pod(), "e2e-high"))
	}
	s.eventually(90*time.Second, "the urgent gang bound whole", func() bool { return s.boundIn("urgent-") == 2 })
	s.binds.assertNeverPartial(t, "urgent", 2)
	finished := kubelet()
	require.NotEmpty(t, finished, "something was evicted")
	gangGone := 0
	for _, name := range finished {
		require.True(t, strings.HasPrefix(name, "low"), "only priority-100 pods are victims, not %s", name)
		if strings.HasPrefix(name, "lowgang-") {
			gangGone++
		}
	}
	require.Contains(t, []int{0, 2}, gangGone, "the low gang goes whole or not at all: %v", finished)
	require.Equal(t, 4, len(finished), "8 GPUs are needed, 2 per victim: exactly 4 pods go: %v", finished)
	victim := finished[0]
	require.True(t, s.hasEvent(victim, "Preempted", "preempted by gang "+s.ns+"/urgent (priority 1000)"), "an event on victim %s names the preemptor", victim)
	s.eventually(10*time.Second, "an event on the preemptor naming its victims", func() bool {
		return s.hasEvent("urgent-0", "GangPreempting", "preempting") || s.hasEvent("urgent-1", "GangPreempting", "preempting")
	})
}

// A PodDisruptionBudget that forbids evicting the low gang holds: the urgent gang waits and says
// why, and the low gang stays whole.
func TestGangPreemptionHonoursDisruptionBudgets(t *testing.T) {
	s := newScenario(t, 1, 4)
	one := intstr.FromInt32(2)
	pdb := &policyv1.PodDisruptionBudget{
		ObjectMeta: metav1.ObjectMeta{Name: "lowgang", Namespace: s.ns},
		Spec: policyv1.PodDisruptionBudgetSpec{MinAvailable: &one,
			Selector: &metav1.LabelSelector{MatchLabels: map[string]string{"job": "lowgang"}}},
	}
	_, err := env.client.PolicyV1().PodDisruptionBudgets(s.ns).Create(s.ctx, pdb, metav1.CreateOptions{})
	require.NoError(t, err)
	deletions := watchDeletions(t, s.ctx, s.ns)
	s.fillWithLowPriority(4)
	s.playKubelet()
	// The Eviction API ignores budgets for pods that are not running; no kubelet runs here, so
	// the test says they are, as the kubelet would.
	s.markRunning("lowgang-0", "lowgang-1")

	s.create(s.withPriority(podSpec{name: "urgent-0", gpus: 4, gang: "urgent", minAvailable: 1}.pod(), "e2e-high"))
	s.eventually(60*time.Second, "the urgent gang to say the eviction was refused", func() bool {
		return strings.Contains(s.gangs()["urgent"].Reason, "was refused")
	})
	deletions.assertNoneFor(t, s.ctx, 3*time.Second)
	require.Equal(t, 2, s.boundIn("lowgang-"))
	require.Zero(t, s.boundIn("urgent-"))
}

// markRunning sets pods' status to Running and Ready, as a kubelet would once their containers
// started.
func (s *scenario) markRunning(names ...string) {
	s.t.Helper()
	for _, name := range names {
		p, err := env.client.CoreV1().Pods(s.ns).Get(s.ctx, name, metav1.GetOptions{})
		require.NoError(s.t, err)
		now := metav1.Now()
		p.Status.Phase = corev1.PodRunning
		p.Status.Conditions = append(p.Status.Conditions, corev1.PodCondition{Type: corev1.PodReady, Status: corev1.ConditionTrue, LastTransitionTime: now})
		_, err = env.client.CoreV1().Pods(s.ns).UpdateStatus(s.ctx, p, metav1.UpdateOptions{})
		require.NoError(s.t, err, "marking %s running", name)
	}
}

// preemptionPolicy: Never preempts nothing, however high the priority.
func TestGangWithPreemptionPolicyNeverWaits(t *testing.T) {
	s := newScenario(t, 1, 4)
	deletions := watchDeletions(t, s.ctx, s.ns)
	s.fillWithLowPriority(4)
	s.create(s.withPriority(podSpec{name: "urgent-0", gpus: 4, gang: "urgent", minAvailable: 1}.pod(), "e2e-high-never"))
	s.eventually(60*time.Second, "the urgent gang turned away", func() bool { return s.gangAttempts("urgent") >= 1 || s.schedulingMessage("urgent-0") != "" })
	deletions.assertNoneFor(t, s.ctx, 5*time.Second)
	// Past the starvation threshold it holds capacity as it frees, which evicts nothing either.
	require.Contains(t, []views.Phase{views.PhaseWaiting, views.PhaseHolding}, s.gangs()["urgent"].Phase)
	require.Zero(t, s.boundIn("urgent-"))
}
