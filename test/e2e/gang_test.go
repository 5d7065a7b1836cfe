package e2e

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/util/wait"

	"github.com/lockstep-sched/lockstep/test/lib/harness"
	"github.com/lockstep-sched/lockstep/views"
	"github.com/lockstep-sched/lockstep/wellknown"
)

// (i) 4 nodes x 2 GPUs: the 5 x 2-GPU MPI job binds nothing however often the scheduler retries,
// and says why; the 4 x 2-GPU job binds whole.
func TestGangThatDoesNotFitBindsNothing(t *testing.T) {
	s := newScenario(t, 4, 2)
	s.createExample("mpi-5x2gpu-pending.yaml")
	want := fmt.Sprintf("gang %s/mpi-5x2gpu: 5 members need 10 nvidia.com/gpu, 8 free", s.ns)
	s.eventually(30*time.Second, "every member turned away once", func() bool { return s.gangAttempts("mpi-5x2gpu") >= 5 })
	// kube-scheduler parks pods an extender rejected until the cluster changes. Change it three
	// times (an unrelated pod binding) and watch the gang be retried and refused each time.
	for i := range 3 {
		before := s.gangAttempts("mpi-5x2gpu")
		s.create(podSpec{name: fmt.Sprintf("bystander-%d", i)}.pod())
		s.eventually(60*time.Second, "the scheduler to retry the gang after a cluster change", func() bool {
			return s.gangAttempts("mpi-5x2gpu") > before
		})
	}
	s.eventually(30*time.Second, "a FailedScheduling event carrying lockstep's reason", func() bool {
		return s.hasEvent("mpi-5x2gpu-0", "FailedScheduling", want)
	})
	require.Contains(t, s.schedulingMessage("mpi-5x2gpu-0"), want, "the pod's PodScheduled condition says why, too")
	require.Zero(t, s.boundIn("mpi-5x2gpu"), "no member of a gang that does not fit may bind")
	require.Equal(t, 3, s.boundIn("bystander"), "ordinary pods schedule beside the waiting gang")
	g := s.gangs()["mpi-5x2gpu"]
	require.Equal(t, views.PhaseWaiting, g.Phase)
	require.Contains(t, g.Reason, want)
	require.True(t, s.hasEvent("mpi-5x2gpu-0", wellknown.ReasonGangWaiting, want) || s.hasEvent("mpi-5x2gpu-1", wellknown.ReasonGangWaiting, want))
	s.deleteAllPods()

	s.createExample("mpi-4x2gpu-runs.yaml")
	s.eventually(60*time.Second, "all 4 workers bound", func() bool { return s.boundIn("mpi-4x2gpu") == 4 })
	nodes := map[string]bool{}
	for _, p := range s.pods() {
		nodes[p.Spec.NodeName] = true
	}
	require.Len(t, nodes, 4, "4 workers x 2 GPUs on 4 nodes x 2 GPUs use every node once")
	s.binds.assertNeverPartial(t, "mpi-4x2gpu", 4)
	s.eventually(10*time.Second, "the gang to show Bound", func() bool { return s.gangs()["mpi-4x2gpu"].Phase == views.PhaseBound })
}

// (i-b) One GPU taken on each node: 4 GPUs free in total, yet no node holds a 2-GPU member.
func TestGangDoesNotFitOnFragmentedGPUs(t *testing.T) {
	s := newScenario(t, 4, 2)
	for i, node := range s.nodes {
		s.create(podSpec{name: fmt.Sprintf("ordinary-%d", i), gpus: 1, nodeName: node}.pod())
	}
	for i := range 2 {
		s.create(podSpec{name: fmt.Sprintf("pair-%d", i), gpus: 2, gang: "pair", minAvailable: 2}.pod())
	}
	s.eventually(60*time.Second, "a FailedScheduling reason about where the members do not fit", func() bool {
		msg := s.schedulingMessage("pair-0")
		return strings.Contains(msg, "nvidia.com/gpu")
	})
	require.Zero(t, s.boundIn("pair"))
	s.eventually(30*time.Second, "/debug/gangs to explain the wait", func() bool { return s.waitsFor("pair", "nvidia.com/gpu") })
	require.Zero(t, s.boundIn("pair"))
}

