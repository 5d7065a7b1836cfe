package inspect

import (
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/lockstep-sched/lockstep/test/lib/builders"
	"github.com/lockstep-sched/lockstep/views"
)

// now is the tests' clock; every recorded time is relative to it.
var now = time.Date(2026, 5, 1, 12, 0, 0, 0, time.UTC)

// gangBuilder writes a GangStatus as lockstep's /debug/gangs records it.
type gangBuilder struct{ g views.GangStatus }

func aGang(namespace, name string, min int) *gangBuilder {
	return &gangBuilder{g: views.GangStatus{Namespace: namespace, Name: name, MinAvailable: min, Phase: views.PhaseWaiting,
		Source: "Koordinator annotations", WaitingTime: "2m0s"}}
}

func (b *gangBuilder) phase(p views.Phase) *gangBuilder { b.g.Phase = p; return b }

func (b *gangBuilder) total(n int) *gangBuilder { b.g.TotalNumber = n; return b }

func (b *gangBuilder) queue(q string) *gangBuilder { b.g.Queue = q; return b }

func (b *gangBuilder) priority(p int32) *gangBuilder { b.g.Priority = p; return b }

func (b *gangBuilder) source(s string) *gangBuilder { b.g.Source = s; return b }

// reason is written as lockstep writes it, after "gang ns/name: ".
func (b *gangBuilder) reason(words string) *gangBuilder {
	b.g.Reason = "gang " + b.g.Namespace + "/" + b.g.Name + ": " + words
	return b
}

func (b *gangBuilder) rawReason(r string) *gangBuilder { b.g.Reason = r; return b }

func (b *gangBuilder) line(place, of int, why string) *gangBuilder {
	b.g.Line = &views.LineStatus{Place: place, Of: of, Why: why}
	return b
}

func (b *gangBuilder) expires(in time.Duration) *gangBuilder {
	t := now.Add(in)
	b.g.ReservationExpires = &t
	return b
}

// member adds a member pod in the gang's namespace; node and gpus only for states that have them.
func (b *gangBuilder) member(pod, state, node string, gpus ...int) *gangBuilder {
	b.g.Members = append(b.g.Members, views.MemberStatus{Pod: b.g.Namespace + "/" + pod, State: state, Node: node, GPUIDs: gpus,
		Requests: "cpu=100m,nvidia.com/gpu=2"})
	if state == "Bound" {
		b.g.Bound++
	}
	return b
}

// pendingBecause adds a pending member with the reason lockstep recorded for it.
func (b *gangBuilder) pendingBecause(pod, why string) *gangBuilder {
	b.g.Members = append(b.g.Members, views.MemberStatus{Pod: b.g.Namespace + "/" + pod, State: "Pending", Reason: why})
	return b
}

func (b *gangBuilder) rejected(pod, why string) *gangBuilder {
	b.g.Members = append(b.g.Members, views.MemberStatus{Pod: b.g.Namespace + "/" + pod, State: "Rejected", Reason: why})
	return b
}

func (b *gangBuilder) build() views.GangStatus { return b.g }

func (b *gangBuilder) ptr() *views.GangStatus { g := b.g; return &g }

// aPod is a pod as the apiserver holds it, created ten minutes before now.
func aPod(namespace, name string) *builders.PodBuilder {
	return builders.Pod(namespace, name).Created(now.Add(-10 * time.Minute))
}

// unschedulable marks the pod as kube-scheduler does when no node passes.
func unschedulable(p *corev1.Pod, ago time.Duration, message string) *corev1.Pod {
	p.Status.Conditions = append(p.Status.Conditions, corev1.PodCondition{Type: corev1.PodScheduled, Status: corev1.ConditionFalse,
		Reason: corev1.PodReasonUnschedulable, Message: message, LastTransitionTime: metav1.NewTime(now.Add(-ago))})
	return p
}
