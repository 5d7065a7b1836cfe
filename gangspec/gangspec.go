// Package gangspec is lockstep's own description of a gang: what every dialect reader (package
// dialect) produces from pods and group objects, and all the gang manager (package gang) reads.
// Keeping it apart lets gang stay ignorant of which ecosystem a gang came from, and lets the
// readers be tested without a manager.
//
// It owns the types and their checks only; no parsing of any ecosystem's keys.
package gangspec

import (
	"fmt"
	"slices"
	"strconv"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"

	"github.com/lockstep-sched/lockstep/quota"
)

// Spec is one gang's rules: how many members must be placed together, for how long lockstep
// holds their reservation, and where those rules were written.
type Spec struct {
	Namespace    string
	Name         string
	MinAvailable int
	// TotalNumber is 0 when the source does not say.
	TotalNumber int
	// WaitingTime is 0 when the source does not say; the manager then uses its default.
	WaitingTime time.Duration
	// MinPerTask are quorums of their own inside the gang (Volcano's minTaskMember): every task's
	// minimum must be met in the same commit as MinAvailable. nil when the source has none.
	MinPerTask map[string]int
	// Bundle lists, as namespace/name keys, the other gangs that must all have their quorum
	// before any member of this one binds (Koordinator's gang groups); nil for a gang alone.
	Bundle []string
	// Policy says which members count toward MinAvailable.
	Policy MatchPolicy
	// Mode is Koordinator's Strict or NonStrict, or YuniKorn's gang scheduling style Soft or Hard;
	// "" elsewhere. lockstep binds all-or-nothing in every mode (see docs/dialects.md); it is kept
	// to be shown, and members must agree on it.
	Mode string
	// Source says where the rules were read, for people: "Volcano PodGroup team-a/job-1
	// (scheduling.volcano.sh/v1beta1)" or "Koordinator annotations".
	Source string
	// QuorumFrom says where MinAvailable was read, field and object, for the reason of a gang
	// whose members are fewer: "spec.minMember of Volcano PodGroup team-a/job-1". "" when it
	// was not read from one field.
	QuorumFrom string
	// Topology is what the group object asks of the network (Volcano's spec.networkTopology);
	// a member's own annotation comes first.
	Topology Topology
	// Queue is the team queue the gang's group object names (Volcano's and kube-batch's
	// spec.queue); zero when it names none, and the gang then falls under its namespace's quota,
	// if any (package quota).
	Queue quota.Ref
	// Priority, when set, is the group object's own priority (Kubernetes 1.37's PodGroup): every
	// member must have it, as kube-scheduler requires.
	Priority *int32
	// PreemptNever: the group object says its gang evicts nothing for itself.
	PreemptNever bool
	// DisruptAll: the group object says its members go only together (Kubernetes 1.37's
	// disruptionMode all): none is taken alone, as a member beyond the quorum would be.
	DisruptAll bool
}

// Key identifies a gang: namespace/name.
func (s *Spec) Key() string { return s.Namespace + "/" + s.Name }

// MatchPolicy is which members count toward a gang's MinAvailable (Koordinator's match-policy).
type MatchPolicy string

const (
	// WaitingAndRunning: bound members count, every time a member arrives; a gang that fell
	// below its quorum waits for enough new members again. What scheduler-plugins and Volcano
	// do, and the zero value.
	WaitingAndRunning MatchPolicy = ""
	// OnceSatisfied: after the gang's quorum was bound once, later members schedule as ordinary
	// pods. Koordinator's default.
	OnceSatisfied MatchPolicy = "once-satisfied"
	// OnlyWaiting: bound members never count; every new batch needs MinAvailable new members
	// placed together.
	OnlyWaiting MatchPolicy = "only-waiting"
)

// Membership is what one pod says about its gang, as a dialect reader found it. A pod with an
// empty Gang is an ordinary pod.
type Membership struct {
	// Gang is the gang's name in the pod's namespace.
	Gang string
	// Task is the member's task inside its gang, for Spec.MinPerTask; "" when it names none.
	Task string
	// Spec is the gang's rules when the pod carries them itself (annotations, labels).
	Spec *Spec
	// Group names the group object that holds the rules when the pod does not carry them: a key
	// the reader of group objects uses too (see Groups), readable in a message such as
	// "waiting for <Group> to exist".
	Group string
	// Err is why the pod's gang markers cannot be used; the pod is refused with it.
	Err error
	// Topology is what the pod asks of the network between its gang's nodes; zero for nothing.
	Topology Topology
	// KeepExtras: the member is never evicted for another gang's quorum while it is beyond its
	// own gang's min-available (the user opted out of yielding).
	KeepExtras bool
	// Queue is the queue the pod itself names (Koordinator's quota label), gang or not; the zero
	// Ref for none. A queue its gang's rules name (Spec.Queue) comes first.
	Queue quota.Ref
}

