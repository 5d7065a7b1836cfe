package decide

import (
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/lockstep-sched/lockstep/placement"
)

// waitingGang is gang of count unbound members of 4 GPUs at priority, a quorum of minAvailable,
// its oldest created age after t0.
func waitingGang(gang string, priority int32, age time.Duration, count, minAvailable int) []*podWrapper {
	out := members(gang, count, 4, makeSpec(minAvailable))
	for i, p := range out {
		p.Priority(priority).CreatedAt(t0.Add(age + time.Duration(i)*time.Second))
	}
	return out
}

func TestLineAndPlaces(t *testing.T) {
	s := makeSnapshot().GPUNodes("n", 4, 8).
		Pods(waitingGang("hi", 10, 5*time.Minute, 1, 1)...).
		Pods(waitingGang("short", 0, 0, 1, 2)...).
		Pods(waitingGang("old", 0, time.Minute, 1, 1)...).
		Pods(waitingGang("young", 0, 2*time.Minute, 1, 1)...).
		Pods(waitingGang("tie-b", 0, 3*time.Minute, 1, 1)...).
		Pods(waitingGang("tie-a", 0, 3*time.Minute, 1, 1)...).
		Pods(waitingGang("holding", 0, 4*time.Minute, 1, 1)...).
		Reservations(makeReservation("holding", 0).Planned("holding-0", "n-0", 4).State(Holding)).
		// Not in line: a gang with its quorum bound, and one with a live reservation.
		Pods(onNodes(waitingGang("done", 20, 0, 1, 1), "n-1")...).
		Pods(waitingGang("reserved", 20, 0, 1, 1)...).
		Reservations(makeReservation("reserved", 20).Planned("reserved-0", "n-2", 4)).
		Obj()

	cases := []struct {
		gang      string
		plannable bool
		why       string
	}{
		{"ns/hi", true, "priority 10; behind 0 gangs of higher priority and 0 of equal priority waiting longer"},
		{"ns/short", false, "priority 0; behind 1 gang of higher priority and 0 of equal priority waiting longer; it cannot be planned yet (members missing or gated)"},
		{"ns/old", true, "priority 0; behind 1 gang of higher priority and 1 of equal priority waiting longer"},
		{"ns/young", true, "behind 1 gang of higher priority and 2 of equal priority"},
		{"ns/tie-a", true, "and 3 of equal priority"},
		{"ns/tie-b", true, "and 4 of equal priority"},
		{"ns/holding", true, "and 5 of equal priority"},
	}
	line := s.Line()
	require.Len(t, line, len(cases), "satisfied gangs and gangs with a reservation are not in line")
	places := s.Places()
	require.Len(t, places, len(cases))
	for i, tc := range cases {
		t.Run(tc.gang, func(t *testing.T) {
			w := line[i]
			assert.Equal(t, tc.gang, w.Gang.Key, "place %d", i+1)
			assert.Equal(t, tc.plannable, w.Plannable)
			if tc.plannable {
				assert.Equal(t, []*Pod{w.Gang.Oldest()}, w.Quorum)
			} else {
				assert.Nil(t, w.Quorum)
			}
			require.Contains(t, places, tc.gang)
			assert.Equal(t, i+1, places[tc.gang].Place)
			assert.Equal(t, len(cases), places[tc.gang].Of)
			assert.Contains(t, places[tc.gang].Why, tc.why)
		})
	}
}

func TestProtectedQuorums(t *testing.T) {
	// n-0 and n-2 are free, n-1 is full: a quorum of two 4-GPU members goes to n-0 first.
	scene := func() *snapshotWrapper {
		return makeSnapshot().GPUNodes("n", 3, 8).Pods(makePod("full").GPU(8).On("n-1"))
	}
	quorum := times(2, gpus(4))
	cases := []struct {
		name     string
		snap     *snapshotWrapper
		own      string
		priority int32
		want     map[string]placement.Resources
		of       map[string][]string
	}{
		{
			name: "a waiting gang of equal priority keeps the nodes its quorum would use",
			snap: scene().Pods(waitingGang("w", 0, 0, 2, 2)...),
			own:  "ns/x", priority: 0,
			want: map[string]placement.Resources{"n-0": quorum},
			of:   map[string][]string{"n-0": {"ns/w"}},
		},
		{
			name: "a higher-priority waiting gang is protected from a lower one",
			snap: scene().Pods(waitingGang("w", 10, 0, 2, 2)...),
			own:  "ns/x", priority: 5,
			want: map[string]placement.Resources{"n-0": quorum},
			of:   map[string][]string{"n-0": {"ns/w"}},
		},
		{
			name: "a lower-priority waiting gang is not protected",
			snap: scene().Pods(waitingGang("w", 0, 0, 2, 2)...),
			own:  "ns/x", priority: 5,
		},
		{
			name: "quorums in line order, each beside the ones before it",
			snap: scene().Pods(waitingGang("w1", 0, 0, 2, 2)...).Pods(waitingGang("w2", 0, time.Minute, 2, 2)...),
			own:  "ns/x", priority: 0,
			want: map[string]placement.Resources{"n-0": quorum, "n-2": quorum},
			of:   map[string][]string{"n-0": {"ns/w1"}, "n-2": {"ns/w2"}},
		},
		{
			name: "nothing when the waiting gang's quorum does not fit",
			snap: scene().Pods(waitingGang("w", 0, 0, 3, 3)...).Pods(makePod("most").GPU(6).On("n-2")),
			own:  "ns/x", priority: 0,
		},
		{
			name: "nothing for a gang that cannot be planned yet",
			snap: scene().Pods(waitingGang("w", 0, 0, 2, 3)...),
			own:  "ns/x", priority: 0,
		},
		{
			name: "nothing for a starving gang's hold, which keeps its capacity itself",
			snap: scene().Pods(waitingGang("w", 0, 0, 2, 2)...).
				Reservations(makeReservation("w", 0).Planned("w-0", "n-0", 4).Planned("w-1", "n-0", 4).State(Holding)),
			own: "ns/x", priority: 0,
		},
		{
			name: "nothing from the asker's own gang",
			snap: scene().Pods(waitingGang("w", 0, 0, 2, 2)...),
			own:  "ns/w", priority: 0,
		},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			s := tc.snap.Obj()
			v := s.ProtectedQuorums(tc.own, tc.priority)
			if tc.want == nil {
				assert.Empty(t, v.Quorums)
				assert.Empty(t, v.QuorumsOf)
				return
			}
			assert.Equal(t, tc.want, v.Quorums)
			assert.Equal(t, tc.of, v.QuorumsOf)
			for node, gangs := range tc.of {
				assert.Contains(t, s.Reservations.Holders(node, v), gangs[0]+" (waiting for its quorum)")
			}
		})
	}
}
