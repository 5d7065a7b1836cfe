package soak

import (
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func gpu(n int64) Res { return Res{GPU: n, MilliCPU: 100, Memory: 64 << 20} }

func node(name string, gpus int64) Node {
	return Node{Name: name, Free: Res{GPU: gpus, MilliCPU: 64000, Memory: 256 << 30}}
}

func members(n int, each int64) []Res {
	out := make([]Res, n)
	for i := range out {
		out[i] = gpu(each)
	}
	return out
}

var t0 = time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)

func TestGenerateIsDeterministicPerSeedAndIndex(t *testing.T) {
	a, b := Generate(7, 3), Generate(7, 3)
	require.Equal(t, a, b, "one (seed, index) draws one scenario")
	assert.NotEqual(t, a, Generate(7, 4), "another index draws another scenario")
	assert.NotEqual(t, a, Generate(8, 3), "another seed draws another scenario")
}

func TestGenerateStaysWithinItsLimits(t *testing.T) {
	kinds := map[Kind]int{}
	dialectsSeen := map[Dialect]bool{}
	for i := range 300 {
		sc := Generate(1, i)
		require.GreaterOrEqual(t, len(sc.Nodes), MinNodes)
		require.LessOrEqual(t, len(sc.Nodes), MaxNodes)
		require.GreaterOrEqual(t, len(sc.Steps), MinSteps)
		require.LessOrEqual(t, len(sc.Steps), MaxSteps)
		nodes, cordoned := len(sc.Nodes), 0
		for _, st := range sc.Steps {
			kinds[st.Kind]++
			require.LessOrEqual(t, st.After, MaxGap)
			switch st.Kind {
			case CreateGang:
				g := st.Gang
				dialectsSeen[g.Dialect] = true
				require.True(t, g.MinAvailable >= 1 && g.MinAvailable <= g.Members && g.Members <= MaxMembers, "%+v", g)
				require.True(t, g.RunFor >= MinRun && g.RunFor <= MaxRun)
				if !g.Dialect.HasGroup() {
					require.Zero(t, g.GroupAfter)
				}
			case AddNode:
				nodes++
			case RemoveNode:
				nodes--
				require.GreaterOrEqual(t, nodes, 2, "a removal leaves two nodes")
			case Cordon:
				cordoned++
				require.GreaterOrEqual(t, nodes-cordoned, 1, "a cordon leaves a node schedulable")
			case Uncordon:
				cordoned--
				require.GreaterOrEqual(t, cordoned, 0, "an uncordon follows a cordon")
			}
		}
	}
	for k := CreateGang; k <= RemoveNode; k++ {
		assert.Positive(t, kinds[k], "kind %s drawn", k)
	}
	assert.Len(t, dialectsSeen, int(dialects))
}

func TestTranscriptNamesEveryStep(t *testing.T) {
	sc := Generate(1, 0)
	text := sc.Transcript()
	assert.Contains(t, text, "seed 1 scenario 0")
	assert.Contains(t, text, "step  1 t=")
	assert.Contains(t, text, "create gang g1")
}

func TestFFDPlacesLargestFirst(t *testing.T) {
	order := []string{"a", "b"}
	free := map[string]Res{"a": node("a", 2).Free, "b": node("b", 3).Free}
	// In the members' own order the 1 would take a's room and leave the second 2 nowhere.
	nodes, ok := FFD(order, free, []Res{gpu(1), gpu(2), gpu(2)})
	require.True(t, ok)
	assert.Equal(t, []string{"b", "a", "b"}, nodes, "reported in the members' order")
	assert.Equal(t, int64(2), free["a"].GPU, "the caller's map is left as it was")
}

func TestFFDPlacesNodeByNodeNotBySums(t *testing.T) {
	order := []string{"a", "b", "c", "d"}
	free := map[string]Res{}
	for _, n := range order {
		free[n] = node(n, 1).Free
	}
	_, ok := FFD(order, free, members(1, 2))
	assert.False(t, ok, "four free GPUs on four nodes hold no 2-GPU member")
	_, ok = FFD(order, free, members(4, 1))
	assert.True(t, ok)
	_, ok = FFD(order, free, members(5, 1))
	assert.False(t, ok)
}