// Topology asks that a gang's quorum fit in one domain of a network tier: by the tier's node label
// key (or a name the manager matches to one), or by Tier, its place counting from 1 for the
// narrowest (Volcano's highestTierAllowed). Required makes the gang wait until one domain does,
// otherwise it is a preference.
type Topology struct {
	Key      string
	Tier     int
	Required bool
	// Layers, set instead of Key, name several tiers at once (Koordinator's gather rules): a
	// required rule takes the narrowest of them the manager knows, since one domain of it lies
	// inside one of each wider tier; a preferred rule the widest.
	Layers []string
	// Source names the annotation it was read from, for messages.
	Source string
}

// Reader reads a pod's gang membership. It must be cheap and safe to call concurrently: the
// scheduler's verbs call it for every pod.
type Reader interface {
	// Read looks at the pod's identity, labels, annotations and spec.schedulingGroup only: the
	// informer summarises each pod once as it arrives, and the wire's pods are read as they come.
	Read(pod *corev1.Pod) Membership
}

// FieldError says which object carried which bad value and why it was refused: lockstep never
// guesses a default for a value someone wrote wrong.
type FieldError struct {
	// Object is what carried the value: "pod team-a/w-0", "Volcano PodGroup team-a/job-1".
	Object string
	// Field is where: "annotation gang.scheduling.koordinator.sh/min-available", "spec.minMember".
	Field  string
	Value  string
	Reason string
}

func (e *FieldError) Error() string {
	return fmt.Sprintf("%s: %s=%q: %s", e.Object, e.Field, e.Value, e.Reason)
}

// Disagreement returns an error when a member's rules differ from those its gang already has,
// naming the member, what differs, both values and the member the gang's rules came from.
func Disagreement(pod string, got, want *Spec, wantFrom string) error {
	for _, f := range comparedFields {
		if g, w := f.value(got), f.value(want); g != w {
			return &FieldError{Object: "pod " + pod, Field: f.name, Value: g,
				Reason: fmt.Sprintf("gang %s already has %q (from pod %s); all members must agree", want.Key(), w, wantFrom)}
		}
	}
	return nil
}

type comparedField struct {
	name  string
	value func(*Spec) string
}

var comparedFields = []comparedField{
	{"source", func(s *Spec) string { return s.Source }},
	{"min-available", func(s *Spec) string { return strconv.Itoa(s.MinAvailable) }},
	{"total-number", func(s *Spec) string { return optionalInt(s.TotalNumber) }},
	{"waiting-time", func(s *Spec) string { return optionalDuration(s.WaitingTime) }},
	{"task quorums", func(s *Spec) string { return taskList(s.MinPerTask) }},
	{"gang group", func(s *Spec) string { return strings.Join(s.Bundle, ",") }},
	{"match-policy", func(s *Spec) string { return string(s.Policy) }},
	{"mode", func(s *Spec) string { return s.Mode }},
	{"queue", func(s *Spec) string { return s.Queue.Kind + "/" + s.Queue.Name }},
	{"network topology", func(s *Spec) string {
		return fmt.Sprintf("%s/%d/%t/%s", s.Topology.Key, s.Topology.Tier, s.Topology.Required, strings.Join(s.Topology.Layers, "|"))
	}},
}

func optionalInt(v int) string {
	if v == 0 {
		return ""
	}
	return strconv.Itoa(v)
}

func optionalDuration(d time.Duration) string {
	if d == 0 {
		return ""
	}
	return d.String()
}

// taskList is a task quorum map in a stable, readable order: "ps=1,worker=4".
func taskList(m map[string]int) string {
	tasks := make([]string, 0, len(m))
	for t, n := range m {
		tasks = append(tasks, t+"="+strconv.Itoa(n))
	}
	slices.Sort(tasks)
	return strings.Join(tasks, ",")
}

// TaskQuorums is MinPerTask as people read it, "ps=1,worker=4"; "" without any.
func (s *Spec) TaskQuorums() string { return taskList(s.MinPerTask) }