// (ii) 2 GPUs and 4 one-GPU members: min-available 4 binds none, min-available 2 binds exactly 2.
func TestMinAvailableDecidesHowManyBind(t *testing.T) {
	s := newScenario(t, 1, 2)
	s.createExample("dlrover-4workers-min4.yaml")
	want := fmt.Sprintf("gang %s/dlrover-elastic-min4: 4 members need 4 nvidia.com/gpu, 2 free", s.ns)
	s.eventually(60*time.Second, "every member of the min-4 gang to be turned away", func() bool {
		return s.gangAttempts("dlrover-elastic-min4") >= 4 && strings.Contains(s.gangs()["dlrover-elastic-min4"].Reason, want)
	})
	require.Zero(t, s.boundIn("dlrover-elastic-min4"))
	s.deleteAllPods()

	s.createExample("dlrover-4workers-min2.yaml")
	s.eventually(60*time.Second, "2 members bound", func() bool { return s.boundIn("dlrover-elastic-min2") == 2 })
	// The other two schedule as ordinary pods after quorum and find no GPU left.
	for _, p := range s.pods() {
		if p.Spec.NodeName == "" {
			name := p.Name
			s.eventually(60*time.Second, name+" to be refused for lack of GPUs", func() bool {
				return strings.Contains(s.schedulingMessage(name), "nvidia.com/gpu")
			})
		}
	}
	require.Equal(t, 2, s.boundIn("dlrover-elastic-min2"), "exactly min-available members fit")
	s.binds.assertNeverPartial(t, "dlrover-elastic-min2", 2)
}

// (iii) Two gangs that each fit alone but not together, submitted interleaved: one binds whole,
// the other waits with a reason; deleting the first lets the second bind.
func TestCompetingGangsNeitherDeadlockNorShare(t *testing.T) {
	s := newScenario(t, 4, 2)
	for i := range 4 {
		for _, g := range []string{"alpha", "beta"} {
			s.create(podSpec{name: fmt.Sprintf("%s-%d", g, i), gpus: 2, gang: g, minAvailable: 4}.pod())
		}
	}
	var winner, loser string
	s.eventually(90*time.Second, "one gang fully bound", func() bool {
		a, b := s.boundIn("alpha"), s.boundIn("beta")
		switch {
		case a == 4:
			winner, loser = "alpha", "beta"
		case b == 4:
			winner, loser = "beta", "alpha"
		}
		return winner != ""
	})
	s.eventually(60*time.Second, loser+" to wait with a reason", func() bool {
		return s.waitsFor(loser, "nvidia.com/gpu") && s.gangs()[loser].Attempts > 0
	})
	require.Zero(t, s.boundIn(loser), "the losing gang binds nothing while the winner holds the GPUs")

	for i := range 4 {
		s.deletePod(fmt.Sprintf("%s-%d", winner, i))
	}
	s.eventually(90*time.Second, loser+" fully bound once the winner is gone", func() bool { return s.boundIn(loser) == 4 })
	s.binds.assertNeverPartial(t, "alpha", 4)
	s.binds.assertNeverPartial(t, "beta", 4)
}

