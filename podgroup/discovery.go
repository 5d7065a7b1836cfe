package podgroup

import (
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/discovery"

	"github.com/lockstep-sched/lockstep/apidiscovery"
	"github.com/lockstep-sched/lockstep/dialect"
)

// servedAPI is a group API the apiserver serves, and whether its status is a subresource of its
// own (scheduler-plugins' CRD has one; Volcano's and Koordinator's keep status in the object).
type servedAPI = apidiscovery.Served[dialect.API]

// servedAPIs asks discovery which of dialect.APIs() the apiserver serves.
func servedAPIs(disc discovery.DiscoveryInterface) ([]servedAPI, error) {
	return apidiscovery.Find(disc, dialect.APIs(), func(a dialect.API) schema.GroupVersionResource { return a.Resource })
}
