package tenancy

import (
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/discovery"

	"github.com/lockstep-sched/lockstep/apidiscovery"
	"github.com/lockstep-sched/lockstep/dialect"
)

// servedAPI is a queue API the apiserver serves, and whether its status is a subresource of its
// own (Volcano's Queue and scheduler-plugins' ElasticQuota CRDs have one).
type servedAPI = apidiscovery.Served[dialect.QueueAPI]

// servedAPIs asks discovery which of dialect.QueueAPIs() the apiserver serves.
func servedAPIs(disc discovery.DiscoveryInterface) ([]servedAPI, error) {
	return apidiscovery.Find(disc, dialect.QueueAPIs(), func(a dialect.QueueAPI) schema.GroupVersionResource { return a.Resource })
}
