package inspect

import (
	"fmt"
	"io"
	"sort"
	"strings"
	"time"

	"github.com/lockstep-sched/lockstep/views"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/util/duration"
)

// View is how a table is shown.
type View struct {
	AllNamespaces bool
	Wide          bool
	// Width is the terminal's width; 0 when the output is no terminal.
	Width int
	Now   time.Time
}

func (v View) table(headers ...string) *table {
	return &table{headers: headers, width: v.Width, cut: !v.Wide}
}

// Created maps a pod, as namespace/name, to when it was created: the gangs' ages come from the
// apiserver, since lockstep's answer has none.
type Created map[string]time.Time

// GangsTable prints gangs as `kubectl get` prints objects.
func GangsTable(w io.Writer, gangs []views.GangStatus, created Created, v View) error {
	headers := []string{"GANG", "SOURCE", "PHASE", "BOUND/MIN/TOTAL", "QUEUE", "AGE"}
	if v.AllNamespaces {
		headers = append([]string{"NAMESPACE"}, headers...)
	}
	if v.Wide {
		headers = append(headers, "PRIORITY", "LINE")
	}
	t := v.table(append(headers, "REASON")...)
	for _, g := range gangs {
		source := orDash(g.Source)
		if !v.Wide {
			source = shorten(source, 28)
		}
		row := []string{g.Name, source, string(g.Phase), counts(g), orDash(g.Queue), created.age(g, v.Now)}
		if v.AllNamespaces {
			row = append([]string{g.Namespace}, row...)
		}
		if v.Wide {
			row = append(row, fmt.Sprint(g.Priority), line(g.Line))
		}
		t.add(append(row, ownWords(g))...)
	}
	if len(gangs) == 0 {
		return nil
	}
	return t.write(w)
}

func counts(g views.GangStatus) string {
	total := g.TotalNumber
	if total == 0 {
		total = len(g.Members)
	}
	return fmt.Sprintf("%d/%d/%d", g.Bound, g.MinAvailable, total)
}

func line(l *views.LineStatus) string {
	if l == nil {
		return "-"
	}
	return fmt.Sprintf("%d/%d", l.Place, l.Of)
}

// ownWords is the gang's reason without the "gang ns/name: " lockstep starts it with, which the
// row already says.
func ownWords(g views.GangStatus) string {
	key := "gang " + g.Namespace + "/" + g.Name
	r := strings.TrimPrefix(g.Reason, key+": ")
	r = strings.TrimPrefix(r, key+" ")
	return orDash(r)
}

// age is the age of the gang's oldest member; "<unknown>" when the apiserver did not say.
func (c Created) age(g views.GangStatus, now time.Time) string {
	var oldest time.Time
	for _, m := range g.Members {
		if t, ok := c[m.Pod]; ok && (oldest.IsZero() || t.Before(oldest)) {
			oldest = t
		}
	}
	if oldest.IsZero() {
		return "<unknown>"
	}
	return duration.HumanDuration(now.Sub(oldest))
}

// QueuesTable prints the team queues.
func QueuesTable(w io.Writer, queues []views.QueueStatus, v View) error {
	headers := []string{"QUEUE", "STATE", "WEIGHT", "ALLOCATED", "DESERVED", "CAPABILITY"}
	if v.Wide {
		headers = append(headers, "WAITING GANGS")
	}
	t := v.table(append(headers, "WAITING")...)
	for _, q := range treeOrder(queues) {
		state := orDash(string(q.State))
		if q.Error != "" {
			state = "Error"
		}
		row := []string{strings.Repeat("  ", q.depth) + q.Key, state, fmt.Sprint(q.Weight), amounts(q.Allocated), amounts(q.Deserved), amounts(q.Capability)}
		if v.Wide {
			row = append(row, waiters(q.Waiting))
		}
		t.add(append(row, waitingWords(q.QueueStatus))...)
	}
	if len(queues) == 0 {
		return nil
	}
	return t.write(w)
}

