package gang

import (
	"fmt"
	"testing"

	"github.com/lockstep-sched/lockstep/test/lib/builders"
)

// BenchmarkAdmitGang5000 is the first filter of a gang of 4 x 2 GPUs on 5,000 idle 8-GPU nodes:
// the whole-gang plan, the most expensive call lockstep answers.
func BenchmarkAdmitGang5000(b *testing.B) {
	e := newEnv(&testing.T{}, testConfig(), builders.GPUNodes("n", 5000, 8)...)
	defer e.m.Stop()
	b.ReportAllocs()
	for i := range b.N {
		pods := members("default", fmt.Sprintf("g-%d", i), fmt.Sprintf("g%d", i), 4, 4, 2)
		e.add(pods...)
		r := e.m.Filter(pods[0], e.nodes)
		if len(r.Feasible) != 1 {
			b.Fatalf("gang not admitted: %v", r.Feasible)
		}
		b.StopTimer()
		for _, p := range pods {
			e.m.DeletePod(p.UID) // the last member gone releases the reservation
		}
		b.StartTimer()
	}
}
