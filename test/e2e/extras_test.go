package e2e

import (
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/lockstep-sched/lockstep/wellknown"
)

// job creates the pods of an elastic job: members x 1 GPU, min-available 2, total-number members.
func (s *scenario) job(name string, members int, annotations map[string]string) {
	s.t.Helper()
	for i := range members {
		ps := podSpec{name: fmt.Sprintf("%s-%d", name, i), gpus: 1, gang: name, minAvailable: 2,
			annotations: map[string]string{wellknown.AnnotationGangTotalNumber: fmt.Sprint(members)}}
		for k, v := range annotations {
			ps.annotations[k] = v
		}
		s.create(ps.pod())
	}
}

// liveBound counts the pods named prefix* bound to a node and not on their way out.
func (s *scenario) liveBound(prefix string) int {
	n := 0
	for _, p := range s.pods() {
		if strings.HasPrefix(p.Name, prefix) && p.Spec.NodeName != "" && p.DeletionTimestamp == nil {
			n++
		}
	}
	return n
}

// Volcano's "multiple jobs" shape: 2 nodes x 4 GPUs, three jobs of 8 x 1 GPU with min-available
// 2, created one after the other as a user's script does. Each job gets its 2 in both orders:
// created back to back, and created once the first job's extras took every GPU.
func TestEveryJobGetsItsQuorumWhateverTheOrder(t *testing.T) {
	for _, tc := range []struct {
		name       string
		firstBound bool
	}{
		{name: "back to back"},
		{name: "after the first job's extras bound", firstBound: true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			s := newScenario(t, 2, 4)
			s.playKubelet()
			s.job("j1", 8, nil)
			if tc.firstBound {
				s.eventually(60*time.Second, "every member of j1 bound", func() bool { return s.liveBound("j1-") == 8 })
			}
			start := time.Now()
			s.job("j2", 8, nil)
			s.job("j3", 8, nil)
			s.eventually(60*time.Second, "each job's quorum bound", func() bool {
				return s.liveBound("j1-") >= 2 && s.liveBound("j2-") >= 2 && s.liveBound("j3-") >= 2
			})
			t.Logf("%s: every quorum bound %s after j2 and j3 were created; j1=%d j2=%d j3=%d bound",
				tc.name, time.Since(start).Round(100*time.Millisecond), s.liveBound("j1-"), s.liveBound("j2-"), s.liveBound("j3-"))
			for _, g := range []string{"j1", "j2", "j3"} {
				s.binds.assertNeverPartial(t, g, 2)
			}
			if tc.firstBound {
				require.Equal(t, 4, s.gangs()["j1"].ExtrasTakenBack, "j2 and j3 each took back two of j1's extras")
				s.eventually(30*time.Second, "each extra taken back told why it goes", func() bool {
					told := 0
					for i := range 8 {
						if s.hasEvent(fmt.Sprintf("j1-%d", i), wellknown.ReasonPreempted, "beyond gang "+s.ns+"/j1's min-available 2") {
							told++
						}
					}
					return told == 4
				})
			}
		})
	}
}

// A member annotated lockstep.dev/keep-extras: "true" stays: the waiting quorum takes back the
// older job's extras instead, though the younger job's would go first.
func TestKeepExtrasOptsAMemberOut(t *testing.T) {
	s := newScenario(t, 2, 4)
	s.playKubelet()
	s.job("old", 4, nil)
	s.eventually(60*time.Second, "every member of old bound", func() bool { return s.liveBound("old-") == 4 })
	s.job("kept", 4, map[string]string{wellknown.AnnotationKeepExtras: "true"})
	s.eventually(60*time.Second, "every member of kept bound", func() bool { return s.liveBound("kept-") == 4 })

	s.job("late", 8, nil)
	s.eventually(60*time.Second, "late's quorum bound", func() bool { return s.liveBound("late-") >= 2 })
	require.Equal(t, 4, s.liveBound("kept-"), "no member of kept was taken")
	require.Equal(t, 2, s.liveBound("old-"), "old's two youngest extras were taken instead")
	s.binds.assertNeverPartial(t, "late", 2)
}
