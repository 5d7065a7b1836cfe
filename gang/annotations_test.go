package gang

import (
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/lockstep-sched/lockstep/test/lib/builders"
	"github.com/lockstep-sched/lockstep/wellknown"
)

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
		{name: "missing min-available", pod: pod().GangName("mpi"), wantKey: wellknown.AnnotationGangMinAvailable, wantVal: ""},
		{name: "min-available zero", pod: pod().GangName("mpi").MinAvailable("0"), wantKey: wellknown.AnnotationGangMinAvailable, wantVal: "0"},
		{name: "min-available negative", pod: pod().GangName("mpi").MinAvailable("-1"), wantKey: wellknown.AnnotationGangMinAvailable, wantVal: "-1"},
		{name: "min-available not a number", pod: pod().GangName("mpi").MinAvailable("abc"), wantKey: wellknown.AnnotationGangMinAvailable, wantVal: "abc"},
		{name: "waiting-time not a duration", pod: pod().Gang("mpi", 2).WaitingTime("soon"), wantKey: wellknown.AnnotationGangWaitingTime, wantVal: "soon"},
		{name: "waiting-time negative", pod: pod().Gang("mpi", 2).WaitingTime("-5s"), wantKey: wellknown.AnnotationGangWaitingTime, wantVal: "-5s"},
		{name: "waiting-time zero", pod: pod().Gang("mpi", 2).WaitingTime("0s"), wantKey: wellknown.AnnotationGangWaitingTime, wantVal: "0s"},
		{name: "total-number below min-available", pod: pod().Gang("mpi", 5).TotalNumber(3), wantKey: wellknown.AnnotationGangTotalNumber, wantVal: "3"},
		{name: "total-number not a number", pod: pod().Gang("mpi", 5).Annotation(wellknown.AnnotationGangTotalNumber, "many"), wantKey: wellknown.AnnotationGangTotalNumber, wantVal: "many"},
		{name: "empty gang name", pod: pod().GangName("").MinAvailable("2"), wantKey: wellknown.AnnotationGangName, wantVal: ""},
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
