package e2e

import (
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"

	"github.com/lockstep-sched/lockstep/test/lib/builders"
	"github.com/lockstep-sched/lockstep/wellknown"
)

// KAI Scheduler's objects as its users write them (CRDs: thirdparty.KAICRDs, KAI v0.17.0).
var (
	kaiQueueGVR = schema.GroupVersionResource{Group: "scheduling.run.ai", Version: "v2", Resource: "queues"}
	kaiGroupGVR = schema.GroupVersionResource{Group: "scheduling.run.ai", Version: "v2alpha2", Resource: "podgroups"}
)

func kaiKey(name string) string { return "KAI Queue " + name }

// kaiResource is one resource of a KAI Queue's spec.resources: quota, limit, overQuotaWeight.
func kaiResource(quota, limit, weight int64) map[string]any {
	return map[string]any{"quota": quota, "limit": limit, "overQuotaWeight": weight}
}

// createKAIQueue makes a KAI Queue whose GPUs are gpu, cpu and memory unbounded (-1), as KAI's
// shipped queues write them, under parent ("" for none).
func (s *queueScenario) createKAIQueue(name, parent string, gpu map[string]any) string {
	s.t.Helper()
	spec := map[string]any{"resources": map[string]any{"gpu": gpu, "cpu": kaiResource(-1, -1, 1), "memory": kaiResource(-1, -1, 1)}}
	if parent != "" {
		spec["parentQueue"] = parent
	}
	obj := &unstructured.Unstructured{Object: map[string]any{"apiVersion": "scheduling.run.ai/v2", "kind": "Queue",
		"metadata": map[string]any{"name": name}, "spec": spec}}
	s.createQueueObject(kaiQueueGVR, obj, kaiKey(name))
	return name
}

// kaiJob makes what KAI's podgrouper makes of a job of members pods of gpus GPUs each: a
// PodGroup of minMember in queue, and pods naming it and the queue, for kai-scheduler.
func (s *queueScenario) kaiJob(group, queue string, minMember, members int, gpus int64) {
	s.t.Helper()
	pg := &unstructured.Unstructured{Object: map[string]any{"apiVersion": "scheduling.run.ai/v2alpha2", "kind": "PodGroup",
		"metadata": map[string]any{"name": group, "namespace": s.ns},
		"spec":     map[string]any{"minMember": int64(minMember), "queue": queue}}}
	_, err := s.dyn.Resource(kaiGroupGVR).Namespace(s.ns).Create(s.ctx, pg, metav1.CreateOptions{})
	require.NoError(s.t, err, "creating KAI PodGroup %s", group)
	for i := range members {
		s.create(builders.Pod("", fmt.Sprintf("%s-%d", group, i)).CPU("100m").Memory("64Mi").GPU(gpus).
			SchedulerName("kai-scheduler").Annotation(wellknown.AnnotationKAIPodGroup, group).Label(wellknown.LabelKAIQueue, queue).Obj())
	}
}

// kaiConditions are the status.schedulingConditions of a KAI PodGroup.
func (s *queueScenario) kaiConditions(group string) []any {
	obj, err := s.dyn.Resource(kaiGroupGVR).Namespace(s.ns).Get(s.ctx, group, metav1.GetOptions{})
	if err != nil {
		return nil
	}
	list, _, _ := unstructured.NestedSlice(obj.Object, "status", "schedulingConditions")
	return list
}

// The seed pair as a KAI user writes it, pods for kai-scheduler: a 5 x 2-GPU job on 4 nodes of 2
// GPUs binds nothing and its PodGroup says why where KAI's scheduler writes it
// (status.schedulingConditions); a 4 x 2-GPU job then binds whole, one member per node, and its
// PodGroup's conditions are cleared.
func TestKAISchedulerSeedPair(t *testing.T) {
	s := newQueueScenario(t, 4, 2)
	q := s.createKAIQueue(s.queueName("team"), "", kaiResource(-1, -1, 1))

	s.kaiJob("big", q, 5, 5, 2)
	want := fmt.Sprintf("gang %s/big: 5 members need 10 nvidia.com/gpu, 8 free", s.ns)
	s.eventually(60*time.Second, "the 5-member job to wait, saying what it lacks", func() bool { return s.waitsFor("big", want) })
	s.eventually(30*time.Second, "its PodGroup's schedulingConditions to carry lockstep's reason", func() bool {
		for _, c := range s.kaiConditions("big") {
			m, _ := c.(map[string]any)
			if m["type"] == "UnschedulableOnNodePool" && m["reason"] == "Unschedulable" && strings.Contains(fmt.Sprint(m["message"]), want) {
				return true
			}
		}
		return false
	})
	require.Zero(t, s.boundIn("big-"), "no member of a job that does not fit binds")
	s.deleteAllPods()

	s.kaiJob("fits", q, 4, 4, 2)
	s.eventually(90*time.Second, "the 4-member job bound whole", func() bool { return s.boundIn("fits-") == 4 })
	s.binds.assertNeverPartial(t, "fits", 4)
	nodes := map[string]bool{}
	for _, p := range s.pods() {
		nodes[p.Spec.NodeName] = true
	}
	require.Len(t, nodes, 4, "4 members of 2 GPUs on 4 nodes of 2 GPUs use every node once")
	s.eventually(30*time.Second, "its PodGroup to say nothing once bound", func() bool { return len(s.kaiConditions("fits")) == 0 })
}

