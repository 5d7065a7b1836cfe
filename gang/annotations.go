package gang

import (
	"fmt"
	"strconv"
	"time"

	corev1 "k8s.io/api/core/v1"

	"github.com/lockstep-sched/lockstep/wellknown"
)

// Spec is what a pod's annotations say about its gang.
type Spec struct {
	Namespace    string
	Name         string
	MinAvailable int
	// TotalNumber is 0 when the pod does not say.
	TotalNumber int
	// WaitingTime is 0 when the pod does not say; the manager then uses its default.
	WaitingTime time.Duration
}

// Key identifies a gang: namespace/name.
func (s Spec) Key() string { return s.Namespace + "/" + s.Name }

// AnnotationError says which pod carried which bad annotation value and why it was refused.
type AnnotationError struct {
	Pod    string // namespace/name
	Key    string
	Value  string
	Reason string
}

func (e *AnnotationError) Error() string {
	return fmt.Sprintf("pod %s: annotation %s=%q: %s", e.Pod, e.Key, e.Value, e.Reason)
}

// ParseSpec reads a pod's gang annotations. It returns (nil, nil) for an ordinary pod, one with no
// gang name. Every refusal is an *AnnotationError naming the pod, the key and the value: lockstep
// never guesses a default for a value the user wrote wrong.
func ParseSpec(pod *corev1.Pod) (*Spec, error) {
	ann := pod.Annotations
	name, ok := ann[wellknown.AnnotationGangName]
	if !ok {
		return nil, nil
	}
	podName := pod.Namespace + "/" + pod.Name
	bad := func(key, reason string) error {
		return &AnnotationError{Pod: podName, Key: key, Value: ann[key], Reason: reason}
	}
	if name == "" {
		return nil, bad(wellknown.AnnotationGangName, "gang name must not be empty")
	}
	spec := &Spec{Namespace: pod.Namespace, Name: name}

	rawMin, ok := ann[wellknown.AnnotationGangMinAvailable]
	if !ok {
		return nil, &AnnotationError{Pod: podName, Key: wellknown.AnnotationGangMinAvailable, Reason: "missing: a gang member must say how many members must be placed together"}
	}
	minAvailable, err := strconv.Atoi(rawMin)
	if err != nil || minAvailable < 1 {
		return nil, bad(wellknown.AnnotationGangMinAvailable, "must be a positive integer")
	}
	spec.MinAvailable = minAvailable

	if raw, ok := ann[wellknown.AnnotationGangTotalNumber]; ok {
		total, err := strconv.Atoi(raw)
		if err != nil || total < 1 {
			return nil, bad(wellknown.AnnotationGangTotalNumber, "must be a positive integer")
		}
		if total < minAvailable {
			return nil, bad(wellknown.AnnotationGangTotalNumber, fmt.Sprintf("must not be below %s (%d)", wellknown.AnnotationGangMinAvailable, minAvailable))
		}
		spec.TotalNumber = total
	}

	if raw, ok := ann[wellknown.AnnotationGangWaitingTime]; ok {
		d, err := time.ParseDuration(raw)
		if err != nil {
			return nil, bad(wellknown.AnnotationGangWaitingTime, "must be a duration such as 90s or 10m")
		}
		if d <= 0 {
			return nil, bad(wellknown.AnnotationGangWaitingTime, "must be positive")
		}
		spec.WaitingTime = d
	}
	return spec, nil
}

// disagreement returns an error when a member's spec differs from the spec its gang already has,
// naming the member, the key, both values and the pod the gang's value came from.
func disagreement(pod string, got, want Spec, wantFrom string) error {
	check := func(key string, gotV, wantV string) error {
		if gotV == wantV {
			return nil
		}
		return &AnnotationError{Pod: pod, Key: key, Value: gotV,
			Reason: fmt.Sprintf("gang %s already has %q (from pod %s); all members must agree", want.Key(), wantV, wantFrom)}
	}
	if err := check(wellknown.AnnotationGangMinAvailable, strconv.Itoa(got.MinAvailable), strconv.Itoa(want.MinAvailable)); err != nil {
		return err
	}
	if err := check(wellknown.AnnotationGangTotalNumber, optionalInt(got.TotalNumber), optionalInt(want.TotalNumber)); err != nil {
		return err
	}
	return check(wellknown.AnnotationGangWaitingTime, optionalDuration(got.WaitingTime), optionalDuration(want.WaitingTime))
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