// (iv) While a gang holds a reservation, ordinary GPU pods keep scheduling, but never onto the
// reserved GPUs; when the gang's last member can be placed, the gang binds whole.
func TestOrdinaryPodsNeverTakeReservedGPUs(t *testing.T) {
	s := newScenario(t, 4, 2)
	s.create(podSpec{name: "held-0", gpus: 2, gang: "held", minAvailable: 3, waitingTime: "3m"}.pod())
	s.create(podSpec{name: "held-1", gpus: 2, gang: "held", minAvailable: 3, waitingTime: "3m"}.pod())
	s.create(podSpec{name: "held-2", gpus: 2, gang: "held", minAvailable: 3, waitingTime: "3m", affinity: unplaceable}.pod())
	reserved := s.waitForWaitingMembers("held", 2)
	require.Len(t, reserved, 3, "the gang reserves a node for each of its 3 members")

	for i := range 3 {
		s.create(podSpec{name: fmt.Sprintf("ordinary-%d", i), gpus: 1}.pod())
	}
	s.eventually(60*time.Second, "2 ordinary pods bound on the free GPUs", func() bool { return s.boundIn("ordinary") == 2 })
	for _, p := range s.pods() {
		if strings.HasPrefix(p.Name, "ordinary") && p.Spec.NodeName != "" {
			require.False(t, reserved[p.Spec.NodeName], "ordinary pod %s landed on %s, which gang held reserves", p.Name, p.Spec.NodeName)
		}
	}
	s.eventually(60*time.Second, "the third ordinary pod to be refused", func() bool {
		for _, p := range s.pods() {
			if strings.HasPrefix(p.Name, "ordinary") && p.Spec.NodeName == "" {
				return strings.Contains(s.schedulingMessage(p.Name), "nvidia.com/gpu")
			}
		}
		return false
	})
	require.Zero(t, s.boundIn("held"))

	// The stuck member is replaced by one the scheduler can place: it takes the free slot.
	s.deletePod("held-2")
	s.create(podSpec{name: "held-2b", gpus: 2, gang: "held", minAvailable: 3, waitingTime: "3m"}.pod())
	s.eventually(60*time.Second, "the gang bound whole", func() bool { return s.boundIn("held") == 3 })
	s.binds.assertNeverPartial(t, "held", 3)
	require.Equal(t, 2, s.boundIn("ordinary"))
}

// (v) lockstep killed while a gang's binds are held: nothing binds while it is down, and after
// the restart the gang completes from the scheduler's retries alone.
func TestRestartMidGangLeavesNoPartialGang(t *testing.T) {
	s := newScenario(t, 4, 2)
	for i := range 3 {
		s.create(podSpec{name: fmt.Sprintf("phoenix-%d", i), gpus: 2, gang: "phoenix", minAvailable: 4, waitingTime: "3m"}.pod())
	}
	s.create(podSpec{name: "phoenix-3", gpus: 2, gang: "phoenix", minAvailable: 4, waitingTime: "3m", affinity: unplaceable}.pod())
	s.waitForWaitingMembers("phoenix", 3)

	env.lockstep.Kill()
	restarted := false
	defer func() {
		if !restarted {
			require.NoError(t, env.lockstep.Start(s.ctx))
		}
	}()
	require.Zero(t, s.boundIn("phoenix"), "held binds must not complete when lockstep dies")
	s.deletePod("phoenix-3")
	s.create(podSpec{name: "phoenix-3b", gpus: 2, gang: "phoenix", minAvailable: 4, waitingTime: "3m"}.pod())
	require.Zero(t, s.boundIn("phoenix"))

	require.NoError(t, env.lockstep.Start(s.ctx))
	restarted = true
	s.eventually(90*time.Second, "the gang bound whole after the restart", func() bool { return s.boundIn("phoenix") == 4 })
	s.binds.assertNeverPartial(t, "phoenix", 4)
	s.eventually(10*time.Second, "the restarted lockstep to show the gang Bound", func() bool {
		return s.gangs()["phoenix"].Phase == views.PhaseBound
	})
}

// (v-b) Members created one after another, as operators create them: those turned away while
// the gang was short come back by themselves or are recalled once another member reserved, so the
// gang binds well before any held bind could give up and send the scheduler back to every pod.
func TestMembersCreatedOneByOneAreRecalled(t *testing.T) {
	s := newScenario(t, 2, 4)
	member := func(i int) *corev1.Pod {
		return podSpec{name: fmt.Sprintf("trickle-%d", i), gpus: 1, gang: "trickle", minAvailable: 4}.pod()
	}
	s.create(member(0))
	s.create(member(1))
	s.eventually(30*time.Second, "both early members turned away while the gang is short", func() bool {
		return strings.Contains(s.schedulingMessage("trickle-0"), "waiting for members") &&
			strings.Contains(s.schedulingMessage("trickle-1"), "waiting for members")
	})
	s.create(member(2))
	s.create(member(3))
	s.eventually(harness.BindWait/2, "the gang bound before a held bind could give up", func() bool { return s.boundIn("trickle") == 4 })
	s.binds.assertNeverPartial(t, "trickle", 4)

	recalled := 0
	for i := range 4 {
		name := fmt.Sprintf("trickle-%d", i)
		if s.hasCondition(name, wellknown.ConditionReasonPlaceReserved) {
			recalled++
		}
		require.False(t, s.hasEvent(name, "FailedScheduling", "waiting for gang quorum"),
			"%s's held bind gave up: the scheduler was sent back to bring a parked member", name)
	}
	// Whether a member stayed parked depends on whether it was turned away twice for the same
	// reason (package gang, recallAfter); the unit test pins the recall down.
	t.Logf("%d of 4 members recalled with PlaceReserved", recalled)
}

