package decide

import (
	"reflect"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
)

// Decisions read a snapshot their owner shares with nobody while they run, and promise to change
// nothing in it: the owner keeps it in step by copying only what the ledger changed, so a write
// by a decision would live on unseen. Each scene is built twice by the same calls, the second a
// deep copy of the first; every decision runs on the first, which must still equal the second.
func TestDecisionsChangeNothingTheyRead(t *testing.T) {
	cases := []struct {
		name   string
		scene  func() *snapshotWrapper
		member string
	}{
		{"a reservation on free capacity", func() *snapshotWrapper {
			return makeSnapshot().GPUNodes("n", 2, 8).Pods(gangA(2, 2, 0)...)
		}, "a-1"},
		{"a takeover", func() *snapshotWrapper { return lowReservation(0, Reserving).Pods(gangA(2, 2, 10)...) }, "a-0"},
		{"extras taken back", func() *snapshotWrapper { return elasticB(0, "").MayEvict().Pods(gangA(2, 2, 0)...) }, "a-0"},
		{"priority preemption", func() *snapshotWrapper { return rigidC().MayEvict().Pods(gangA(2, 2, 10)...) }, "a-0"},
		{"reclaim", reclaimScene, "a-0"},
		{"a starving gang's hold", func() *snapshotWrapper { return starvingScene(0, 10*time.Minute) }, "s-0"},
		{"a member beyond its gang's plan", func() *snapshotWrapper {
			return makeSnapshot().GPUNodes("n", 2, 8).Pods(gangA(3, 2, 0)...).Pods(waitingGang("w", 0, 0, 2, 2)...).
				Reservations(makeReservation("a", 0).Held("a-0", "n-0", 4, SlotReserved).Held("a-1", "n-0", 4, SlotReserved))
		}, "a-2"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			s, before := tc.scene().Obj(), tc.scene().Obj()
			if !assert.True(t, reflect.DeepEqual(before, s), "the two builds differ before any decision") {
				return
			}
			p := pod(s, tc.member)
			a := s.Admit(p, nil)
			s.Admit(p, []string{"n-0", "n-1"})
			s.EvictFor(p)
			s.HoldForStarving()
			s.Places()
			s.ProtectedQuorums(p.Gang, p.Priority)
			s.reclaimUnits(p.Queue)
			for _, g := range s.Gangs {
				g.Extras(s.evictRefusedLately)
			}
			assert.True(t, a.Wait != "" || a.Reserve != nil, "the decision decided something")
			assert.Equal(t, before, s)
		})
	}
}
