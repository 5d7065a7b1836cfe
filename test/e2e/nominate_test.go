package e2e

import (
	"fmt"
	"path/filepath"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/lockstep-sched/lockstep/test/lib/cluster"
	"github.com/lockstep-sched/lockstep/test/lib/harness"
	"github.com/lockstep-sched/lockstep/wellknown"
)

// With --nominate-reserved, the members of a reserved gang carry the node held for each in
// status.nominatedNodeName: kube-scheduler's cycle for such a member tries that node alone, and
// lockstep takes the nomination back when the reservation ends without binding the member.
func TestNominatedMembers(t *testing.T) {
	const gangs, size = 16, 4
	// kube-scheduler offers lockstep's filter every node that passed its own filters; only a
	// nomination makes it try one node alone. The same burst without nominations shows it.
	before := oneNodeFilterCalls(t)
	burstOfGangs(t, gangs, size)
	require.Zero(t, oneNodeFilterCalls(t)-before, "without nominations every cycle offers the scenario's nodes")

	restartLockstepWith(t, "--nominate-reserved")
	t.Run("a burst of gangs binds whole, its members tried on their reserved node alone", func(t *testing.T) {
		written, oneNode := nominationsWritten(t), oneNodeFilterCalls(t)
		burstOfGangs(t, gangs, size)
		require.GreaterOrEqual(t, nominationsWritten(t)-written, float64(gangs*(size-1)), "nominations written through the apiserver")
		// A nomination reaches the scheduler through the apiserver, so the member right after
		// the one that reserved may have started its cycle already; most cannot have.
		tried := oneNodeFilterCalls(t) - oneNode
		require.GreaterOrEqual(t, tried, float64(gangs*(size-1)/2), "members tried on their nominated node alone")
		t.Logf("%.0f of %d members' filter calls offered their nominated node alone", tried, gangs*size)
	})

	t.Run("a reservation that expires takes its nominations back", func(t *testing.T) {
		s := newScenario(t, 2, 4)
		// The third member names a scheduler nobody runs: lockstep counts and plans it, but no
		// cycle ever comes for it, so the gang never reaches quorum.
		for i := range 2 {
			s.create(podSpec{name: fmt.Sprintf("late-%d", i), gpus: 1, gang: "late", minAvailable: 3, waitingTime: "4s"}.pod())
		}
		straggler := podSpec{name: "late-2", gpus: 1, gang: "late", minAvailable: 3, waitingTime: "4s"}.pod()
		straggler.Spec.SchedulerName = "no-such-scheduler"
		s.create(straggler)

		nominated := ""
		s.eventually(30*time.Second, "the straggler nominated to a node of the scenario", func() bool {
			nominated = s.nominatedNode("late-2")
			return nominated != ""
		})
		require.Contains(t, s.nodes, nominated)
		s.eventually(30*time.Second, "the nomination taken back after the reservation expired", func() bool {
			return s.nominatedNode("late-2") == "" && s.hasEvent("late-0", wellknown.ReasonGangTimedOut, "expired")
		})
		require.Zero(t, s.boundIn("late-"), "no member of a gang short of its quorum binds")
	})
}

// burstOfGangs creates gangs x size members (1 GPU each) while the scheduler is down, as after a
// restart with work pending, so that the scheduler takes them in its queue's order with every
// gang's members interleaved; it then waits until all are bound, never a gang partly.
func burstOfGangs(t *testing.T, gangs, size int) {
	t.Helper()
	s := newScenario(t, 16, 8)
	shipped := cluster.SchedulerOptions{ConfigPath: filepath.Join(env.root, harness.SchedulerConfig), ExtenderURL: env.lockstep.URL}
	env.cluster.StopScheduler()
	t.Cleanup(func() { // a test stopped half way must not leave the suite without its scheduler
		if env.cluster.Pid(cluster.KubeScheduler) == 0 {
			restartScheduler(t, shipped)
		}
	})
	for g := range gangs {
		for i := range size {
			s.create(podSpec{name: fmt.Sprintf("b%02d-%d", g, i), gpus: 1, gang: fmt.Sprintf("b%02d", g), minAvailable: size}.pod())
		}
	}
	restartScheduler(t, shipped)
	s.eventually(90*time.Second, "every member bound", func() bool { return s.boundIn("b") == gangs*size })
	for g := range gangs {
		s.binds.assertNeverPartial(t, fmt.Sprintf("b%02d", g), size)
	}
}

// nominationsWritten is lockstep's count of nominations the apiserver accepted.
func nominationsWritten(t *testing.T) float64 {
	for _, m := range scrape(t, env.lockstep.DebugURL+"/metrics")["lockstep_nominations_total"].GetMetric() {
		labels := map[string]string{}
		for _, l := range m.GetLabel() {
			labels[l.GetName()] = l.GetValue()
		}
		if labels["write"] == "nominated" && labels["result"] == "written" {
			return m.GetCounter().GetValue()
		}
	}
	return 0
}

// nominatedNode is a pod's status.nominatedNodeName.
func (s *scenario) nominatedNode(name string) string {
	p, err := env.client.CoreV1().Pods(s.ns).Get(s.ctx, name, metav1.GetOptions{})
	require.NoError(s.t, err)
	return p.Status.NominatedNodeName
}

// oneNodeFilterCalls is how many of lockstep's filter calls offered a single node.
func oneNodeFilterCalls(t *testing.T) float64 {
	for _, m := range scrape(t, env.lockstep.DebugURL+"/metrics")["lockstep_filter_offered_nodes"].GetMetric() {
		for _, b := range m.GetHistogram().GetBucket() {
			if b.GetUpperBound() == 1 {
				return float64(b.GetCumulativeCount())
			}
		}
	}
	return 0
}
