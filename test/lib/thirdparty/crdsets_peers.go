package thirdparty

import (
	"context"
	"path/filepath"
)

// The peer schedulers `make bench` runs beside lockstep (test/cmd/throughput), at the versions
// their tools modules pin (test/tools/volcano, test/tools/koordinator).
const (
	VolcanoVersion     = "v1.10.0"
	KoordinatorVersion = "v1.8.0"
)

// volcanoSchedulerCRDSet is every CRD of Volcano's bases: its scheduler's informers cover
// PodGroups, Queues and, behind a gate that is on by default, NUMA topologies; the Job and Command
// CRDs are what its controller-manager watches.
var volcanoSchedulerCRDSet = crdSet{"volcano.sh/volcano", VolcanoVersion, []string{
	"config/crd/volcano/bases/batch.volcano.sh_jobs.yaml",
	"config/crd/volcano/bases/bus.volcano.sh_commands.yaml",
	"config/crd/volcano/bases/nodeinfo.volcano.sh_numatopologies.yaml",
	"config/crd/volcano/bases/scheduling.volcano.sh_podgroups.yaml",
	"config/crd/volcano/bases/scheduling.volcano.sh_queues.yaml",
}}

// koordSchedulerCRDSet is all 13 CRDs of Koordinator v1.8.0's config/crd/bases: koord-scheduler
// starts informers for most of these kinds whatever plugins its profile enables, and waits for
// them to sync before it schedules.
var koordSchedulerCRDSet = crdSet{"github.com/koordinator-sh/koordinator", KoordinatorVersion, []string{
	"config/crd/bases/analysis.koordinator.sh_recommendations.yaml",
	"config/crd/bases/config.koordinator.sh_clustercolocationprofiles.yaml",
	"config/crd/bases/quota.koordinator.sh_elasticquotaprofiles.yaml",
	"config/crd/bases/scheduling.koordinator.sh_clusternetworktopologies.yaml",
	"config/crd/bases/scheduling.koordinator.sh_devices.yaml",
	"config/crd/bases/scheduling.koordinator.sh_podmigrationjobs.yaml",
	"config/crd/bases/scheduling.koordinator.sh_reservations.yaml",
	"config/crd/bases/scheduling.koordinator.sh_scheduleexplanations.yaml",
	"config/crd/bases/scheduling.sigs.k8s.io_elasticquotas.yaml",
	"config/crd/bases/scheduling.sigs.k8s.io_podgroups.yaml",
	"config/crd/bases/slo.koordinator.sh_nodemetrics.yaml",
	"config/crd/bases/slo.koordinator.sh_nodeslos.yaml",
	"config/crd/bases/topology.node.k8s.io_noderesourcetopologies.yaml",
}}

// Files of the peers' own that the bench configures them from, read as published.
var (
	// volcanoSchedulerConf is the volcano-scheduler.conf Volcano's Helm chart (and the
	// installer/volcano-development.yaml rendered from it) mounts into its scheduler.
	volcanoSchedulerConf = crdSet{"volcano.sh/volcano", VolcanoVersion, []string{
		"installer/helm/chart/volcano/config/volcano-scheduler.conf",
	}}
	// koordSchedulerConfig is the ConfigMap Koordinator's manager kustomization deploys with
	// koord-scheduler: its KubeSchedulerConfiguration is the data key koord-scheduler-config.
	koordSchedulerConfig = crdSet{"github.com/koordinator-sh/koordinator", KoordinatorVersion, []string{
		"config/manager/scheduler-config.yaml",
	}}
)

// VolcanoSchedulerCRDs is every CRD under Volcano v1.10.0's config/crd/volcano/bases.
func VolcanoSchedulerCRDs(ctx context.Context) ([]string, error) {
	return volcanoSchedulerCRDSet.paths(ctx)
}

// KoordSchedulerCRDs is every CRD under Koordinator v1.8.0's config/crd/bases.
func KoordSchedulerCRDs(ctx context.Context) ([]string, error) {
	return koordSchedulerCRDSet.paths(ctx)
}

// VolcanoSchedulerConf is the path of the volcano-scheduler.conf Volcano v1.10.0 ships.
func VolcanoSchedulerConf(ctx context.Context) (string, error) {
	return onePath(ctx, volcanoSchedulerConf)
}

// KoordSchedulerConfig is the path of Koordinator v1.8.0's config/manager/scheduler-config.yaml.
func KoordSchedulerConfig(ctx context.Context) (string, error) {
	return onePath(ctx, koordSchedulerConfig)
}

func onePath(ctx context.Context, s crdSet) (string, error) {
	p, err := s.paths(ctx)
	if err != nil {
		return "", err
	}
	return filepath.Clean(p[0]), nil
}
