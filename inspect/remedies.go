package inspect

import (
	"fmt"
	"regexp"
	"strconv"
	"strings"

	"k8s.io/apimachinery/pkg/api/resource"

	"github.com/lockstep-sched/lockstep/views"
	"github.com/lockstep-sched/lockstep/wellknown"
)

// remedy reads one kind of reason lockstep gives a waiting gang (the words of package placement,
// gang and quota) and says what would end the wait. A reason no remedy knows still reaches the
// reader whole; it only goes without advice.
type remedy struct {
	pattern *regexp.Regexp
	advise  func(g views.GangStatus, m []string, f Facts) []string
}

var remedies = []remedy{
	{regexp.MustCompile(`^(\d+) members? need (\S+) ((?:devices of class )?\S+), (\S+) free`), shortInTotal},
	{regexp.MustCompile(`member (\S+) needs (\S+) ((?:devices of class )?\S+) on one node after placing the others: ([^;]*)`), shortOnOneNode},
	{regexp.MustCompile(`node (\S+) has not the devices (.+) ask(?: \(([^)]*)\))?`), devicesRefused},
	{regexp.MustCompile(`^(\d+) members? (?:x (\d+) nvidia\.com/gpu|\((\d+) nvidia\.com/gpu in all\)) need one (\S+) \(([^)]+)\); the largest \S+ has (\d+) free \(([^)]+)\)`), shortInDomain},
	{regexp.MustCompile(`need one (\S+) \(([^)]+)\); no node has the label`), noDomain},
	{regexp.MustCompile(`^waits for its queue: (.*)`), queueQuota},
	{regexp.MustCompile(`waiting for members: (\d+) of min-available (\d+) exist`), missingMembers},
	{regexp.MustCompile(`^waiting for (.+) to exist`), missingGroup},
	{regexp.MustCompile(`reservation timed out|reservation expired`), timedOut},
	{regexp.MustCompile(`given up to higher-priority`), tookOver},
	{regexp.MustCompile(`; gang (\S+) holds (\S+) in reservations`), heldByOthers},
}

// Facts are what the advice weighs beyond the gang's own status.
type Facts struct {
	// ClusterGPUs is the nvidia.com/gpu of the schedulable nodes lockstep knows; 0 when unknown.
	ClusterGPUs int64
}

// Remedies are what would let a waiting gang run, most direct first.
func Remedies(g views.GangStatus, f Facts) []string {
	var out []string
	words := ownWords(g)
	for _, r := range remedies {
		if m := r.pattern.FindStringSubmatch(words); m != nil {
			out = append(out, r.advise(g, m, f)...)
		}
	}
	for _, mb := range g.Members {
		if mb.State == "Rejected" {
			out = append(out, fmt.Sprintf("fix member %s, which lockstep refuses: %s", mb.Pod, mb.Reason))
		}
	}
	if g.Line != nil && g.Line.Place > 1 {
		out = append(out, fmt.Sprintf("its turn: %s ahead of it in line go first (a higher PriorityClass puts it ahead)",
			plural(g.Line.Place-1, "gang", "gangs")))
	}
	return out
}

func shortInTotal(g views.GangStatus, m []string, f Facts) []string {
	need, res, free := m[2], m[3], m[4]
	// Freeing GPUs cannot help a quorum larger than every schedulable node's GPUs together.
	if n, err := strconv.ParseInt(need, 10, 64); err == nil && res == string(wellknown.ResourceGPU) && f.ClusterGPUs > 0 && n > f.ClusterGPUs {
		out := []string{fmt.Sprintf("more GPU nodes: its quorum needs %s %s and the schedulable nodes have %d in all, so freeing capacity cannot make it fit", need, res, f.ClusterGPUs)}
		return append(out, lowerQuorum(g)...)
	}
	out := []string{fmt.Sprintf("free %s more %s in the cluster (its quorum needs %s, %s are free)", difference(need, free), res, need, free)}
	return append(out, lowerQuorum(g)...)
}

