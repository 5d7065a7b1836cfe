package soak

import (
	"fmt"
	"sort"
	"strings"
	"time"
)

// The oracle's second check: what fits binds. It builds the line of waiting work as lockstep
// orders it (priority, then age) and walks it greedily over a model of the scenario's schedulable
// nodes. Work that fits the model is owed a binding; the driver fails a scenario where a unit
// stays owed and unbound too long. The model errs on the side of owing less: it places with
// first-fit-decreasing, which misses placements a cleverer search finds, and it frees nothing by
// preemption except gangs' members beyond their quorum.

// Res is what a pod requests, or what a node has left.
type Res struct {
	GPU, MilliCPU, Memory int64
}

func (r Res) Add(o Res) Res { return Res{r.GPU + o.GPU, r.MilliCPU + o.MilliCPU, r.Memory + o.Memory} }
func (r Res) Sub(o Res) Res { return Res{r.GPU - o.GPU, r.MilliCPU - o.MilliCPU, r.Memory - o.Memory} }

// FitsIn reports whether r fits within free in every resource.
func (r Res) FitsIn(free Res) bool {
	return r.GPU <= free.GPU && r.MilliCPU <= free.MilliCPU && r.Memory <= free.Memory
}

// covered reports whether nothing of r is negative.
func (r Res) covered() bool { return r.GPU >= 0 && r.MilliCPU >= 0 && r.Memory >= 0 }

func (r Res) String() string {
	return fmt.Sprintf("%d GPU, %dm cpu, %dMi", r.GPU, r.MilliCPU, r.Memory>>20)
}

// larger orders requests for first-fit-decreasing: GPUs, then cpu, then memory.
func larger(a, b Res) bool {
	if a.GPU != b.GPU {
		return a.GPU > b.GPU
	}
	if a.MilliCPU != b.MilliCPU {
		return a.MilliCPU > b.MilliCPU
	}
	return a.Memory > b.Memory
}

// Node is a schedulable node with what its bound pods (terminating ones too: they hold until
// they are gone) leave free.
type Node struct {
	Name string
	Free Res
}

// Extra is a bound member beyond its gang's min-available, which lockstep evicts for a waiting
// quorum of equal or higher priority. The driver lists only those whose gang did not opt out.
type Extra struct {
	Pod, Gang, Node string
	Priority        int32
	Created         time.Time
	Requests        Res
}

// Unit is one piece of waiting work: a gang's missing quorum members, or an ordinary pod.
type Unit struct {
	Name string
	// Gang is the gang's name; "" for an ordinary pod.
	Gang     string
	Priority int32
	// Since is when the unit began to wait: its oldest member's creation.
	Since   time.Time
	Members []Res
	// Reserving: lockstep holds a reservation for the gang, so it goes first. Held[i], when set,
	// is the node the reservation holds for Members[i].
	Reserving bool
	Held      []string
}

// Verdict is what the walk made of one unit.
type Verdict struct {
	Unit Unit
	// Owed: the unit fits the model, so lockstep owes it a binding.
	Owed bool
	// Exempt says why lockstep may keep a unit that fits waiting ("" when it may not).
	Exempt string
	// Nodes is where the model put the members (when Owed), Evicts the extras it counted free.
	Nodes  []string
	Evicts []string
}

// Hold is a starving gang's hold as /debug/gangs shows it: it keeps work of equal or lower
// priority waiting.
type Hold struct {
	Gang     string
	Priority int32
}

// Walk goes down the line: reserving gangs first, then by priority (higher first), then age.
// Every reservation's held places are taken before anyone is placed, as lockstep's book holds
// them whatever the order. Each unit that fits takes its place in the model; one that does not
// takes nothing. Units of priority at or below a hold's are exempt and take nothing either.
func Walk(nodes []Node, extras []Extra, units []Unit, holds []Hold) []Verdict {
	m := newModel(nodes, extras)
	line := append([]Unit(nil), units...)
	sort.SliceStable(line, func(i, j int) bool { return inLineBefore(line[i], line[j]) })
	for _, u := range line {
		m.hold(u)
	}
	out := make([]Verdict, 0, len(line))
	for _, u := range line {
		v := Verdict{Unit: u}
		if h := heldBack(u, holds); h != nil {
			v.Exempt = fmt.Sprintf("gang %s holds capacity at priority %d", h.Gang, h.Priority)
			out = append(out, v)
			continue
		}
		v.Owed, v.Nodes, v.Evicts = m.place(u)
		out = append(out, v)
	}
	return out
}

func inLineBefore(a, b Unit) bool {
	if a.Reserving != b.Reserving {
		return a.Reserving
	}
	if a.Priority != b.Priority {
		return a.Priority > b.Priority
	}
	if !a.Since.Equal(b.Since) {
		return a.Since.Before(b.Since)
	}
	return a.Name < b.Name
}

func heldBack(u Unit, holds []Hold) *Hold {
	for i, h := range holds {
		if h.Priority >= u.Priority {
			return &holds[i]
		}
	}
	return nil
}

// model is the walk's picture of the nodes: what is free, and the extras not yet counted free.
type model struct {
	order  []string
	free   map[string]Res
	extras map[string][]Extra // per node, youngest first
}

func newModel(nodes []Node, extras []Extra) *model {
	m := &model{free: map[string]Res{}, extras: map[string][]Extra{}}
	for _, n := range nodes {
		m.order = append(m.order, n.Name)
		m.free[n.Name] = n.Free
	}
	sort.Strings(m.order)
	for _, e := range extras {
		if _, ok := m.free[e.Node]; ok {
			m.extras[e.Node] = append(m.extras[e.Node], e)
		}
	}
	for _, list := range m.extras {
		sort.SliceStable(list, func(i, j int) bool { return list[i].Created.After(list[j].Created) })
	}
	return m
}

