package thirdparty

import (
	"context"
	"fmt"
	"slices"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/discovery"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/rest"
)

// FieldManager is the server-side apply field manager InstallCRDs applies as.
const FieldManager = "lockstep-e2e"

// CRDReadyTimeout bounds how long InstallCRDs waits for the CRDs to be served. Generous: the
// machines this runs on are small and busy, and Volcano's Job CRD alone is 200 KiB of schema.
const CRDReadyTimeout = 90 * time.Second

var crdResource = schema.GroupVersionResource{Group: "apiextensions.k8s.io", Version: "v1", Resource: "customresourcedefinitions"}

// InstallCRDs installs every CustomResourceDefinition in the files (multi-document YAML, v1 or
// v1beta1; see prepareCRD for what is changed on the way) and returns once each is Established
// and each of its served versions lists the resource in discovery, so clients (and a
// discovery-based RESTMapper) can use it at once. It applies server-side (force, as
// FieldManager): some of these CRDs are too large for client-side apply's annotation, and
// applying again is harmless, so tests may each call it for what they need.
func InstallCRDs(ctx context.Context, cfg *rest.Config, paths ...string) error {
	crds, err := readCRDs(paths)
	if err != nil {
		return err
	}
	dyn, err := dynamic.NewForConfig(cfg)
	if err != nil {
		return fmt.Errorf("thirdparty: %w", err)
	}
	for _, crd := range crds {
		_, err := dyn.Resource(crdResource).Apply(ctx, crd.GetName(), crd,
			metav1.ApplyOptions{FieldManager: FieldManager, Force: true})
		if err != nil {
			return fmt.Errorf("thirdparty: applying CRD %s: %w", crd.GetName(), err)
		}
	}
	dc, err := discovery.NewDiscoveryClientForConfig(cfg)
	if err != nil {
		return fmt.Errorf("thirdparty: %w", err)
	}
	return waitServed(ctx, dyn, dc, crds)
}

// readCRDs reads and prepares every CRD in the files; any other kind of object is an error.
func readCRDs(paths []string) ([]*unstructured.Unstructured, error) {
	var crds []*unstructured.Unstructured
	for _, p := range paths {
		objs, err := ReadObjects(p)
		if err != nil {
			return nil, err
		}
		for _, o := range objs {
			crd, err := prepareCRD(o)
			if err != nil {
				return nil, fmt.Errorf("thirdparty: %s: %w", p, err)
			}
			crds = append(crds, crd)
		}
	}
	return crds, nil
}

// waitServed polls until every CRD is Established and in discovery, or CRDReadyTimeout passes.
// A CRD whose names the apiserver refused fails at once.
func waitServed(ctx context.Context, dyn dynamic.Interface, dc discovery.DiscoveryInterface,
	crds []*unstructured.Unstructured) error {
	pending := slices.Clone(crds)
	last := ""
	err := wait.PollUntilContextTimeout(ctx, 100*time.Millisecond, CRDReadyTimeout, true, func(ctx context.Context) (bool, error) {
		for len(pending) > 0 {
			ok, why, err := crdServed(ctx, dyn, dc, pending[0])
			if err != nil {
				return false, err
			}
			if !ok {
				last = why
				return false, nil
			}
			pending = pending[1:]
		}
		return true, nil
	})
	switch {
	case err == nil:
		return nil
	case wait.Interrupted(err) && ctx.Err() == nil:
		return fmt.Errorf("thirdparty: CRDs not served within %s: %s", CRDReadyTimeout, last)
	case wait.Interrupted(err):
		return fmt.Errorf("thirdparty: waiting for CRDs: %w (last: %s)", ctx.Err(), last)
	default:
		return err
	}
}

// crdServed says whether one CRD is Established and listed in discovery for each served
// version, and if not, why not.
func crdServed(ctx context.Context, dyn dynamic.Interface, dc discovery.DiscoveryInterface,
	want *unstructured.Unstructured) (bool, string, error) {
	name := want.GetName()
	got, err := dyn.Resource(crdResource).Get(ctx, name, metav1.GetOptions{})
	if err != nil {
		return false, fmt.Sprintf("CRD %s: %v", name, err), nil
	}
	if st, msg := crdCondition(got, "NamesAccepted"); st == "False" {
		return false, "", fmt.Errorf("thirdparty: CRD %s: names not accepted: %s", name, msg)
	}
	if st, msg := crdCondition(got, "Established"); st != "True" {
		return false, fmt.Sprintf("CRD %s not Established (%s %s)", name, st, msg), nil
	}
	group, _, _ := unstructured.NestedString(got.Object, "spec", "group")
	plural, _, _ := unstructured.NestedString(got.Object, "spec", "names", "plural")
	for _, gv := range servedVersions(got) {
		list, err := dc.ServerResourcesForGroupVersion(group + "/" + gv)
		if err != nil {
			return false, fmt.Sprintf("discovery of %s/%s: %v", group, gv, err), nil
		}
		if !slices.ContainsFunc(list.APIResources, func(r metav1.APIResource) bool { return r.Name == plural }) {
			return false, fmt.Sprintf("discovery of %s/%s does not list %s yet", group, gv, plural), nil
		}
	}
	return true, "", nil
}

// crdCondition returns the status and message of a CRD's condition ("" when absent).
func crdCondition(crd *unstructured.Unstructured, typ string) (status, message string) {
	conds, _, _ := unstructured.NestedSlice(crd.Object, "status", "conditions")
	for _, c := range conds {
		m, _ := c.(map[string]any)
		if m["type"] == typ {
			s, _ := m["status"].(string)
			msg, _ := m["message"].(string)
			return s, msg
		}
	}
	return "", ""
}

// servedVersions lists the names of a v1 CRD's served versions.
func servedVersions(crd *unstructured.Unstructured) []string {
	versions, _, _ := unstructured.NestedSlice(crd.Object, "spec", "versions")
	var out []string
	for _, v := range versions {
		m, _ := v.(map[string]any)
		if served, _ := m["served"].(bool); served {
			name, _ := m["name"].(string)
			out = append(out, name)
		}
	}
	return out
}
