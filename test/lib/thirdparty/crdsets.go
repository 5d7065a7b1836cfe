package thirdparty

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
)

// crdSet names CRD files inside one project's Go module at an exact version.
type crdSet struct {
	module, version string
	files           []string // relative to the module's root
}

// paths fetches the module and returns the absolute paths of the set's files, checking that
// each exists (a moved file should fail here, by name, rather than as an empty install).
func (s crdSet) paths(ctx context.Context) ([]string, error) {
	dir, err := ModuleDir(ctx, s.module, s.version)
	if err != nil {
		return nil, err
	}
	out := make([]string, 0, len(s.files))
	for _, f := range s.files {
		p := filepath.Join(dir, filepath.FromSlash(f))
		if _, err := os.Stat(p); err != nil {
			return nil, fmt.Errorf("thirdparty: %s@%s has no %s: %w", s.module, s.version, f, err)
		}
		out = append(out, p)
	}
	return out, nil
}

// The sets, at the versions the end-to-end suite is written against.
var (
	schedulerPlugins = crdSet{"sigs.k8s.io/scheduler-plugins", "v0.28.9", []string{
		"config/crd/bases/scheduling.x-k8s.io_podgroups.yaml",
		"config/crd/bases/scheduling.x-k8s.io_elasticquotas.yaml",
	}}
	volcano = crdSet{"volcano.sh/volcano", "v1.10.0", []string{
		"config/crd/volcano/bases/scheduling.volcano.sh_podgroups.yaml",
		"config/crd/volcano/bases/scheduling.volcano.sh_queues.yaml",
		"config/crd/volcano/bases/batch.volcano.sh_jobs.yaml",
		"config/crd/volcano/bases/bus.volcano.sh_commands.yaml",
	}}
	koordinator = crdSet{"github.com/koordinator-sh/koordinator", "v1.6.0", []string{
		"config/crd/bases/scheduling.sigs.k8s.io_podgroups.yaml",
		"config/crd/bases/scheduling.sigs.k8s.io_elasticquotas.yaml",
	}}
	kubeBatch = crdSet{"github.com/kubernetes-sigs/kube-batch", "v0.5.0", []string{
		"config/crds/scheduling_v1alpha1_podgroup.yaml",
		"config/crds/scheduling_v1alpha2_podgroup.yaml",
		"config/crds/scheduling_v1alpha1_queue.yaml",
		"config/crds/scheduling_v1alpha2_queue.yaml",
	}}
	trainingOperator = crdSet{"github.com/kubeflow/training-operator", "v1.8.1", []string{
		"manifests/base/crds/kubeflow.org_tfjobs.yaml",
		"manifests/base/crds/kubeflow.org_mpijobs.yaml",
		"manifests/base/crds/kubeflow.org_pytorchjobs.yaml",
	}}
)

// SchedulerPluginsCRDs is scheduler-plugins v0.28.9's PodGroup (scheduling.x-k8s.io/v1alpha1),
// the group the training-operator v1.8.1 creates for --gang-scheduler-name=scheduler-plugins,
// and its ElasticQuota (scheduling.x-k8s.io/v1alpha1, namespaced, with a status subresource):
// capacity scheduling's spec.min and spec.max for every pod of a namespace.
func SchedulerPluginsCRDs(ctx context.Context) ([]string, error) { return schedulerPlugins.paths(ctx) }

// VolcanoCRDs is Volcano v1.10.0's PodGroup and Queue (scheduling.volcano.sh/v1beta1), Job
// (batch.volcano.sh/v1alpha1) and Command (bus.volcano.sh/v1alpha1, which its job controller
// watches and waits for). Its PodGroup has no status subresource: status is written with the
// object.
func VolcanoCRDs(ctx context.Context) ([]string, error) { return volcano.paths(ctx) }

// KoordinatorCRDs is Koordinator v1.6.0's PodGroup (scheduling.sigs.k8s.io/v1alpha1, the
// coscheduling group under its older name) and its ElasticQuota (scheduling.sigs.k8s.io/v1alpha1,
// namespaced, without a status subresource: status.used is written with the object).
func KoordinatorCRDs(ctx context.Context) ([]string, error) { return koordinator.paths(ctx) }

// KubeBatchCRDs is kube-batch v0.5.0's PodGroup and Queue (cluster-scoped, spec.weight) in both
// its groups: scheduling.incubator.k8s.io (v1alpha1) and scheduling.sigs.dev (v1alpha2). The
// files are apiextensions.k8s.io/v1beta1; InstallCRDs converts them.
func KubeBatchCRDs(ctx context.Context) ([]string, error) { return kubeBatch.paths(ctx) }

// TrainingOperatorCRDs is the Kubeflow training-operator v1.8.1's TFJob, MPIJob and PyTorchJob
// (kubeflow.org/v1): the schemes harness.StartTrainingOperator enables. Arena's `submit tfjob`
// and `submit pytorchjob` read them too: Arena refuses a job kind whose CRD is not installed.
func TrainingOperatorCRDs(ctx context.Context) ([]string, error) { return trainingOperator.paths(ctx) }

// AllCRDs is every set above, in the order listed there.
func AllCRDs(ctx context.Context) ([]string, error) {
	var all []string
	for _, s := range []crdSet{schedulerPlugins, volcano, koordinator, kubeBatch, trainingOperator} {
		p, err := s.paths(ctx)
		if err != nil {
			return nil, err
		}
		all = append(all, p...)
	}
	return all, nil
}