func TestFFDCountsCPUAndMemory(t *testing.T) {
	free := map[string]Res{"a": {GPU: 8, MilliCPU: 150, Memory: 1 << 30}}
	_, ok := FFD([]string{"a"}, free, members(2, 1))
	assert.False(t, ok, "two members of 100m do not fit 150m")
}

func TestWalkOwesWhatFitsInLineOrder(t *testing.T) {
	nodes := []Node{node("a", 4), node("b", 4)}
	units := []Unit{
		{Name: "gang low", Gang: "low", Priority: 100, Since: t0, Members: members(2, 2)},
		{Name: "gang high", Gang: "high", Priority: 1000, Since: t0.Add(time.Second), Members: members(3, 2)},
		{Name: "pod p1", Priority: 100, Since: t0.Add(-time.Second), Members: members(1, 2)},
	}
	v := Walk(nodes, nil, units, nil)
	require.Len(t, v, 3)
	assert.Equal(t, "gang high", v[0].Unit.Name, "higher priority first")
	assert.True(t, v[0].Owed)
	assert.Equal(t, "pod p1", v[1].Unit.Name, "then the older")
	assert.True(t, v[1].Owed)
	assert.Equal(t, "gang low", v[2].Unit.Name)
	assert.False(t, v[2].Owed, "8 GPUs, 6 + 2 taken before it")
}

func TestWalkLetsSmallerWorkPastAUnitThatDoesNotFit(t *testing.T) {
	nodes := []Node{node("a", 4)}
	units := []Unit{
		{Name: "gang big", Gang: "big", Priority: 1000, Since: t0, Members: members(3, 2)},
		{Name: "pod p1", Priority: 100, Since: t0, Members: members(1, 2)},
	}
	v := Walk(nodes, nil, units, nil)
	assert.False(t, v[0].Owed, "6 GPUs do not fit 4; it takes nothing")
	assert.True(t, v[1].Owed)
}

func TestWalkPutsReservingGangsFirstOnTheirHeldNodes(t *testing.T) {
	nodes := []Node{node("a", 4), node("b", 4)}
	units := []Unit{
		{Name: "pod p1", Priority: 1000, Since: t0, Members: members(1, 4)},
		{Name: "gang r", Gang: "r", Priority: 100, Since: t0, Members: members(2, 2), Reserving: true, Held: []string{"a", "b"}},
	}
	v := Walk(nodes, nil, units, nil)
	assert.Equal(t, "gang r", v[0].Unit.Name)
	assert.True(t, v[0].Owed)
	assert.Equal(t, []string{"a", "b"}, v[0].Nodes, "where the reservation holds, not where FFD would go")
	assert.False(t, v[1].Owed, "the reservation split the 8 GPUs: no node has 4 left")
}

func TestWalkReservationOnCapacityStillFreeingIsNotOwed(t *testing.T) {
	nodes := []Node{node("a", 0)} // a preemption's victims still terminating there
	units := []Unit{{Name: "gang r", Gang: "r", Priority: 1000, Since: t0, Members: members(2, 2), Reserving: true, Held: []string{"a", "a"}}}
	v := Walk(nodes, nil, units, nil)
	assert.False(t, v[0].Owed)
}

func TestWalkCountsExtrasFreeForGangsOnly(t *testing.T) {
	nodes := []Node{node("a", 0), node("b", 1)}
	extras := []Extra{
		{Pod: "x-3", Gang: "x", Node: "a", Priority: 500, Created: t0.Add(3 * time.Second), Requests: gpu(2)},
		{Pod: "x-2", Gang: "x", Node: "a", Priority: 500, Created: t0.Add(2 * time.Second), Requests: gpu(2)},
	}
	units := []Unit{
		{Name: "pod p1", Priority: 500, Since: t0, Members: members(1, 2)},
		{Name: "gang g", Gang: "g", Priority: 500, Since: t0.Add(time.Second), Members: members(1, 2)},
	}
	v := Walk(nodes, extras, units, nil)
	assert.False(t, v[0].Owed, "an ordinary pod is owed only free capacity")
	require.True(t, v[1].Owed, "a gang's quorum is owed the capacity equal-priority extras hold")
	assert.Equal(t, []string{"x-3"}, v[1].Evicts, "the youngest extra goes first, and only as many as needed")
}

