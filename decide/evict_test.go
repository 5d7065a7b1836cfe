package decide

import (
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/lockstep-sched/lockstep/placement"
)

// unitsOf is what reclaim offers of one gang ("" for ordinary pods): each extra alone, sorted by
// name, and the rest as one unit, with whether it is marked core.
type unitsOf struct {
	extras   []string
	core     []string
	markedAs bool
}

func TestReclaimUnitsOfferTheExtrasGangExtrasNames(t *testing.T) {
	// Gang b has task minimums, gang c a keep-extras member, gang d nothing to spare; all of
	// team-b, which team-a reclaims from. Pods of team-a and of no queue are not offered.
	s := makeSnapshot().GPUNodes("n", 2, 8).
		Queue(volcanoQueue("team-a", nil)).Queue(volcanoQueue("team-b", nil)).
		Pods(inQueue(teamB, allOn("n-0", tasked("b", makeSpec(2).Task("ps", 2), "worker", "worker", "ps", "ps"))...)...).
		Pods(inQueue(teamB, boundC()...)...).
		Pods(inQueue(teamB, onNodes(members("d", 2, 1, makeSpec(2)), "n-1", "n-1")...)...).
		Pods(inQueue(teamB, makePod("o").GPU(1).On("n-1"))...).
		Pods(inQueue(teamA, makePod("mine").GPU(1).On("n-1"))...).
		Pods(makePod("unqueued").GPU(1).On("n-1")).
		Obj()
	got := map[string]*unitsOf{}
	for _, u := range s.reclaimUnits(teamA) {
		assert.Equal(t, teamB, u.queue, "unit %s", u.Name())
		g := got[u.Gang]
		if g == nil {
			g = &unitsOf{}
			got[u.Gang] = g
		}
		switch {
		case u.Extra:
			require.Len(t, u.Pods, 1, "an extra goes alone")
			g.extras = append(g.extras, u.Pods[0].Name)
		case u.Gang == "":
			g.core = append(g.core, u.Pods[0].Name)
		default:
			require.Nil(t, g.core, "a gang's core is one unit")
			g.core, g.markedAs = sorted(names(u.Pods)), u.core
		}
	}
	for _, key := range []string{"ns/b", "ns/c"} {
		assert.ElementsMatch(t, names(s.Gangs[key].Extras(s.evictRefusedLately)), got[key].extras,
			"reclaim offers as extras exactly what Gang.Extras returns for %s", key)
	}
	assert.Equal(t, map[string]*unitsOf{
		"ns/b": {extras: got["ns/b"].extras, core: []string{"b-2", "b-3"}, markedAs: true},
		"ns/c": {extras: []string{"c-1"}, core: []string{"c-0", "c-2"}, markedAs: true},
		"ns/d": {core: []string{"d-0", "d-1"}, markedAs: false},
		"":     {core: []string{"o"}},
	}, got)
	assert.ElementsMatch(t, []string{"b-0", "b-1"}, got["ns/b"].extras, "the ps task stays at its minimum")
}

// boundC is gang c on n-0, a quorum of two: c-2, its youngest, keeps its extras, so c-1 is the
// one extra and c-0 stays beside c-2.
func boundC() []*podWrapper {
	c := allOn("n-0", members("c", 3, 1, makeSpec(2)))
	c[2].KeepExtras()
	return c
}

func TestReclaimUnitsNeverTakeAGangWithARefusedMemberWhole(t *testing.T) {
	s := makeSnapshot().GPUNodes("n", 1, 8).
		Queue(volcanoQueue("team-a", nil)).Queue(volcanoQueue("team-b", nil)).
		Pods(inQueue(teamB, boundA(3, makeSpec(1), nil)...)...).
		Refused("a-0", now.Add(-time.Second)).
		Obj()
	// Gang.Extras keeps the refused member, as taking back does, and reclaim offers the same
	// extras; but it never takes the gang whole, as priority preemption would not (evict.go,
	// reclaimUnits).
	extras := names(s.Gangs[gangKey("a")].Extras(s.evictRefusedLately))
	assert.Equal(t, []string{"a-2", "a-1"}, extras)
	var offered []string
	for _, u := range s.reclaimUnits(teamA) {
		require.True(t, u.Extra, "no core unit for a gang with a member refused lately: %v", names(u.Pods))
		offered = append(offered, names(u.Pods)...)
	}
	assert.ElementsMatch(t, extras, offered)
}

func TestTakeNode(t *testing.T) {
	// n-0 has 8 GPUs, 4 of them taken by a bound pod; n-1 has 8 free.
	scene := func(res ...*reservationWrapper) *Snapshot {
		return makeSnapshot().GPUNodes("n", 2, 8).Pods(makePod("bound").GPU(4).On("n-0")).Reservations(res...).Obj()
	}
	low := func(gang string, priority int32, node string, n int64) *reservationWrapper {
		return makeReservation(gang, priority).Planned(gang+"-0", node, n)
	}
	cases := []struct {
		name     string
		snap     *Snapshot
		own      string
		priority int32
		req      placement.Resources
		want     []string
	}{
		// Rows: name, reservations, the pod's gang, its priority, what it asks, what it takes.
		{"nothing when the pod fits", scene(low("low0", 0, "n-0", 2)), "", 10, gpus(2), nil},
		{"the lowest priority first, until it fits", scene(low("low0", 0, "n-0", 2), low("low5", 5, "n-0", 2)), "", 10, gpus(2),
			[]string{"ns/low0"}},
		{"more while it does not fit", scene(low("low5", 5, "n-0", 2), low("low0", 0, "n-0", 2)), "", 10, gpus(4),
			[]string{"ns/low0", "ns/low5"}},
		{"among equal priorities the newest first", scene(low("old", 0, "n-0", 2), low("new", 0, "n-0", 2).CreatedAt(t0.Add(time.Minute))), "", 10, gpus(2),
			[]string{"ns/new"}},
		{"a committing reservation never", scene(low("low0", 0, "n-0", 2).State(Committing), low("low5", 5, "n-0", 2)), "", 10, gpus(2),
			[]string{"ns/low5"}},
		{"equal priority never", scene(low("low", 10, "n-0", 4)), "", 10, gpus(2), nil},
		{"a reservation on another node never", scene(low("elsewhere", 0, "n-1", 8), low("here", 5, "n-0", 4)), "", 10, gpus(2),
			[]string{"ns/here"}},
		{"a hold yields like a reservation", scene(low("holder", 0, "n-0", 4).State(Holding)), "", 10, gpus(2), []string{"ns/holder"}},
		{"the pod's own gang's reservation is its own to use", scene(low("a", 0, "n-0", 4)), gangKey("a"), 0, gpus(4), nil},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			got := TakeNode(tc.snap.Reservations, tc.snap.Nodes["n-0"], tc.own, tc.priority, tc.req)
			assert.Equal(t, tc.want, got)
		})
	}
}
