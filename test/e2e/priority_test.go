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
	schedulingv1 "k8s.io/api/scheduling/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// The PriorityClasses the suite's pods use: the apiserver's Priority admission turns a pod's
// priorityClassName into its spec.priority, which is what lockstep reads.
var suitePriorities = map[string]schedulingv1.PriorityClass{
	"e2e-low":        {Value: 100},
	"e2e-high":       {Value: 1000},
	"e2e-high-never": {Value: 1000, PreemptionPolicy: new(corev1.PreemptNever)},
}

// priorityClassesReady records the classes admission is known to know (they are cluster-wide).
var priorityClassesReady sync.Map

// withPriority returns the pod with the named PriorityClass, creating the class first and waiting
// until the apiserver's Priority admission knows it: admission reads classes from an informer, so
// a pod naming a class created a moment ago may be refused. A dry-run create goes through
// admission and creates nothing.
func (s *scenario) withPriority(p *corev1.Pod, class string) *corev1.Pod {
	s.t.Helper()
	p.Spec.PriorityClassName = class
	if _, ready := priorityClassesReady.Load(class); ready {
		return p
	}
	pc, ok := suitePriorities[class]
	require.True(s.t, ok, "no PriorityClass %s in suitePriorities", class)
	pc.Name = class
	_, err := env.client.SchedulingV1().PriorityClasses().Create(s.ctx, &pc, metav1.CreateOptions{})
	if !apierrors.IsAlreadyExists(err) {
		require.NoError(s.t, err, "creating PriorityClass %s", class)
	}
	probe := podSpec{name: "priority-probe"}.pod()
	probe.Spec.PriorityClassName = class
	s.eventually(30*time.Second, "PriorityClass "+class+" known to admission", func() bool {
		_, err := env.client.CoreV1().Pods(s.ns).Create(s.ctx, probe, metav1.CreateOptions{DryRun: []string{metav1.DryRunAll}})
		return err == nil
	})
	priorityClassesReady.Store(class, true)
	return p
}

// reserveStuck creates a low-priority gang of members x gpus, one of which the scheduler can place
// nowhere: the others reserve the whole quorum and hold their binds, so the gang keeps its
// reservation without binding. It returns once the gang has reserved.
func (s *scenario) reserveStuck(name string, members, gpus int) {
	s.t.Helper()
	// The unplaceable member comes first: the others then find every member there at filter, and
	// none is parked waiting for members to exist.
	for i := members - 1; i >= 0; i-- {
		ps := podSpec{name: fmt.Sprintf("%s-%d", name, i), gpus: gpus, gang: name, minAvailable: members, waitingTime: "10m"}
		if i == members-1 {
			ps.affinity = unplaceable
		}
		s.create(s.withPriority(ps.pod(), "e2e-low"))
	}
	s.eventually(60*time.Second, "gang "+name+" to reserve its quorum", func() bool {
		return s.gangs()[name].Phase == views.PhaseReserving
	})
}

// The case, on two 8-GPU nodes: a 4 x 3 GPU gang at priority 100 comes first and reserves
// 12 GPUs; a 4 x 2 GPU gang at priority 1000 then fits only without that reservation. It takes the
// reservation over and binds whole; the low gang binds nothing and says who took its capacity.
func TestHigherPriorityGangTakesLowerReservation(t *testing.T) {
	s := newScenario(t, 2, 8)
	s.reserveStuck("low", 4, 3)

	for i := range 4 {
		s.create(s.withPriority(podSpec{name: fmt.Sprintf("high-%d", i), gpus: 2, gang: "high", minAvailable: 4}.pod(), "e2e-high"))
	}
	s.eventually(60*time.Second, "the high-priority gang bound whole", func() bool { return s.boundIn("high-") == 4 })
	s.binds.assertNeverPartial(t, "high", 4)
	require.Zero(t, s.boundIn("low-"), "the low gang binds nothing")
	low := s.gangs()["low"]
	require.Contains(t, low.ReservationTakenBy, fmt.Sprintf("gang %s/high (priority 1000)", s.ns))
	require.Equal(t, int32(100), low.Priority)
	s.eventually(30*time.Second, "an event on the low gang naming who took its capacity", func() bool {
		return s.hasEvent("low-0", "GangReservationYielded", s.ns+"/high")
	})
	require.Contains(t, s.gangs()["high"].Reason, "bound")
}

// Higher-priority ordinary pods bind on capacity a lower-priority gang holds only in a
// reservation; pods of lower priority than the gang are kept off it.
func TestHigherPriorityPodsTakeLowerReservation(t *testing.T) {
	s := newScenario(t, 1, 8)
	s.reserveStuck("low", 3, 2) // 6 of 8 GPUs reserved
	s.create(podSpec{name: "batch", gpus: 4}.pod())
	s.eventually(30*time.Second, "the priority-0 pod to be refused beside the reservation", func() bool {
		return strings.Contains(s.schedulingMessage("batch"), "reserved for gang "+s.ns+"/low")
	})
	s.deletePod("batch")

	for i := range 2 {
		s.create(s.withPriority(podSpec{name: fmt.Sprintf("urgent-%d", i), gpus: 2}.pod(), "e2e-high"))
	}
	s.eventually(60*time.Second, "both urgent pods bound", func() bool { return s.boundIn("urgent-") == 2 })
	require.Zero(t, s.boundIn("low-"))
	s.eventually(30*time.Second, "the low gang to say who took its reservation", func() bool {
		return strings.Contains(s.gangs()["low"].ReservationTakenBy, "pod "+s.ns+"/urgent-")
	})
}