// gatherWait is lockstep's --gather-wait in the suite: above the default, so that the test below
// creates the next member within it although the suite's machine is loaded (lockstep runs with
// the race detector, on 2 cores).
const gatherWait = 200 * time.Millisecond

// (v-c) Members created back to back, as an operator's loop creates them: the first waits at
// filter for the rest (--gather-wait) instead of being turned away, so no member is told its gang
// lacks members, and kube-scheduler writes no status for any nor tries one twice.
func TestMembersCreatedBackToBackAreGathered(t *testing.T) {
	s := newScenario(t, 2, 4)
	arrivedBefore := gathersThatArrived(t)
	member := func(i int) *corev1.Pod {
		return podSpec{name: fmt.Sprintf("stream-%d", i), gpus: 1, gang: "stream", minAvailable: 4}.pod()
	}
	s.create(member(0))
	// The scheduler takes stream-0 before the others exist; without gathering it is turned away.
	err := wait.PollUntilContextTimeout(s.ctx, 5*time.Millisecond, 30*time.Second, true, func(context.Context) (bool, error) {
		return gatheringNow(t) == 1, nil
	})
	require.NoError(t, err, "stream-0's filter call never waited for the rest of its gang")
	for i := 1; i < 4; i++ {
		s.create(member(i))
	}
	s.eventually(30*time.Second, "the gang bound whole", func() bool { return s.boundIn("stream") == 4 })
	s.binds.assertNeverPartial(t, "stream", 4)
	// The scheduler's events of a pod are written in order: once its Scheduled event is there,
	// a FailedScheduling before it would be too.
	for i := range 4 {
		name := fmt.Sprintf("stream-%d", i)
		s.eventually(30*time.Second, name+"'s Scheduled event", func() bool { return s.hasEvent(name, "Scheduled", "") })
		require.False(t, s.hasEvent(name, "FailedScheduling", "waiting for members"), "%s was turned away while its gang was being created", name)
		require.False(t, s.hasEvent(name, wellknown.ReasonGangWaiting, "waiting for members"), "%s was told its gang lacks members", name)
	}
	require.Greater(t, gathersThatArrived(t), arrivedBefore, "the next member's arrival ended a wait")
}

// gathersThatArrived is how many of lockstep's filter calls waited for a gang's next member and
// saw it arrive (lockstep_filter_gather_seconds).
func gathersThatArrived(t *testing.T) uint64 {
	for _, m := range scrape(t, env.lockstep.DebugURL+"/metrics")["lockstep_filter_gather_seconds"].GetMetric() {
		for _, l := range m.GetLabel() {
			if l.GetName() == "outcome" && l.GetValue() == "arrived" {
				return m.GetHistogram().GetSampleCount()
			}
		}
	}
	return 0
}

// gatheringNow is how many of lockstep's filter calls wait for a gang's next member right now.
func gatheringNow(t *testing.T) float64 {
	for _, m := range scrape(t, env.lockstep.DebugURL+"/metrics")["lockstep_filter_gathering"].GetMetric() {
		return m.GetGauge().GetValue()
	}
	return 0
}

