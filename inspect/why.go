package inspect

import (
	"fmt"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/util/duration"

	"github.com/lockstep-sched/lockstep/dialect"
	"github.com/lockstep-sched/lockstep/views"
)

// Case is what `why` explains a pod from: the pod as the apiserver has it, and the gang lockstep
// lists it in.
type Case struct {
	Pod *corev1.Pod
	// Gang is nil when lockstep lists the pod in no gang.
	Gang *views.GangStatus
	Now  time.Time
	// Facts are what lockstep's other pages add (the cluster's GPUs); zero when unread.
	Facts Facts
}

// GangOf finds the gang whose members include the pod (namespace/name).
func GangOf(gangs []views.GangStatus, pod string) *views.GangStatus {
	for i := range gangs {
		for _, m := range gangs[i].Members {
			if m.Pod == pod {
				return &gangs[i]
			}
		}
	}
	return nil
}

// Why is one paragraph on where the pod stands and what would let it run.
func Why(c Case) string {
	if c.Gang == nil {
		return strings.Join(outsideGangs(c), " ")
	}
	return strings.Join(append(memberOf(c), gangStanding(c)...), " ")
}

func podKey(p *corev1.Pod) string { return p.Namespace + "/" + p.Name }

// outsideGangs explains a pod lockstep lists in no gang: it carries no gang markers, or lockstep
// has not (or no longer) seen its gang.
func outsideGangs(c Case) []string {
	ms := dialect.Pods{}.Read(c.Pod)
	var out []string
	switch {
	case ms.Err != nil:
		out = append(out, fmt.Sprintf("Pod %s carries gang markers lockstep cannot use (%v), so it is in no gang lockstep lists.", podKey(c.Pod), ms.Err))
	case ms.Gang != "":
		out = append(out, fmt.Sprintf("Pod %s carries the markers of gang %s/%s, but lockstep lists no such gang: kube-scheduler has not sent lockstep any of its members yet (this pod's schedulerName is %q, and only schedulers configured with lockstep's extender call it), or its members are gone.",
			podKey(c.Pod), c.Pod.Namespace, ms.Gang, schedulerName(c.Pod)))
	default:
		out = append(out, fmt.Sprintf("Pod %s is not a member of any gang: lockstep places it as an ordinary pod, on its own, with nothing to wait for.", podKey(c.Pod)))
	}
	return append(out, podState(c.Pod, c.Now))
}

func schedulerName(p *corev1.Pod) string {
	if p.Spec.SchedulerName == "" {
		return corev1.DefaultSchedulerName
	}
	return p.Spec.SchedulerName
}

// podState is what the apiserver says of the pod's scheduling.
func podState(p *corev1.Pod, now time.Time) string {
	if p.Spec.NodeName != "" {
		return fmt.Sprintf("It is bound to node %s (phase %s).", p.Spec.NodeName, p.Status.Phase)
	}
	if c := scheduledCondition(p); c != nil && c.Status == corev1.ConditionFalse {
		return fmt.Sprintf("It is not scheduled yet; kube-scheduler said %s %s ago: %s", c.Reason, since(c.LastTransitionTime.Time, now), strings.TrimSpace(c.Message))
	}
	return fmt.Sprintf("It is not scheduled yet, and no scheduler has reported on it (is a scheduler named %q running?).", schedulerName(p))
}

func scheduledCondition(p *corev1.Pod) *corev1.PodCondition {
	for i := range p.Status.Conditions {
		if p.Status.Conditions[i].Type == corev1.PodScheduled {
			return &p.Status.Conditions[i]
		}
	}
	return nil
}

func since(t, now time.Time) string {
	if t.IsZero() {
		return "some time"
	}
	return duration.HumanDuration(now.Sub(t))
}

// memberOf says which gang the pod is in, how far the gang got, and where this pod is.
func memberOf(c Case) []string {
	g := c.Gang
	from := ""
	if g.Source != "" {
		from = " (read from " + g.Source + ")"
	}
	total := ""
	if g.TotalNumber > 0 {
		total = fmt.Sprintf(", of %d in all", g.TotalNumber)
	}
	out := []string{fmt.Sprintf("Pod %s is a member of gang %s/%s%s, which is %s: %d of its min-available %d bound%s.",
		podKey(c.Pod), g.Namespace, g.Name, from, g.Phase, g.Bound, g.MinAvailable, total)}
	if m := member(g, podKey(c.Pod)); m != nil {
		out = append(out, memberState(*m))
	}
	return out
}

