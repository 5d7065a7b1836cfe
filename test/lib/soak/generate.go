// Package soak is the pure half of the end-to-end soak test (test/e2e/soak_test.go): it draws
// scenarios from a seed, and it does the oracle's arithmetic (what fits where, which waiting work
// lockstep owes a binding). It talks to no cluster, so both halves of the oracle's reasoning can be
// checked here in milliseconds, and a scenario that failed on a cluster can be read back from its
// seed alone.
package soak

import (
	"fmt"
	"math/rand/v2"
	"strings"
	"time"
)

// Dialect is how a gang's members say they belong together.
type Dialect int

const (
	// Koordinator: the gang.scheduling.koordinator.sh/name and /min-available annotations.
	Koordinator Dialect = iota
	// Lightweight: the pod-group.scheduling.sigs.k8s.io/name and /min-available labels.
	Lightweight
	// SchedulerPlugins: the scheduling.x-k8s.io/pod-group label and a scheduler-plugins PodGroup.
	SchedulerPlugins
	// Volcano: the scheduling.k8s.io/group-name annotation and a Volcano PodGroup.
	Volcano
	dialects
)

func (d Dialect) String() string {
	return [...]string{"koordinator", "lightweight", "scheduler-plugins", "volcano"}[d]
}

// HasGroup reports whether the gang's rules live in a group object rather than on its pods.
func (d Dialect) HasGroup() bool { return d == SchedulerPlugins || d == Volcano }

// Priority is one of the soak's three PriorityClasses.
type Priority int

const (
	Low Priority = iota
	Mid
	High
	priorities
)

func (p Priority) String() string { return [...]string{"low", "mid", "high"}[p] }

// Gang is a job the soak submits.
type Gang struct {
	Name                        string
	Members, MinAvailable, GPUs int
	Priority                    Priority
	Dialect                     Dialect
	// GroupAfter delays the group object until that long after the pods (group dialects only;
	// a controller such as Volcano's makes its PodGroup after the pods now and then). Zero
	// creates the group first.
	GroupAfter time.Duration
	// KeepExtras opts the members beyond min-available out of being evicted for other quorums.
	KeepExtras bool
	// RunFor is how long the job runs once its quorum is bound.
	RunFor time.Duration
}

func (g Gang) String() string {
	var b strings.Builder
	fmt.Fprintf(&b, "gang %s (%s, %dx%s, min %d, prio %s", g.Name, g.Dialect, g.Members, gpus(g.GPUs), g.MinAvailable, g.Priority)
	switch {
	case g.Dialect.HasGroup() && g.GroupAfter > 0:
		fmt.Fprintf(&b, ", group %s after", g.GroupAfter)
	case g.Dialect.HasGroup():
		b.WriteString(", group first")
	}
	if g.KeepExtras {
		b.WriteString(", keep-extras")
	}
	fmt.Fprintf(&b, ", runs %s)", g.RunFor)
	return b.String()
}

// Pod is an ordinary pod the soak submits.
type Pod struct {
	Name   string
	GPUs   int
	RunFor time.Duration
}

func (p Pod) String() string { return fmt.Sprintf("%s (%s, runs %s)", p.Name, gpus(p.GPUs), p.RunFor) }

func gpus(n int) string {
	if n == 1 {
		return "1 GPU"
	}
	return fmt.Sprintf("%d GPUs", n)
}

// Kind is what a step does.
type Kind int

const (
	CreateGang Kind = iota
	CreatePods
	DeleteGang
	DeletePod
	AddNode
	Cordon
	Uncordon
	RemoveNode
)

func (k Kind) String() string {
	return [...]string{"create gang", "create pods", "delete gang", "delete pod", "add node", "cordon", "uncordon", "remove node"}[k]
}

// Step is one event of a scenario's stream.
type Step struct {
	// After is the gap since the step before: zero often, so that work arrives together.
	After time.Duration
	Kind  Kind
	Gang  Gang  // CreateGang
	Pods  []Pod // CreatePods
	GPUs  int   // AddNode
	// Pick chooses the gang, pod or node the step acts on among those that exist when it runs
	// (sorted by name), modulo their number: which exist depends on timing, the choice does not.
	Pick int
}

func (s Step) String() string {
	switch s.Kind {
	case CreateGang:
		return "create " + s.Gang.String()
	case CreatePods:
		names := make([]string, len(s.Pods))
		for i, p := range s.Pods {
			names[i] = p.String()
		}
		return "create pods " + strings.Join(names, ", ")
	case AddNode:
		return fmt.Sprintf("add node (%s)", gpus(s.GPUs))
	default:
		return fmt.Sprintf("%s (pick %d)", s.Kind, s.Pick)
	}
}

// Scenario is one soak scenario: a cluster and a stream of steps.
type Scenario struct {
	Seed  int64
	Index int
	// Nodes are the GPU counts of the nodes the scenario starts with.
	Nodes []int
	Steps []Step
}

// Limits of what Generate draws; the end-to-end driver's timeouts are set against them.
const (
	MinNodes, MaxNodes = 2, 5
	MinSteps, MaxSteps = 8, 16
	MaxGap             = 2 * time.Second
	MinRun, MaxRun     = 2 * time.Second, 10 * time.Second
	MaxMembers         = 8
)

