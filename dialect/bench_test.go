package dialect

import (
	"testing"

	"github.com/lockstep-sched/lockstep/test/lib/builders"
)

// Filter reads every pod's markers; an ordinary pod, the usual case, must cost no allocation.
func BenchmarkReadOrdinaryPod(b *testing.B) {
	pod := builders.Pod("team-a", "w-0").GPU(1).Label("app", "web").Annotation("note", "x").Obj()
	var r Pods
	b.ReportAllocs()
	for b.Loop() {
		if r.Read(pod).Gang != "" {
			b.Fatal("an ordinary pod read as a gang member")
		}
	}
}

func TestReadingAnOrdinaryPodAllocatesNothing(t *testing.T) {
	pod := builders.Pod("team-a", "w-0").GPU(1).Label("app", "web").Obj()
	allocs := testing.AllocsPerRun(100, func() { Pods{}.Read(pod) })
	if allocs != 0 {
		t.Fatalf("reading an ordinary pod's markers allocated %v times per call", allocs)
	}
}
