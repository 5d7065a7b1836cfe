package tenancy

import (
	"errors"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/client-go/discovery"

	"github.com/lockstep-sched/lockstep/dialect"
)

// servedAPI is a queue API the apiserver serves, and whether its status is a subresource of its
// own (Volcano's Queue and scheduler-plugins' ElasticQuota CRDs have one).
type servedAPI struct {
	api       dialect.QueueAPI
	hasStatus bool
}

// servedAPIs asks discovery which of dialect.QueueAPIs() the apiserver serves. Asking per group
// version keeps each answer small and needs no RBAC beyond discovery, which every authenticated
// client has.
func servedAPIs(disc discovery.DiscoveryInterface) ([]servedAPI, error) {
	var served []servedAPI
	var errs []error
	for _, api := range dialect.QueueAPIs() {
		list, err := disc.ServerResourcesForGroupVersion(api.Resource.GroupVersion().String())
		if apierrors.IsNotFound(err) {
			continue // not installed: no error
		}
		if err != nil {
			errs = append(errs, err)
			continue
		}
		s := servedAPI{api: api}
		found := false
		for _, r := range list.APIResources {
			switch r.Name {
			case api.Resource.Resource:
				found = true
			case api.Resource.Resource + "/status":
				s.hasStatus = true
			}
		}
		if found {
			served = append(served, s)
		}
	}
	return served, errors.Join(errs...)
}