// starvationThreshold is lockstep's --starvation-threshold in the suite: short, so that the rule
// shows within a test; the default is minutes.
const starvationThreshold = 4 * time.Second

// A 2 x 4 GPU gang behind a stream of 2-GPU pods of the same priority on 2 nodes x 4 GPUs: the
// pods keep taking what frees up until the gang has waited the threshold; then lockstep holds the
// nodes for it, and it binds once the pods running there when the hold began are gone. Each pod
// of the stream lives streamLife, so the gang's bound is the threshold plus one streamLife (plus
// the scheduler's retry).
func TestStarvingGangGetsThroughAStreamOfSmallPods(t *testing.T) {
	const streamLife = 3 * time.Second
	s := newScenario(t, 2, 4)
	for i := range 4 {
		s.create(podSpec{name: fmt.Sprintf("small-%d", i), gpus: 2}.pod())
	}
	s.eventually(30*time.Second, "the small pods bound", func() bool { return s.boundIn("small-") == 4 })
	stop := s.streamSmallPods(4, streamLife)
	defer stop()

	began := time.Now()
	for i := range 2 {
		s.create(podSpec{name: fmt.Sprintf("big-%d", i), gpus: 4, gang: "big", minAvailable: 2}.pod())
	}
	bound := starvationThreshold + streamLife + 20*time.Second
	s.eventually(bound, "the big gang bound within its bound", func() bool { return s.boundIn("big-") == 2 })
	waited := time.Since(began)
	s.binds.assertNeverPartial(t, "big", 2)
	require.GreaterOrEqual(t, waited, starvationThreshold-time.Second, "it got through only by the rule, not because the stream paused")
	t.Logf("the big gang waited %s (threshold %s, stream pods live %s)", waited.Round(100*time.Millisecond), starvationThreshold, streamLife)
}

// streamSmallPods keeps a stream of 2-GPU pods going: every 500ms each bound pod older than life
// is deleted (it "finished") and a new one created in its place, keeping n in flight. It stops
// when the returned func is called.
func (s *scenario) streamSmallPods(n int, life time.Duration) (stop func()) {
	ctx, cancel := context.WithCancel(s.ctx)
	done := make(chan struct{})
	next := n
	go func() {
		defer close(done)
		tick := time.NewTicker(500 * time.Millisecond)
		defer tick.Stop()
		for {
			select {
			case <-ctx.Done():
				return
			case <-tick.C:
			}
			list, err := env.client.CoreV1().Pods(s.ns).List(ctx, metav1.ListOptions{})
			if err != nil {
				continue
			}
			for _, p := range list.Items {
				if !strings.HasPrefix(p.Name, "small-") || p.Spec.NodeName == "" || time.Since(p.CreationTimestamp.Time) < life {
					continue
				}
				_ = env.client.CoreV1().Pods(s.ns).Delete(ctx, p.Name, metav1.DeleteOptions{GracePeriodSeconds: new(int64)})
				pod := podSpec{name: fmt.Sprintf("small-%d", next), gpus: 2}.pod()
				pod.Namespace = s.ns
				next++
				_, _ = env.client.CoreV1().Pods(s.ns).Create(ctx, pod, metav1.CreateOptions{})
			}
		}
	}()
	return func() { cancel(); <-done }
}

// Four gangs of 6 x 1 GPU, min-available 3, on 3 nodes x 4 GPUs: 24 members want 12 GPUs, and
// every gang's quorum binds before any gang gets a fourth member. Gangs b, c and d can use no node
// until a beacon pod runs on each (so that a comes first, the worst case); lockstep counts their
// quorums as waiting all the same, and a's members beyond its quorum leave room for them.
func TestQuorumsBindBeforeExtras(t *testing.T) {
	s := newScenario(t, 3, 4)
	pool := behindBeacon("lockstep.e2e/pool", "gpu")
	create := func(g string) {
		for i := range 6 {
			ps := podSpec{name: fmt.Sprintf("%s-%d", g, i), gpus: 1, gang: g, minAvailable: 3,
				annotations: map[string]string{"gang.scheduling.koordinator.sh/total-number": "6"}}
			if g != "a" {
				ps.affinity = pool
			}
			s.create(ps.pod())
		}
	}
	for _, g := range []string{"b", "c", "d"} {
		create(g)
	}
	// lockstep can leave room only for gangs it knows: its informer may trail the scheduler's.
	s.eventually(30*time.Second, "lockstep to know gangs b, c and d", func() bool {
		gangs := s.gangs()
		return len(gangs["b"].Members) == 6 && len(gangs["c"].Members) == 6 && len(gangs["d"].Members) == 6
	})
	create("a")
	s.eventually(60*time.Second, "gang a's quorum bound", func() bool { return s.boundIn("a-") >= 3 })
	s.eventually(30*time.Second, "a's other members told why they wait", func() bool {
		return strings.Contains(s.gangs()["a"].Reason, "quorums of waiting gangs") ||
			strings.Contains(s.schedulingMessage("a-5"), "waiting")
	})
	require.Equal(t, 3, s.boundIn("a-"), "a's members beyond its quorum leave the others' quorums alone")

	s.openNodes("lockstep.e2e/pool", "gpu")
	s.eventually(90*time.Second, "every gang's quorum bound", func() bool {
		return s.boundIn("b-") == 3 && s.boundIn("c-") == 3 && s.boundIn("d-") == 3
	})
	for _, g := range []string{"a", "b", "c", "d"} {
		s.binds.assertNeverPartial(t, g, 3)
		require.Equal(t, 3, s.boundIn(g+"-"), "gang %s", g)
	}
}