func member(g *views.GangStatus, pod string) *views.MemberStatus {
	for i := range g.Members {
		if g.Members[i].Pod == pod {
			return &g.Members[i]
		}
	}
	return nil
}

func memberState(m views.MemberStatus) string {
	gpus := ""
	if len(m.GPUIDs) > 0 {
		ids := make([]string, len(m.GPUIDs))
		for i, id := range m.GPUIDs {
			ids[i] = fmt.Sprint(id)
		}
		gpus = " with GPUs " + strings.Join(ids, ",")
	}
	switch m.State {
	case "Bound":
		return fmt.Sprintf("This pod is bound to node %s%s.", m.Node, gpus)
	case "Reserved", "Planned":
		return fmt.Sprintf("This pod has a place %s on node %s.", strings.ToLower(m.State), m.Node)
	case "WaitingForQuorum":
		return fmt.Sprintf("This pod waits at bind on node %s for the rest of the quorum.", m.Node)
	case "Rejected", "BindFailed":
		return fmt.Sprintf("This pod is %s: %s.", m.State, m.Reason)
	case "Finished":
		return "This pod has finished."
	}
	// What the scheduler said repeats the gang's reason, which follows; anything else is news.
	if m.Reason != "" && !strings.HasPrefix(m.Reason, "scheduler: ") {
		return fmt.Sprintf("This pod is pending (%s).", m.Reason)
	}
	return "This pod is pending."
}

// gangStanding says, by phase, what the gang waits for and what would let it run.
func gangStanding(c Case) []string {
	g := *c.Gang
	switch g.Phase {
	case views.PhaseBound:
		if m := member(&g, podKey(c.Pod)); m != nil && m.State != "Bound" && c.Pod.Spec.NodeName == "" {
			return []string{"The gang's quorum is bound, so this pod, beyond it, schedules as an ordinary pod.", podState(c.Pod, c.Now)}
		}
		return []string{"The gang runs; nothing holds it."}
	case views.PhaseBinding:
		return []string{"lockstep is writing the gang's bindings now; it needs nothing more."}
	case views.PhaseReserving:
		return reserving(g, c.Now)
	}
	return waiting(g, c.Facts)
}

func reserving(g views.GangStatus, now time.Time) []string {
	until := ""
	if g.ReservationExpires != nil {
		until = fmt.Sprintf(" for %s more", duration.HumanDuration(g.ReservationExpires.Sub(now)))
	}
	var pending []string
	for _, m := range g.Members {
		if m.State == "Pending" {
			pending = append(pending, m.Pod)
		}
	}
	out := []string{fmt.Sprintf("lockstep holds capacity for its quorum%s and waits for the members to reach bind (%s).", until, ownWords(g))}
	if len(pending) > 0 {
		out = append(out, fmt.Sprintf("What would let it run: %s reaching kube-scheduler before the reservation ends; if one cannot, its PodScheduled condition says why, and the gang plans again when the reservation expires.",
			strings.Join(pending, ", ")))
	}
	return out
}

func waiting(g views.GangStatus, f Facts) []string {
	var out []string
	if g.Line != nil {
		out = append(out, fmt.Sprintf("It is number %d in line, of %s waiting (%s).", g.Line.Place, plural(g.Line.Of, "gang", "gangs"), g.Line.Why))
	}
	if g.Phase == views.PhaseHolding {
		out = append(out, "It has waited past the starvation threshold, so lockstep keeps what frees on the nodes its quorum needs for it.")
	}
	out = append(out, fmt.Sprintf("It waits because %s.", strings.TrimSuffix(ownWords(g), ".")))
	if fixes := Remedies(g, f); len(fixes) > 0 {
		out = append(out, "What would let it run: "+strings.Join(fixes, "; or ")+".")
	}
	return out
}
