package gang

import (
	"fmt"
	"testing"

	"github.com/lockstep-sched/lockstep/test/lib/builders"
	corev1 "k8s.io/api/core/v1"
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

// BenchmarkFilterOrdinaryGPUPod1000 is filter for a 1-GPU pod on 1,000 8-GPU nodes, one in eight
// of them part-used (what the packed cluster of make bench's throughput run looks like), with the
// shortlist and without: what narrowing the answer costs lockstep per call.
func BenchmarkFilterOrdinaryGPUPod1000(b *testing.B) {
	for _, tc := range []struct {
		name string
		off  bool
	}{{"shortlist", false}, {"every-node", true}} {
		b.Run(tc.name, func(b *testing.B) {
			cfg := testConfig()
			cfg.ScoreEveryNode = tc.off
			e := newEnv(&testing.T{}, cfg, builders.GPUNodes("n", 1000, 8)...)
			defer e.m.Stop()
			for i := 0; i < 1000; i += 8 {
				e.add(builders.Pod("default", fmt.Sprintf("resident-%d", i)).GPU(int64(1 + i%7)).Node(e.nodes[i]).Obj())
			}
			pod := builders.Pod("default", "p").GPU(1).Obj()
			b.ReportAllocs()
			for range b.N {
				if r := e.m.Filter(pod, e.nodes); len(r.Passing(e.nodes)) == 0 {
					b.Fatal("nothing passed")
				}
			}
		})
	}
}

// BenchmarkBurst250x8 is make bench's burst inside the process: 250 gangs of 8 x 1 GPU, all
// created before the first filter, on 1,000 8-GPU nodes, each gang's members filtered and bound
// one after another as kube-scheduler takes them, with a binder that answers at once. What it
// measures is lockstep's own work per gang, apart from the apiserver and the scheduler: the loop
// for profiling a change to the decisions before the real bench.
func BenchmarkBurst250x8(b *testing.B) {
	verifySnapshots = false // the benchmark measures lockstep, not the check
	defer func() { verifySnapshots = true }()
	for range b.N {
		b.StopTimer()
		e := newEnv(&testing.T{}, testConfig(), builders.GPUNodes("n", 1000, 8)...)
		gangs := make([][]*corev1.Pod, 250)
		for i := range gangs {
			gangs[i] = members("default", fmt.Sprintf("g%d", i), fmt.Sprintf("g%d", i), 8, 8, 1)
			e.add(gangs[i]...)
		}
		b.StartTimer()
		for _, g := range gangs {
			bindGangAsScheduled(b, e, g)
		}
		b.StopTimer()
		e.m.Stop()
	}
}

// bindGangAsScheduled filters and binds each member in turn, as kube-scheduler does, and waits
// for every bind to answer.
func bindGangAsScheduled(b *testing.B, e *env, gang []*corev1.Pod) {
	var binds []<-chan error
	for _, p := range gang {
		passing := e.m.Filter(p, e.nodes).Passing(e.nodes)
		if len(passing) != 1 {
			b.Fatalf("member %s: %d nodes pass, want its reserved one", p.Name, len(passing))
		}
		binds = append(binds, e.bindAsync(p, passing[0]))
	}
	for _, done := range binds {
		if err := <-done; err != nil {
			b.Fatal(err)
		}
	}
}