func TestWalkUsesFreeCapacityBeforeExtras(t *testing.T) {
	nodes := []Node{node("a", 0), node("b", 2)}
	extras := []Extra{{Pod: "x-1", Gang: "x", Node: "a", Priority: 500, Created: t0, Requests: gpu(2)}}
	v := Walk(nodes, extras, []Unit{{Name: "gang g", Gang: "g", Priority: 500, Since: t0, Members: members(1, 2)}}, nil)
	require.True(t, v[0].Owed)
	assert.Equal(t, []string{"b"}, v[0].Nodes)
	assert.Empty(t, v[0].Evicts)
}

func TestWalkLeavesHigherPriorityAndOwnExtrasAlone(t *testing.T) {
	nodes := []Node{node("a", 0)}
	extras := []Extra{
		{Pod: "h-1", Gang: "h", Node: "a", Priority: 1000, Created: t0, Requests: gpu(2)},
		{Pod: "g-5", Gang: "g", Node: "a", Priority: 500, Created: t0, Requests: gpu(2)},
	}
	v := Walk(nodes, extras, []Unit{{Name: "gang g", Gang: "g", Priority: 500, Since: t0, Members: members(1, 2)}}, nil)
	assert.False(t, v[0].Owed)
}

func TestWalkCountsAnExtraOnce(t *testing.T) {
	nodes := []Node{node("a", 0)}
	extras := []Extra{{Pod: "x-1", Gang: "x", Node: "a", Priority: 100, Created: t0, Requests: gpu(2)}}
	units := []Unit{
		{Name: "gang g", Gang: "g", Priority: 500, Since: t0, Members: members(1, 2)},
		{Name: "gang h", Gang: "h", Priority: 500, Since: t0.Add(time.Second), Members: members(1, 2)},
	}
	v := Walk(nodes, extras, units, nil)
	assert.True(t, v[0].Owed)
	assert.False(t, v[1].Owed, "the extra was counted for the gang before it")
}

func TestWalkExemptsWorkAHoldKeepsBack(t *testing.T) {
	nodes := []Node{node("a", 8)}
	units := []Unit{
		{Name: "gang big", Gang: "big", Priority: 500, Since: t0, Members: members(5, 2)},
		{Name: "gang hi", Gang: "hi", Priority: 1000, Since: t0, Members: members(1, 2)},
		{Name: "gang mid", Gang: "mid", Priority: 500, Since: t0.Add(time.Second), Members: members(1, 2)},
		{Name: "pod lo", Priority: 100, Since: t0, Members: members(1, 2)},
	}
	v := Walk(nodes, nil, units, []Hold{{Gang: "big", Priority: 500}})
	byName := map[string]Verdict{}
	for _, x := range v {
		byName[x.Unit.Name] = x
	}
	assert.True(t, byName["gang hi"].Owed, "a hold yields to higher priority")
	for _, name := range []string{"gang big", "gang mid", "pod lo"} {
		assert.False(t, byName[name].Owed, name)
		assert.Contains(t, byName[name].Exempt, "gang big holds capacity", name)
	}
}

func TestDescribeShowsTheModel(t *testing.T) {
	nodes := []Node{node("a", 2)}
	extras := []Extra{{Pod: "x-1", Gang: "x", Node: "a", Priority: 100, Created: t0, Requests: gpu(2)}}
	v := Walk(nodes, extras, []Unit{{Name: "gang g", Gang: "g", Priority: 500, Since: t0, Members: members(2, 2)}}, nil)
	text := Describe(nodes, extras, v)
	assert.Contains(t, text, "a: 2 GPU")
	assert.Contains(t, text, "x-1 of gang x on a")
	assert.Contains(t, text, "gang g (priority 500, 2 x 2 GPU): OWED, fits on a,a evicting x-1")
}

func TestWalkTakesEveryReservationBeforePlacingAnyone(t *testing.T) {
	nodes := []Node{node("a", 6)}
	units := []Unit{
		{Name: "gang hi", Gang: "hi", Priority: 800, Since: t0.Add(time.Second), Members: members(1, 2), Reserving: true},
		{Name: "gang mid", Gang: "mid", Priority: 500, Since: t0, Members: members(6, 1), Reserving: true, Held: []string{"a", "a", "a", "a", "a", "a"}},
	}
	v := Walk(nodes, nil, units, nil)
	assert.Equal(t, "gang hi", v[0].Unit.Name)
	assert.False(t, v[0].Owed, "the lower gang's reservation holds all of a, whatever the line's order")
	assert.True(t, v[1].Owed)
}
