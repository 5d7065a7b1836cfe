package gang

import (
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
)

func gatherEnv(t *testing.T, wait time.Duration) *env {
	cfg := testConfig()
	cfg.GatherWait = wait
	return newEnv(t, cfg, gpuNodes("n", 2, 4)...)
}

// filterAsync starts a Filter and returns the channel its answer arrives on.
func (e *env) filterAsync(p *corev1.Pod) <-chan FilterResult {
	ch := make(chan FilterResult, 1)
	go func() { ch <- e.filter(p) }()
	return ch
}

func (e *env) gathered(gang string) time.Duration {
	e.m.mu.RLock()
	defer e.m.mu.RUnlock()
	return e.m.ledger.gangs[gang].arrivals.gathered
}

func TestMemberWaitsAtFilterForTheRestOfItsGang(t *testing.T) {
	// A wait far longer than the test needs: each arrival, not the timer, must end the pause.
	e := gatherEnv(t, 10*time.Second)
	pods := members("default", "created", "p", 4, 4, 1)
	e.add(pods[:2]...)

	answer := e.filterAsync(pods[0])
	for _, p := range pods[2:] {
		select {
		case r := <-answer:
			t.Fatalf("p-0 was answered before its gang existed: %+v", r)
		case <-time.After(20 * time.Millisecond):
		}
		e.add(p)
	}
	select {
	case r := <-answer:
		require.Len(t, r.Feasible, 1, "the last arrival completes the gang: p-0 reserves for all four and passes its place")
	case <-time.After(5 * time.Second):
		t.Fatal("p-0 still waits after its gang's last member arrived")
	}
	for _, ev := range e.events() {
		require.NotContains(t, ev, "waiting for members", "a member that waited was never turned away")
	}
	for _, p := range pods[1:] {
		require.Len(t, e.filter(p).Feasible, 1, "%s passes its reserved place", p.Name)
	}
}

func TestGatheringEndsWhenMembersStopArriving(t *testing.T) {
	const wait = 30 * time.Millisecond
	e := gatherEnv(t, wait)
	pods := members("default", "short", "p", 4, 4, 1)
	e.add(pods[:2]...)

	r := e.filter(pods[0])
	require.Empty(t, r.Feasible, "2 of 4 members exist and no more come")
	require.Contains(t, r.Failed["n-0"], "waiting for members: 2 of min-available 4 exist")
	require.Less(t, e.gathered("default/short"), gatherRounds*wait, "it waited one gap, not its whole budget")

	gathered := e.gathered("default/short")
	require.Empty(t, e.filter(pods[1]).Feasible)
	require.Equal(t, gathered, e.gathered("default/short"), "no member arrived since the last gap: turned away at once")
}

func TestGatheringStopsAtItsGangsBudget(t *testing.T) {
	const wait = 100 * time.Millisecond
	e := gatherEnv(t, wait)
	pods := members("default", "slow", "p", 400, 400, 0)
	e.add(pods[0])

	// Members keep arriving, each well within the gap, far longer than the budget lasts.
	answer := e.filterAsync(pods[0])
	var r FilterResult
	arrived := 1
	for answered := false; !answered; {
		select {
		case r = <-answer:
			answered = true
		case <-time.After(wait / 10):
			require.Less(t, arrived, len(pods), "filter still waits after every member arrived")
			e.add(pods[arrived])
			arrived++
		}
	}
	require.Empty(t, r.Feasible, "turned away while members were still arriving")
	require.True(t, strings.Contains(r.Failed["n-0"], "waiting for members"), "reason: %q", r.Failed["n-0"])
	require.GreaterOrEqual(t, e.gathered("default/slow"), gatherRounds*wait, "the gang spent its whole budget")

	e.add(pods[arrived])
	gathered := e.gathered("default/slow")
	require.Empty(t, e.filter(pods[1]).Feasible)
	require.Equal(t, gathered, e.gathered("default/slow"), "with its budget spent, the gang's members are turned away at once")
}

func TestGatheringOffTurnsMembersAwayAtOnce(t *testing.T) {
	e := gatherEnv(t, 0)
	pods := members("default", "off", "p", 4, 4, 1)
	e.add(pods[:3]...)
	require.Empty(t, e.filter(pods[0]).Feasible)
	require.Zero(t, e.gathered("default/off"))
}
