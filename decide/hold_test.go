package decide

import (
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// starvingScene is two 8-GPU nodes full of ordinary pods at fillers' priority, and gang s, two
// members of 8 GPUs at priority 0, waiting since waited ago, under a 5m starvation threshold.
func starvingScene(fillers int32, waited time.Duration) *snapshotWrapper {
	s := members("s", 2, 8, makeSpec(2))
	for _, p := range s {
		p.CreatedAt(now.Add(-waited))
	}
	return makeSnapshot().GPUNodes("n", 2, 8).
		Rules(func(r *Rules) { r.StarvationThreshold = 5 * time.Minute }).
		Pods(makePod("f-0").GPU(8).On("n-0").Priority(fillers), makePod("f-1").GPU(8).On("n-1").Priority(fillers)).
		Pods(s...)
}

func TestHoldForStarving(t *testing.T) {
	cases := []struct {
		name string
		snap *snapshotWrapper
		hold bool
	}{
		{
			name: "a gang waiting past the threshold holds the nodes its quorum would use",
			snap: starvingScene(0, 10*time.Minute),
			hold: true,
		},
		{
			name: "none before the threshold",
			snap: starvingScene(0, 2*time.Minute),
		},
		{
			name: "none with the rule off",
			snap: starvingScene(0, 10*time.Minute).Rules(func(r *Rules) { r.StarvationThreshold = 0 }),
		},
		{
			name: "none while another gang holds",
			snap: starvingScene(0, 10*time.Minute).Reservations(makeReservation("other", 0).Planned("other-0", "n-0", 8).State(Holding)),
		},
		{
			name: "none when higher-priority pods keep the quorum from fitting even as the rest frees",
			snap: starvingScene(10, 10*time.Minute),
		},
		{
			name: "none for a gang whose last reservation timed out",
			snap: starvingScene(0, 10*time.Minute).History("s", History{TimedOut: true, TimedOutAt: now.Add(-time.Hour)}),
		},
		{
			name: "waiting counts from its last reservation",
			snap: starvingScene(0, 10*time.Minute).History("s", History{WaitingSince: now.Add(-time.Minute)}),
		},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			h := tc.snap.Obj().HoldForStarving()
			if !tc.hold {
				assert.Nil(t, h)
				return
			}
			require.NotNil(t, h)
			assert.Equal(t, "ns/s", h.Gang)
			assertHold(t, h.Hold)
			assert.Contains(t, h.Reason, "past --starvation-threshold 5m0s, so lockstep holds nodes n-0, n-1 for its quorum")
			assert.Contains(t, h.Reason, "it has waited 10m0s for capacity")
		})
	}
}

func assertHold(t *testing.T, h *Reservation) {
	t.Helper()
	require.NotNil(t, h)
	assert.Equal(t, Holding, h.State)
	assert.Equal(t, "ns/s", h.Gang)
	assert.Equal(t, now.Add(time.Minute), h.Expires)
	require.Len(t, h.Slots, 2)
	var nodes []string
	for _, sl := range h.Slots {
		assert.Equal(t, SlotPlanned, sl.State, "a hold's members still wait")
		assert.Empty(t, sl.Pod)
		nodes = append(nodes, sl.Node)
	}
	assert.ElementsMatch(t, []string{"n-0", "n-1"}, nodes)
}

func TestAdmitOfAStarvingMemberHolds(t *testing.T) {
	s := starvingScene(0, 10*time.Minute).Obj()
	a := s.Admit(pod(s, "s-0"), nil)
	assert.Nil(t, a.Reserve)
	assertHold(t, a.Hold)
	assert.Equal(t, times(2, gpus(8)), a.Want)
	assert.Contains(t, a.Wait, "--starvation-threshold")
}
