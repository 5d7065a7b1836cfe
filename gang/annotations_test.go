package gang

import (
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/lockstep-sched/lockstep/test/builders"
)

// The builders package copies the annotation keys (it must not import gang); they must not drift.
func TestBuilderKeysMatch(t *testing.T) {
	require.Equal(t, AnnotationName, builders.AnnotationGangName)
	require.Equal(t, AnnotationMinAvailable, builders.AnnotationMinAvailable)
	require.Equal(t, AnnotationWaitingTime, builders.AnnotationWaitingTime)
	require.Equal(t, AnnotationTotalNumber, builders.AnnotationTotalNumber)
	require.Equal(t, GPUResource, builders.GPUResource)
}

func TestParseSpec(t *testing.T) {
	pod := func() *builders.PodBuilder { return builders.Pod("team-a", "w-0").GPU(1) }
	tests := []struct {
		name    string
		pod     *builders.PodBuilder
		want    *Spec
		wantKey string // the key a refusal names; "" means no error
		wantVal string
	}{
		{
			name: "valid with every annotation",
			pod:  pod().Gang("mpi", 5).WaitingTime("30s").TotalNumber(6),
			want: &Spec{Namespace: "team-a", Name: "mpi", MinAvailable: 5, TotalNumber: 6, WaitingTime: 30 * time.Second},
		},
		{
			name: "valid with only name and min-available",
			pod:  pod().Gang("mpi", 1),
			want: &Spec{Namespace: "team-a", Name: "mpi", MinAvailable: 1},
		},
		{name: "ordinary pod", pod: pod()},
		{name: "missing min-available", pod: pod().GangName("mpi"), wantKey: AnnotationMinAvailable, wantVal: ""},
		{name: "min-available zero", pod: pod().GangName("mpi").MinAvailable("0"), wantKey: AnnotationMinAvailable, wantVal: "0"},
		{name: "min-available negative", pod: pod().GangName("mpi").MinAvailable("-1"), wantKey: AnnotationMinAvailable, wantVal: "-1"},
		{name: "min-available not a number", pod: pod().GangName("mpi").MinAvailable("abc"), wantKey: AnnotationMinAvailable, wantVal: "abc"},
		{name: "waiting-time not a duration", pod: pod().Gang("mpi", 2).WaitingTime("soon"), wantKey: AnnotationWaitingTime, wantVal: "soon"},
		{name: "waiting-time negative", pod: pod().Gang("mpi", 2).WaitingTime("-5s"), wantKey: AnnotationWaitingTime, wantVal: "-5s"},
		{name: "waiting-time zero", pod: pod().Gang("mpi", 2).WaitingTime("0s"), wantKey: AnnotationWaitingTime, wantVal: "0s"},
		{name: "total-number below min-available", pod: pod().Gang("mpi", 5).TotalNumber(3), wantKey: AnnotationTotalNumber, wantVal: "3"},
		{name: "total-number not a number", pod: pod().Gang("mpi", 5).Annotation(AnnotationTotalNumber, "many"), wantKey: AnnotationTotalNumber, wantVal: "many"},
		{name: "empty gang name", pod: pod().GangName("").MinAvailable("2"), wantKey: AnnotationName, wantVal: ""},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			spec, err := ParseSpec(tc.pod.Obj())
			if tc.wantKey == "" {
				require.NoError(t, err)
				require.Equal(t, tc.want, spec)
				return
			}
			require.Nil(t, spec)
			var annErr *AnnotationError
			require.True(t, errors.As(err, &annErr), "want *AnnotationError, got %T: %v", err, err)
			require.Equal(t, "team-a/w-0", annErr.Pod)
			require.Equal(t, tc.wantKey, annErr.Key)
			require.Equal(t, tc.wantVal, annErr.Value)
			require.NotEmpty(t, annErr.Reason)
			// The message a user reads names all three.
			require.Contains(t, err.Error(), "pod team-a/w-0")
			require.Contains(t, err.Error(), fmt.Sprintf("%s=%q", tc.wantKey, tc.wantVal))
		})
	}
}
