package podgroup

import (
	"errors"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/client-go/discovery"

	"github.com/lockstep-sched/lockstep/dialect"
)

// servedAPI is a group API the apiserver serves, and whether its status is a subresource of its
// own (scheduler-plugins' CRD has one; Volcano's and Koordinator's keep status in the object).
type servedAPI struct {
	api       dialect.API
	hasStatus bool
}

// servedAPIs asks discovery which of dialect.APIs() the apiserver serves. Asking per group
// version keeps each answer small and needs no RBAC beyond discovery, which every authenticated
// client has.
func servedAPIs(disc discovery.DiscoveryInterface) ([]servedAPI, error) {
	var served []servedAPI
	var errs []error
	for _, api := range dialect.APIs() {
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
