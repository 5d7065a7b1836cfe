// Package apidiscovery asks the apiserver which of the other projects' APIs it serves and keeps
// an informer running for each: lockstep watches PodGroups (package podgroup) and queues (package
// tenancy) only where their CRDs are installed, picks up a CRD installed later, and takes an
// absent one as no error. It owns that question and those informers, and hands every object it
// hears of to its caller; what an object means, the caller's own bookkeeping and every write to
// the apiserver are the caller's business, and it never stops an informer it started.
package apidiscovery

import (
	"errors"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/discovery"
)

// Served is an API the apiserver serves, and whether its status is a subresource of its own (a
// merge patch of the status then goes to .../status).
type Served[T any] struct {
	API       T
	HasStatus bool
}

// Find asks discovery which of apis the apiserver serves, in their order; resource says which
// resource each is. Asking per group version keeps each answer small and needs no RBAC beyond
// discovery, which every authenticated client has. A group version not served is no error; other
// errors are joined, and what the partial answers listed is still returned (an aggregated API
// down says nothing of the rest).
func Find[T any](disc discovery.DiscoveryInterface, apis []T, resource func(T) schema.GroupVersionResource) ([]Served[T], error) {
	var served []Served[T]
	var errs []error
	for _, api := range apis {
		gvr := resource(api)
		list, err := disc.ServerResourcesForGroupVersion(gvr.GroupVersion().String())
		if apierrors.IsNotFound(err) {
			continue
		}
		if err != nil {
			errs = append(errs, err)
			continue
		}
		s, found := Served[T]{API: api}, false
		for _, r := range list.APIResources {
			switch r.Name {
			case gvr.Resource:
				found = true
			case gvr.Resource + "/status":
				s.HasStatus = true
			}
		}
		if found {
			served = append(served, s)
		}
	}
	return served, errors.Join(errs...)
}
