package e2e

import (
	"fmt"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/lockstep-sched/lockstep/test/lib/builders"
	"github.com/lockstep-sched/lockstep/wellknown"
)

// yuniKornApp makes an application's pods as a YuniKorn user writes them (the shim v1.9's keys):
// members pods of gpus GPUs, for the yunikorn scheduler, naming the app and one task group of
// minMember, which every pod carries.
func (s *scenario) yuniKornApp(app string, minMember, members int, gpus int64) {
	s.t.Helper()
	s.yuniKornAppIn(app, "", minMember, members, gpus)
}

// yuniKornAppIn is yuniKornApp with the pods labelled for queue ("" names none).
func (s *scenario) yuniKornAppIn(app, queue string, minMember, members int, gpus int64) {
	s.t.Helper()
	groups := fmt.Sprintf(`[{"name":"workers","minMember":%d,"minResource":{"cpu":"100m","nvidia.com/gpu":"%d"}}]`, minMember, gpus)
	for i := range members {
		pod := builders.Pod("", fmt.Sprintf("%s-%d", app, i)).CPU("100m").Memory("64Mi").GPU(gpus).
			SchedulerName(wellknown.SchedulerNameYuniKorn).Label(wellknown.LabelYuniKornAppID, app).
			Annotation(wellknown.AnnotationYuniKornTaskGroups, groups).Annotation(wellknown.AnnotationYuniKornTaskGroupName, "workers").
			Annotation(wellknown.AnnotationYuniKornSchedulingPolicy, "placeholderTimeoutInSeconds=60 gangSchedulingStyle=Hard")
		if queue != "" {
			pod.Label(wellknown.LabelYuniKornQueue, queue)
		}
		s.create(pod.Obj())
	}
}

// The seed pair as a YuniKorn user writes it: an application of 5 x 2 GPUs whose task group needs
// all 5 binds nothing on 4 nodes of 2 GPUs; one of 4 binds whole. An application whose pods carry
// no task groups is no gang: its pods bind one by one as they fit.
func TestYuniKornSeedPair(t *testing.T) {
	s := newScenario(t, 4, 2)
	s.yuniKornApp("big", 5, 5, 2)
	want := fmt.Sprintf("gang %s/big: 5 members need 10 nvidia.com/gpu, 8 free", s.ns)
	s.eventually(60*time.Second, "the 5-member application to wait, saying what it lacks", func() bool { return s.waitsFor("big", want) })
	require.Zero(t, s.boundIn("big-"), "no member of an application that does not fit binds")
	s.deleteAllPods()

	s.yuniKornApp("fits", 4, 4, 2)
	s.eventually(90*time.Second, "the 4-member application bound whole", func() bool { return s.boundIn("fits-") == 4 })
	s.binds.assertNeverPartial(t, "fits", 4)
	s.deleteAllPods()

	for i := range 5 {
		s.create(builders.Pod("", fmt.Sprintf("plain-%d", i)).CPU("100m").Memory("64Mi").GPU(2).
			SchedulerName(wellknown.SchedulerNameYuniKorn).Label(wellknown.LabelYuniKornAppID, "plain").Obj())
	}
	s.eventually(90*time.Second, "4 of the 5 pods of an application without task groups bound, as they fit", func() bool {
		return s.boundIn("plain-") == 4
	})
	_, isGang := s.gangs()["plain"]
	require.False(t, isGang, "an application without task groups is not a gang")
}