// (vi) A gang that cannot complete gives its reservation back when its waiting time runs out,
// says so, and the gang waiting behind it gets the GPUs.
func TestExpiredReservationLetsNextGangThrough(t *testing.T) {
	s := newScenario(t, 4, 2)
	for i := range 3 {
		s.create(podSpec{name: fmt.Sprintf("stuck-%d", i), gpus: 2, gang: "stuck", minAvailable: 4, waitingTime: "15s"}.pod())
	}
	s.create(podSpec{name: "stuck-3", gpus: 2, gang: "stuck", minAvailable: 4, waitingTime: "15s", affinity: unplaceable}.pod())
	s.eventually(60*time.Second, "gang stuck to reserve", func() bool { return s.gangs()["stuck"].Phase == views.PhaseReserving })

	s.create(podSpec{name: "next-0", gpus: 2, gang: "next", minAvailable: 2}.pod())
	s.create(podSpec{name: "next-1", gpus: 2, gang: "next", minAvailable: 2}.pod())
	s.eventually(60*time.Second, "gang next to wait on stuck's reservation", func() bool {
		return strings.Contains(s.gangs()["next"].Reason, fmt.Sprintf("gang %s/stuck holds", s.ns))
	})
	require.Zero(t, s.boundIn("next"))

	s.eventually(60*time.Second, "stuck to time out", func() bool { return s.gangs()["stuck"].Phase == views.PhaseTimedOut })
	// The expiry's own words, or those of its cool-down once a member was retried.
	require.Regexp(t, "reservation expired|reservation timed out", s.gangs()["stuck"].Reason)
	s.eventually(30*time.Second, "a GangTimedOut event", func() bool { return s.hasEvent("stuck-0", wellknown.ReasonGangTimedOut, "expired") })
	s.eventually(30*time.Second, "the GangScheduled=False TimedOut condition on the stuck members", func() bool {
		return s.hasCondition("stuck-0", wellknown.ConditionReasonTimedOut)
	})
	s.eventually(60*time.Second, "gang next bound", func() bool { return s.boundIn("next") == 2 })
	require.Zero(t, s.boundIn("stuck"))
	s.binds.assertNeverPartial(t, "next", 2)
}

// (vii) /debug/gangs shows every gang with its members, and a bad annotation is refused naming
// the pod, the key and the value, in the FailedScheduling event and as a GangRejected event.
func TestDebugGangsAndBadAnnotations(t *testing.T) {
	s := newScenario(t, 2, 2)
	s.createExample("tf-ps-worker.yaml")
	bad := podSpec{name: "typo-0", gpus: 1, gang: "typo", minAvailable: 1}.pod()
	bad.Annotations[wellknown.AnnotationGangMinAvailable] = "two"
	s.create(bad)

	s.eventually(60*time.Second, "the TF gang (PS without GPU + 3 GPU workers) bound", func() bool { return s.boundIn("tf-ps-worker") == 4 })
	s.binds.assertNeverPartial(t, "tf-ps-worker", 4)
	wantBad := fmt.Sprintf(`pod %s/typo-0: annotation %s="two": must be a positive integer`, s.ns, wellknown.AnnotationGangMinAvailable)
	s.eventually(60*time.Second, "the bad annotation in FailedScheduling", func() bool {
		return s.hasEvent("typo-0", "FailedScheduling", wantBad)
	})
	s.eventually(30*time.Second, "a GangRejected event", func() bool { return s.hasEvent("typo-0", wellknown.ReasonGangRejected, wantBad) })

	gangs := s.gangs()
	tf := gangs["tf-ps-worker"]
	require.Equal(t, views.PhaseBound, tf.Phase)
	require.Equal(t, 4, tf.MinAvailable)
	require.Equal(t, 4, tf.TotalNumber)
	require.Len(t, tf.Members, 4)
	for _, m := range tf.Members {
		require.Equal(t, "Bound", m.State, m.Pod)
		require.NotEmpty(t, m.Node, m.Pod)
	}
	typo := gangs["typo"]
	require.Len(t, typo.Members, 1)
	require.Equal(t, "Rejected", typo.Members[0].State)
	require.Contains(t, typo.Members[0].Reason, wantBad)
}

// waitForWaitingMembers waits until n members of a gang are held at bind waiting for quorum and
// returns the nodes the gang's reservation holds.
func (s *scenario) waitForWaitingMembers(gangName string, n int) map[string]bool {
	s.t.Helper()
	var reserved map[string]bool
	s.eventually(60*time.Second, fmt.Sprintf("%d members of %s held at bind", n, gangName), func() bool {
		g := s.gangs()[gangName]
		waiting := 0
		reserved = map[string]bool{}
		for _, m := range g.Members {
			if m.State == "WaitingForQuorum" {
				waiting++
			}
			if m.Node != "" {
				reserved[m.Node] = true
			}
		}
		return g.Phase == views.PhaseReserving && waiting >= n
	})
	return reserved
}