// nodeGPUs are the GPU counts a node may have.
var nodeGPUs = []int{2, 4, 8}

// weights of the step kinds: mostly work arriving, some of it leaving, the cluster changing now
// and then.
var weights = []struct {
	kind   Kind
	weight int
}{
	{CreateGang, 40}, {CreatePods, 15}, {DeleteGang, 8}, {DeletePod, 7},
	{AddNode, 6}, {Cordon, 6}, {Uncordon, 8}, {RemoveNode, 6},
}

// Generate draws scenario index of seed. Its random source depends on (seed, index) alone, so a
// scenario replays by itself.
func Generate(seed int64, index int) Scenario {
	g := generator{rng: rand.New(rand.NewPCG(uint64(seed), uint64(index)))}
	sc := Scenario{Seed: seed, Index: index}
	for range g.between(MinNodes, MaxNodes) {
		sc.Nodes = append(sc.Nodes, g.nodeGPUs())
	}
	g.nodes = len(sc.Nodes)
	for range g.between(MinSteps, MaxSteps) {
		sc.Steps = append(sc.Steps, g.step())
	}
	return sc
}

// generator keeps the counts the next step depends on, so that it never asks for the impossible
// (uncordon before any cordon, a cluster of no node).
type generator struct {
	rng             *rand.Rand
	gangs, pods     int
	nodes, cordoned int
}

func (g *generator) between(lo, hi int) int { return lo + g.rng.IntN(hi-lo+1) }

func (g *generator) nodeGPUs() int { return nodeGPUs[g.rng.IntN(len(nodeGPUs))] }

// gap is zero two times in five (work created together), else up to MaxGap.
func (g *generator) gap() time.Duration {
	if g.rng.IntN(5) < 2 {
		return 0
	}
	return time.Duration(g.rng.Int64N(int64(MaxGap/(100*time.Millisecond))+1)) * 100 * time.Millisecond
}

func (g *generator) runFor() time.Duration {
	return MinRun + time.Duration(g.rng.Int64N(int64((MaxRun-MinRun)/(100*time.Millisecond))+1))*100*time.Millisecond
}

func (g *generator) step() Step {
	st := Step{After: g.gap(), Pick: g.rng.IntN(1 << 16)}
	st.Kind = g.kind()
	switch st.Kind {
	case CreateGang:
		st.Gang = g.gang()
	case CreatePods:
		for range g.between(1, 3) {
			g.pods++
			st.Pods = append(st.Pods, Pod{Name: fmt.Sprintf("p%d", g.pods), GPUs: g.rng.IntN(3), RunFor: g.runFor()})
		}
	case AddNode:
		st.GPUs = g.nodeGPUs()
		g.nodes++
	case Cordon:
		g.cordoned++
	case Uncordon:
		g.cordoned--
	case RemoveNode:
		g.nodes--
	}
	return st
}

// kind draws a step kind the cluster allows: a cordon keeps a node schedulable, a removal keeps
// two nodes, an uncordon needs a cordoned node.
func (g *generator) kind() Kind {
	for {
		total := 0
		for _, w := range weights {
			total += w.weight
		}
		n := g.rng.IntN(total)
		var k Kind
		for _, w := range weights {
			if n < w.weight {
				k = w.kind
				break
			}
			n -= w.weight
		}
		switch {
		case k == Cordon && g.nodes-g.cordoned < 2,
			k == Uncordon && g.cordoned == 0,
			k == RemoveNode && g.nodes < 3:
			continue
		}
		return k
	}
}

func (g *generator) gang() Gang {
	g.gangs++
	members := g.between(1, MaxMembers)
	gg := Gang{
		Name:         fmt.Sprintf("g%d", g.gangs),
		Members:      members,
		MinAvailable: g.between(1, members),
		Priority:     Priority(g.rng.IntN(int(priorities))),
		Dialect:      Dialect(g.rng.IntN(int(dialects))),
		KeepExtras:   g.rng.IntN(5) == 0,
		RunFor:       g.runFor(),
	}
	// 1 or 2 GPUs a member, and now and then none (a parameter server, a launcher).
	switch n := g.rng.IntN(10); {
	case n == 0:
		gg.GPUs = 0
	case n < 6:
		gg.GPUs = 1
	default:
		gg.GPUs = 2
	}
	if gg.Dialect.HasGroup() && g.rng.IntN(2) == 0 {
		gg.GroupAfter = time.Duration(1+g.rng.IntN(15)) * 100 * time.Millisecond
	}
	return gg
}

// Transcript is the scenario as a reader takes it in: one line per step, with its time.
func (sc Scenario) Transcript() string {
	var b strings.Builder
	fmt.Fprintf(&b, "seed %d scenario %d: nodes %v GPUs\n", sc.Seed, sc.Index, sc.Nodes)
	var at time.Duration
	for i, st := range sc.Steps {
		at += st.After
		fmt.Fprintf(&b, "  step %2d t=%.1fs %s\n", i+1, at.Seconds(), st)
	}
	return b.String()
}