// KAI's overQuotaWeight, as KAI divides it: under a department, teams a and b each have a GPU
// quota of 2, and weights 1 and 3 for what is left over the quotas. Both hold work and wait for
// more on 8 GPUs: they deserve 2+1 and 2+3. (Sharing the whole by weight, Volcano's rule, would
// give 2 and 6.) Each then holds what it deserves, and the gangs beyond wait for their queue.
func TestKAIOverQuotaWeightSplit(t *testing.T) {
	s := newQueueScenario(t, 4, 2)
	dept := s.createKAIQueue(s.queueName("dept"), "", kaiResource(-1, -1, 1))
	a := s.createKAIQueue(s.queueName("a"), dept, kaiResource(2, -1, 1))
	b := s.createKAIQueue(s.queueName("b"), dept, kaiResource(2, -1, 3))

	s.kaiJob("b-first", b, 5, 5, 1)
	s.eventually(90*time.Second, "team b's 5 bound, on an idle cluster", func() bool { return s.boundIn("b-first-") == 5 })
	s.kaiJob("a-first", a, 3, 3, 1)
	s.eventually(90*time.Second, "team a's 3 bound", func() bool { return s.boundIn("a-first-") == 3 })
	s.kaiJob("a-more", a, 2, 2, 1)
	s.kaiJob("b-more", b, 2, 2, 1)
	s.eventually(60*time.Second, "/debug/queues: a deserves 3, b 5, their department 8", func() bool {
		qa, qb, qd := s.queue(kaiKey(a)), s.queue(kaiKey(b)), s.queue(kaiKey(dept))
		return gpus(qa.Deserved) == "3" && gpus(qb.Deserved) == "5" && gpus(qd.Deserved) == "8" &&
			len(qa.Waiting) == 1 && len(qb.Waiting) == 1
	})
	require.Zero(t, s.boundIn("a-more-")+s.boundIn("b-more-"), "no GPU is free")
	qa, qb := s.queue(kaiKey(a)), s.queue(kaiKey(b))
	require.Equal(t, "3", gpus(qa.Allocated), "a: %s", qa)
	require.Equal(t, "5", gpus(qb.Allocated), "b: %s", qb)
}

// A minMember above the pods that exist, as KAI and YuniKorn mean it: the job waits for the rest
// (KAI says "Waiting for 5 pods, currently 4 exist"; YuniKorn keeps its placeholders), and none of
// it binds. lockstep's reason and the members' GangWaiting Events name the object and the field
// the quorum came from; another job keeps scheduling beside it.
func TestMinMemberAbovePodsWaitsNamingTheField(t *testing.T) {
	s := newQueueScenario(t, 4, 2)
	q := s.createKAIQueue(s.queueName("team"), "", kaiResource(-1, -1, 1))

	s.kaiJob("short", q, 5, 4, 1)
	kai := fmt.Sprintf("gang %s/short: waiting for members: 4 of min-available 5 exist; min-available is spec.minMember of KAI Scheduler PodGroup %s/short", s.ns, s.ns)
	s.eventually(60*time.Second, "the KAI job to wait for its fifth pod, naming the PodGroup's field", func() bool { return s.waitsFor("short", kai) })
	s.eventually(30*time.Second, "a GangWaiting Event on a member naming the field", func() bool {
		return s.hasEvent("short-0", wellknown.ReasonGangWaiting, "min-available is spec.minMember of KAI Scheduler PodGroup")
	})

	s.yuniKornApp("app", 3, 2, 1)
	yk := fmt.Sprintf("gang %s/app: waiting for members: 2 of min-available 3 exist (task workers: 2 of 3); min-available is the minMember of the task groups in annotation %s",
		s.ns, wellknown.AnnotationYuniKornTaskGroups)
	s.eventually(60*time.Second, "the YuniKorn application to wait for its third pod, naming the annotation", func() bool { return s.waitsFor("app", yk) })

	s.kaiJob("whole", q, 2, 2, 1)
	s.eventually(90*time.Second, "a job whose pods all exist bound beside them", func() bool { return s.boundIn("whole-") == 2 })
	require.Zero(t, s.boundIn("short-"), "no member of the job short of pods binds")
	require.Zero(t, s.boundIn("app-"), "no member of the application short of pods binds")
}