// devicesRefused answers DRA's allocator, which found the gang's claims' devices on no node its
// counts allowed: what the claims select (a selector, a class) is not free where it fits.
func devicesRefused(g views.GangStatus, m []string, _ Facts) []string {
	node, claims, free := m[1], m[2], m[3]
	if free != "" {
		free = ", " + free
	}
	out := []string{fmt.Sprintf("free the devices %s select on a node (node %s, for one, has not them%s), or ask for what the nodes have: a claim's selectors, its DeviceClass and its count all narrow it",
		claims, node, free)}
	return append(out, lowerQuorum(g)...)
}

func shortOnOneNode(g views.GangStatus, m []string, _ Facts) []string {
	member, amount, res, where := m[1], m[2], m[3], m[4]
	out := []string{fmt.Sprintf("free %s %s on one node for member %s (%s)", amount, res, member, where)}
	return append(out, lowerQuorum(g)...)
}

func shortInDomain(g views.GangStatus, m []string, _ Facts) []string {
	n, _ := strconv.Atoi(m[1])
	per, _ := strconv.Atoi(m[2])
	need := n * per
	if m[3] != "" {
		need, _ = strconv.Atoi(m[3])
	}
	tier, key, largestFree, where := m[4], m[5], m[6], m[7]
	largest, _ := strconv.Atoi(largestFree)
	return []string{
		fmt.Sprintf("free %d more GPUs on one %s (%s, the fullest-free, has %d of the %d it needs)", need-largest, tier, where, largest, need),
		fmt.Sprintf("relax its required topology (%s) to preferred", key),
	}
}

func noDomain(_ views.GangStatus, m []string, _ Facts) []string {
	return []string{fmt.Sprintf("label the nodes with %s, or drop the required %s from the gang", m[2], m[1])}
}

func queueQuota(g views.GangStatus, m []string, _ Facts) []string {
	queue := orDash(g.Queue)
	return []string{
		fmt.Sprintf("room in the queue's quota (%s): raise its capability or weight, or let its other work finish (%s)", queue, m[1]),
	}
}

func missingMembers(g views.GangStatus, m []string, _ Facts) []string {
	have, _ := strconv.Atoi(m[1])
	want, _ := strconv.Atoi(m[2])
	return []string{
		fmt.Sprintf("the %s it lacks: whatever creates the job's pods has made %d of %d (look at that controller and its events)",
			plural(want-have, "member", "members"), have, want),
		fmt.Sprintf("lower min-available to %d", have),
	}
}

func missingGroup(_ views.GangStatus, m []string, _ Facts) []string {
	return []string{fmt.Sprintf("create %s, which its members name", m[1])}
}

func timedOut(_ views.GangStatus, _ []string, _ Facts) []string {
	return []string{"time: it plans again by itself; if it times out again, a member never reaches bind (look at the pending members' PodScheduled condition)"}
}

func tookOver(_ views.GangStatus, _ []string, _ Facts) []string {
	return []string{"time: higher-priority work took its capacity, and it plans again by itself"}
}

func heldByOthers(_ views.GangStatus, m []string, _ Facts) []string {
	return []string{fmt.Sprintf("gang %s releasing the %s it holds in reservations (it binds or expires)", m[1], m[2])}
}

func lowerQuorum(g views.GangStatus) []string {
	if g.MinAvailable <= 1 {
		return nil
	}
	return []string{fmt.Sprintf("lower min-available (now %d) so that a smaller quorum fits", g.MinAvailable)}
}

// difference is need - free as Kubernetes writes quantities ("2", "500m", "4Gi"); "some" when
// either does not parse.
func difference(need, free string) string {
	n, errN := resource.ParseQuantity(need)
	f, errF := resource.ParseQuantity(free)
	if errN != nil || errF != nil {
		return "some"
	}
	n.Sub(f)
	return strings.TrimSpace(n.String())
}
