package thirdparty

import "context"

// kueueCRDSet is every CRD of Kueue v0.17.1's base install: its manager starts informers for
// all of these kinds (Workloads, queues, flavors, admission checks, cohorts, topologies, priority
// classes, MultiKueue), and a kind that is not served keeps its caches from syncing. These are
// the bases alone, without Kueue's conversion webhook, so each CRD converts between its versions
// by relabelling only: write every object as kueue.x-k8s.io/v1beta2, the version stored and the
// one Kueue itself reads.
var kueueCRDSet = crdSet{"sigs.k8s.io/kueue", "v0.17.1", []string{
	"config/components/crd/bases/kueue.x-k8s.io_admissionchecks.yaml",
	"config/components/crd/bases/kueue.x-k8s.io_clusterqueues.yaml",
	"config/components/crd/bases/kueue.x-k8s.io_cohorts.yaml",
	"config/components/crd/bases/kueue.x-k8s.io_localqueues.yaml",
	"config/components/crd/bases/kueue.x-k8s.io_multikueueclusters.yaml",
	"config/components/crd/bases/kueue.x-k8s.io_multikueueconfigs.yaml",
	"config/components/crd/bases/kueue.x-k8s.io_provisioningrequestconfigs.yaml",
	"config/components/crd/bases/kueue.x-k8s.io_resourceflavors.yaml",
	"config/components/crd/bases/kueue.x-k8s.io_topologies.yaml",
	"config/components/crd/bases/kueue.x-k8s.io_workloadpriorityclasses.yaml",
	"config/components/crd/bases/kueue.x-k8s.io_workloads.yaml",
}}

// KueueCRDs is Kueue v0.17.1's CRDs (kueue.x-k8s.io, served as v1beta1 and v1beta2), which
// harness.StartKueue installs before it runs the controller.
func KueueCRDs(ctx context.Context) ([]string, error) { return kueueCRDSet.paths(ctx) }