// held reports whether the unit's member i has a reserved place on a node of the model.
func (m *model) held(u Unit, i int) bool {
	if i >= len(u.Held) || u.Held[i] == "" {
		return false
	}
	_, known := m.free[u.Held[i]]
	return known
}

// hold takes the places a unit's reservation holds.
func (m *model) hold(u Unit) {
	for i, r := range u.Members {
		if m.held(u, i) {
			m.free[u.Held[i]] = m.free[u.Held[i]].Sub(r)
		}
	}
}

// place puts a unit in the model when it fits: its reserved places are its own already (hold),
// unless a node is overcommitted (a preemption's victims still terminating there); its other
// members go on free capacity, and for a gang, failing that, on free capacity plus the extras
// lockstep may evict for it.
func (m *model) place(u Unit) (ok bool, nodes []string, evicts []string) {
	nodes = make([]string, len(u.Members))
	var rest []int
	for i := range u.Members {
		if !m.held(u, i) {
			rest = append(rest, i)
			continue
		}
		nodes[i] = u.Held[i]
		if !m.free[u.Held[i]].covered() {
			return false, nil, nil
		}
	}
	members := make([]Res, len(rest))
	for j, i := range rest {
		members[j] = u.Members[i]
	}
	placed, fits := FFD(m.order, m.free, members)
	if !fits && u.Gang != "" {
		placed, fits = FFD(m.order, m.withExtras(u), members)
	}
	if !fits {
		return false, nil, nil
	}
	used := map[string]Res{}
	for j, i := range rest {
		nodes[i] = placed[j]
		used[placed[j]] = used[placed[j]].Add(members[j])
	}
	for _, node := range m.order {
		if r, ok := used[node]; ok {
			evicts = append(evicts, m.take(node, r, u)...)
		}
	}
	return true, nodes, evicts
}

// withExtras is the free capacity a gang unit sees: free plus the extras of other gangs at its
// priority or below.
func (m *model) withExtras(u Unit) map[string]Res {
	out := make(map[string]Res, len(m.free))
	for node, f := range m.free {
		for _, e := range m.extras[node] {
			if m.evictable(e, u) {
				f = f.Add(e.Requests)
			}
		}
		out[node] = f
	}
	return out
}

func (m *model) evictable(e Extra, u Unit) bool {
	return u.Gang != "" && e.Gang != u.Gang && e.Priority <= u.Priority
}

// take uses r on node: free capacity first, then the node's evictable extras, youngest first,
// until what is used is covered. It returns the extras it counted as evicted.
func (m *model) take(node string, r Res, u Unit) []string {
	f := m.free[node].Sub(r)
	var evicted []string
	keep := m.extras[node][:0]
	for _, e := range m.extras[node] {
		if !f.covered() && m.evictable(e, u) {
			f = f.Add(e.Requests)
			evicted = append(evicted, e.Pod)
			continue
		}
		keep = append(keep, e)
	}
	m.extras[node] = keep
	m.free[node] = f
	return evicted
}

// FFD places members by first-fit-decreasing: the largest first, each on the first node (in
// order) with room left. It reports where each member went, in the members' order.
func FFD(order []string, free map[string]Res, members []Res) ([]string, bool) {
	idx := make([]int, len(members))
	for i := range idx {
		idx[i] = i
	}
	sort.SliceStable(idx, func(a, b int) bool { return larger(members[idx[a]], members[idx[b]]) })
	left := make(map[string]Res, len(free))
	for n, f := range free {
		left[n] = f
	}
	out := make([]string, len(members))
	for _, i := range idx {
		for _, node := range order {
			if members[i].FitsIn(left[node]) {
				out[i] = node
				left[node] = left[node].Sub(members[i])
				break
			}
		}
		if out[i] == "" {
			return nil, false
		}
	}
	return out, true
}

// Describe is the model and the walk's verdicts, for a failure message.
func Describe(nodes []Node, extras []Extra, verdicts []Verdict) string {
	var b strings.Builder
	b.WriteString("  nodes (free after bound pods):\n")
	for _, n := range nodes {
		fmt.Fprintf(&b, "    %s: %s\n", n.Name, n.Free)
	}
	if len(extras) > 0 {
		b.WriteString("  extras (bound beyond their quorum, evictable):\n")
		for _, e := range extras {
			fmt.Fprintf(&b, "    %s of gang %s on %s, priority %d, %d GPU\n", e.Pod, e.Gang, e.Node, e.Priority, e.Requests.GPU)
		}
	}
	b.WriteString("  line:\n")
	for i, v := range verdicts {
		what := "does not fit"
		switch {
		case v.Exempt != "":
			what = "exempt: " + v.Exempt
		case v.Owed:
			what = "OWED, fits on " + strings.Join(v.Nodes, ",")
			if len(v.Evicts) > 0 {
				what += " evicting " + strings.Join(v.Evicts, ",")
			}
		}
		res := ""
		if v.Unit.Reserving {
			res = " reserving"
		}
		fmt.Fprintf(&b, "    %d. %s (priority %d, %d x %d GPU%s): %s\n", i+1, v.Unit.Name, v.Unit.Priority, len(v.Unit.Members), firstGPU(v.Unit.Members), res, what)
	}
	return b.String()
}

func firstGPU(members []Res) int64 {
	if len(members) == 0 {
		return 0
	}
	return members[0].GPU
}
