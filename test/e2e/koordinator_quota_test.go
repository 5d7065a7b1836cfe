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
)

// koordinatorQuotaGVR is Koordinator's ElasticQuota, at the version the suite installs.
var koordinatorQuotaGVR = schema.GroupVersionResource{Group: "scheduling.sigs.k8s.io", Version: "v1alpha1", Resource: "elasticquotas"}

// A Koordinator ElasticQuota named after its namespace holds that namespace's Koordinator gangs
// whole: a gang whose quorum would take it over its max waits, naming the quota, while one that
// fits binds, and the quota's status.used says what it holds, as koord-scheduler writes it.
func TestKoordinatorElasticQuotaHoldsGangWhole(t *testing.T) {
	s := newQueueScenario(t, 4, 2)
	obj := builders.KoordinatorElasticQuota(s.ns, s.ns).Max(gpuRes, "2").Obj()
	key := "Koordinator ElasticQuota " + s.ns
	s.createQueueObject(koordinatorQuotaGVR, obj, key)

	koordGang := func(name string, n int) {
		for i := range n {
			s.create(gpuPod(fmt.Sprintf("%s-%d", name, i)).Gang(name, n).Obj())
		}
	}
	koordGang("three", 3)
	s.eventually(60*time.Second, "the gang of three to wait naming the quota", func() bool {
		return strings.Contains(s.schedulingMessage("three-0"),
			fmt.Sprintf("gang %s/three waits for its queue: %s: nvidia.com/gpu would go over its limit of 2", s.ns, key))
	})
	s.never(5*time.Second, "a member of the gang of three bound", func() bool { return s.boundIn("three-") > 0 })

	koordGang("two", 2)
	s.eventually(60*time.Second, "the gang of two bound", func() bool { return s.boundIn("two-") == 2 })
	require.Zero(t, s.boundIn("three-"), "the gang of three waits whole")
	s.eventually(30*time.Second, "/debug/queues to show the quota holding 2 GPUs", func() bool {
		v := s.queue(key)
		return gpus(v.Allocated) == "2" && gpus(v.Capability) == "2"
	})
	s.eventually(30*time.Second, "the quota's status.used to say 2 GPUs", func() bool {
		got, err := s.dyn.Resource(koordinatorQuotaGVR).Namespace(s.ns).Get(s.ctx, s.ns, metav1.GetOptions{})
		if err != nil {
			return false
		}
		v, _, _ := unstructured.NestedString(got.Object, "status", "used", gpuRes)
		return v == "2"
	})
}