// nestedQueue is a queue with its depth in the tree, for indenting.
type nestedQueue struct {
	views.QueueStatus
	depth int
}

// treeOrder lists each queue before the queues nested under it, children in the order given,
// so that the table reads as the tree.
func treeOrder(queues []views.QueueStatus) []nestedQueue {
	byKey := make(map[string]views.QueueStatus, len(queues))
	for _, q := range queues {
		byKey[q.Key] = q
	}
	out := make([]nestedQueue, 0, len(queues))
	var visit func(q views.QueueStatus, depth int)
	visit = func(q views.QueueStatus, depth int) {
		out = append(out, nestedQueue{q, depth})
		for _, kid := range q.Children {
			if c, ok := byKey[kid]; ok {
				visit(c, depth+1)
			}
		}
	}
	for _, q := range queues {
		if _, nested := byKey[q.Parent]; !nested {
			visit(q, 0)
		}
	}
	return out
}

// waitingWords says how many gangs wait and why the first one does, or what is wrong with the
// queue object itself.
func waitingWords(q views.QueueStatus) string {
	if q.Error != "" {
		return q.Error
	}
	if len(q.Waiting) == 0 {
		return "0"
	}
	first := q.Waiting[0]
	return fmt.Sprintf("%d: %s", len(q.Waiting), strings.TrimPrefix(first.Reason, "gang "+first.Gang+" "))
}

func waiters(ws []views.WaitingGang) string {
	names := make([]string, 0, len(ws))
	for _, w := range ws {
		names = append(names, w.Gang)
	}
	return orDash(strings.Join(names, ","))
}

// resourceOrder puts GPUs first: they are what gangs wait for.
var resourceOrder = map[string]int{"nvidia.com/gpu": 0, "cpu": 1, "memory": 2}

// amounts writes quantities as "gpu=4,cpu=8,memory=12Gi".
func amounts(q views.Quantities) string {
	names := make([]string, 0, len(q))
	for name := range q {
		names = append(names, string(name))
	}
	sort.Slice(names, func(i, j int) bool {
		oi, iKnown := resourceOrder[names[i]]
		oj, jKnown := resourceOrder[names[j]]
		if iKnown != jKnown {
			return iKnown
		}
		if oi != oj {
			return oi < oj
		}
		return names[i] < names[j]
	})
	parts := make([]string, 0, len(names))
	for _, name := range names {
		parts = append(parts, strings.TrimPrefix(name, "nvidia.com/")+"="+q[corev1.ResourceName(name)])
	}
	return orDash(strings.Join(parts, ","))
}

// draPools says a node's DRA GPUs as driver/pool free/total, "-" for none.
func draPools(pools []views.DRAPool) string {
	parts := make([]string, len(pools))
	for i, p := range pools {
		parts[i] = fmt.Sprintf("%s/%s %d/%d", p.Driver, p.Pool, p.Free, p.GPUs)
	}
	return orDash(strings.Join(parts, ","))
}

// NodesTable prints the nodes lockstep counts.
func NodesTable(w io.Writer, nodes []views.NodeStatus, v View) error {
	t := v.table("NODE", "GPUS FREE/TOTAL", "SCHEDULABLE", "TOPOLOGY", "DRA", "PROBLEMS")
	for _, n := range nodes {
		schedulable := "yes"
		if n.Unschedulable {
			schedulable = "no (cordoned)"
		}
		problems := n.Problems
		if n.TopologyError != "" {
			problems = append([]string{n.TopologyError}, problems...)
		}
		t.add(n.Name, fmt.Sprintf("%d/%d", n.GPUsFree, n.GPUs), schedulable, orDash(n.TopologySource), draPools(n.DRA), orDash(strings.Join(problems, "; ")))
	}
	if len(nodes) == 0 {
		return nil
	}
	return t.write(w)
}
