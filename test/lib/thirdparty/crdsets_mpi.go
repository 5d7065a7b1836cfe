package thirdparty

import (
	"context"
	"fmt"
	"reflect"
	"slices"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/client-go/discovery"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/util/retry"
)

// MPIOperatorVersion is the Kubeflow MPI operator the end-to-end suite runs (test/tools/mpi-operator
// pins the same version for bin/mpi-operator).
const MPIOperatorVersion = "v0.8.0"

// mpiJobCRD is the name both Kubeflow projects give their MPIJob CRD: the training-operator's
// serves kubeflow.org/v1, the MPI operator's kubeflow.org/v2beta1.
const mpiJobCRD = "mpijobs.kubeflow.org"

var mpiOperator = crdSet{"github.com/kubeflow/mpi-operator", MPIOperatorVersion, []string{
	"manifests/base/kubeflow.org_mpijobs.yaml",
}}

// InstallMPIJobCRD installs mpijobs.kubeflow.org serving both versions, the MPI operator
// v0.8.0's v2beta1 as the storage version and the training-operator v1.8.1's v1 beside it, and
// waits until both are served. Both projects name their CRD mpijobs.kubeflow.org: installing
// either file as it is drops the other's version, and kube-apiserver refuses to drop a version
// objects were once stored in (status.storedVersions). v2beta1 is stored so that an MPIJob keeps
// every field it was written with: with no conversion webhook, a v2beta1 object stored as v1
// would lose the fields v1 lacks (launcherCreationPolicy, mpiImplementation, runLauncherAsWorker,
// sshAuthMountPath, runPolicy.managedBy). Call ReleaseMPIJobCRD once the MPIJobs are deleted.
func InstallMPIJobCRD(ctx context.Context, cfg *rest.Config) error {
	return applyMPIJobCRD(ctx, cfg, "v2beta1")
}

// ReleaseMPIJobCRD makes v1 the storage version of mpijobs.kubeflow.org again and takes v2beta1
// out of status.storedVersions, so that the training-operator's own v1-only CRD
// (TrainingOperatorCRDs) applies afterwards. Call it once no v2beta1 MPIJob is left: one that is
// still stored as v2beta1 is read back as v1 with nothing converted but its apiVersion.
func ReleaseMPIJobCRD(ctx context.Context, cfg *rest.Config) error {
	if err := applyMPIJobCRD(ctx, cfg, "v1"); err != nil {
		return err
	}
	dyn, err := dynamic.NewForConfig(cfg)
	if err != nil {
		return fmt.Errorf("thirdparty: %w", err)
	}
	return retry.RetryOnConflict(retry.DefaultRetry, func() error {
		crd, err := dyn.Resource(crdResource).Get(ctx, mpiJobCRD, metav1.GetOptions{})
		if err != nil {
			return err
		}
		stored, _, _ := unstructured.NestedStringSlice(crd.Object, "status", "storedVersions")
		keep := slices.DeleteFunc(slices.Clone(stored), func(v string) bool { return v == "v2beta1" })
		if len(keep) == len(stored) {
			return nil
		}
		if err := unstructured.SetNestedStringSlice(crd.Object, keep, "status", "storedVersions"); err != nil {
			return err
		}
		_, err = dyn.Resource(crdResource).UpdateStatus(ctx, crd, metav1.UpdateOptions{})
		return err
	})
}

// applyMPIJobCRD applies the two projects' MPIJob versions as one CRD, storing in storage, and
// waits until both are served.
func applyMPIJobCRD(ctx context.Context, cfg *rest.Config, storage string) error {
	crd, err := mergedMPIJobCRD(ctx, storage)
	if err != nil {
		return err
	}
	dyn, err := dynamic.NewForConfig(cfg)
	if err != nil {
		return fmt.Errorf("thirdparty: %w", err)
	}
	if _, err := dyn.Resource(crdResource).Apply(ctx, crd.GetName(), crd,
		metav1.ApplyOptions{FieldManager: FieldManager, Force: true}); err != nil {
		return fmt.Errorf("thirdparty: applying CRD %s (v1 and v2beta1, storing %s): %w", crd.GetName(), storage, err)
	}
	dc, err := discovery.NewDiscoveryClientForConfig(cfg)
	if err != nil {
		return fmt.Errorf("thirdparty: %w", err)
	}
	return waitServed(ctx, dyn, dc, []*unstructured.Unstructured{crd})
}

// mergedMPIJobCRD is the MPI operator's MPIJob CRD with the training-operator's v1 version added,
// the version named storage marked the storage version.
func mergedMPIJobCRD(ctx context.Context, storage string) (*unstructured.Unstructured, error) {
	v1, err := mpiJobCRDFrom(ctx, trainingOperator)
	if err != nil {
		return nil, err
	}
	v2, err := mpiJobCRDFrom(ctx, mpiOperator)
	if err != nil {
		return nil, err
	}
	v1Names, _, _ := unstructured.NestedMap(v1.Object, "spec", "names")
	v2Names, _, _ := unstructured.NestedMap(v2.Object, "spec", "names")
	if !reflect.DeepEqual(v1Names, v2Names) {
		return nil, fmt.Errorf("thirdparty: CRD %s: the training-operator names it %v, the MPI operator %v", mpiJobCRD, v1Names, v2Names)
	}
	var versions []any
	for _, crd := range []*unstructured.Unstructured{v1, v2} {
		vs, _, err := unstructured.NestedSlice(crd.Object, "spec", "versions")
		if err != nil || len(vs) == 0 {
			return nil, fmt.Errorf("thirdparty: CRD %s has no spec.versions (%v)", crd.GetName(), err)
		}
		versions = append(versions, vs...)
	}
	found := false
	for _, v := range versions {
		m, ok := v.(map[string]any)
		if !ok {
			return nil, fmt.Errorf("thirdparty: CRD %s: a version is not an object", mpiJobCRD)
		}
		m["storage"] = m["name"] == storage
		found = found || m["name"] == storage
	}
	if !found {
		return nil, fmt.Errorf("thirdparty: CRD %s has no version %s", mpiJobCRD, storage)
	}
	out := v2.DeepCopy()
	if err := unstructured.SetNestedSlice(out.Object, versions, "spec", "versions"); err != nil {
		return nil, fmt.Errorf("thirdparty: CRD %s: %w", mpiJobCRD, err)
	}
	return out, nil
}

// mpiJobCRDFrom reads and prepares the MPIJob CRD of one set.
func mpiJobCRDFrom(ctx context.Context, set crdSet) (*unstructured.Unstructured, error) {
	paths, err := set.paths(ctx)
	if err != nil {
		return nil, err
	}
	crds, err := readCRDs(paths)
	if err != nil {
		return nil, err
	}
	for _, crd := range crds {
		if crd.GetName() == mpiJobCRD {
			return crd, nil
		}
	}
	return nil, fmt.Errorf("thirdparty: %s@%s has no CRD %s", set.module, set.version, mpiJobCRD)
}
