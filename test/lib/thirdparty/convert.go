package thirdparty

import (
	"fmt"
	"strings"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
)

const (
	crdV1      = "apiextensions.k8s.io/v1"
	crdV1beta1 = "apiextensions.k8s.io/v1beta1"

	// approvalAnnotation is what kube-apiserver demands of a CRD in a group it protects.
	approvalAnnotation = "api-approved.kubernetes.io"
	// testApproval starts with "unapproved", which kube-apiserver accepts (it only records the
	// CRD as not conforming to the approval policy). It is a test-only stand-in: these groups
	// were never approved upstream, and lockstep's suite installs them only to speak to their
	// objects.
	testApproval = "unapproved, test-only stand-in: lockstep's end-to-end suite installs this CRD as its project published it"
)

// prepareCRD returns a copy of a CRD that today's kube-apiserver accepts: an
// apiextensions.k8s.io/v1beta1 CRD (no longer served since Kubernetes 1.22) becomes v1, a CRD
// in a protected group gets the approval annotation, and what only the server may set
// (status, a null creationTimestamp) is dropped so server-side apply does not trip over it.
func prepareCRD(in *unstructured.Unstructured) (*unstructured.Unstructured, error) {
	if in.GetKind() != "CustomResourceDefinition" {
		return nil, fmt.Errorf("%s %q is not a CustomResourceDefinition", in.GetKind(), in.GetName())
	}
	out := in.DeepCopy()
	switch in.GetAPIVersion() {
	case crdV1:
	case crdV1beta1:
		var err error
		if out, err = crdToV1(in); err != nil {
			return nil, fmt.Errorf("CRD %s: %w", in.GetName(), err)
		}
	default:
		return nil, fmt.Errorf("CRD %s: apiVersion %s is neither %s nor %s", in.GetName(), in.GetAPIVersion(), crdV1, crdV1beta1)
	}
	approveProtectedGroup(out)
	unstructured.RemoveNestedField(out.Object, "status")
	unstructured.RemoveNestedField(out.Object, "metadata", "creationTimestamp")
	return out, nil
}

// isProtectedGroup mirrors kube-apiserver's rule: k8s.io, kubernetes.io and their subdomains
// belong to the Kubernetes project. (scheduling.x-k8s.io is not one: "x-k8s.io" is a domain of
// its own.)
func isProtectedGroup(group string) bool {
	return group == "k8s.io" || strings.HasSuffix(group, ".k8s.io") ||
		group == "kubernetes.io" || strings.HasSuffix(group, ".kubernetes.io")
}

// approveProtectedGroup gives a CRD in a protected group the approval annotation when it has
// none (kube-batch's scheduling.incubator.k8s.io); kube-apiserver refuses it otherwise. An
// annotation the project wrote itself is kept.
func approveProtectedGroup(crd *unstructured.Unstructured) {
	group, _, _ := unstructured.NestedString(crd.Object, "spec", "group")
	ann := crd.GetAnnotations()
	if !isProtectedGroup(group) || ann[approvalAnnotation] != "" {
		return
	}
	if ann == nil {
		ann = map[string]string{}
	}
	ann[approvalAnnotation] = testApproval
	crd.SetAnnotations(ann)
}

// crdToV1 converts an apiextensions.k8s.io/v1beta1 CRD to v1: the spec-wide version, schema
// (validation.openAPIV3Schema), subresources and printer columns move into each version, and
// the schema is made structural (see structuralSchema). Webhook conversion is not handled.
func crdToV1(in *unstructured.Unstructured) (*unstructured.Unstructured, error) {
	spec, ok := in.Object["spec"].(map[string]any)
	if !ok {
		return nil, fmt.Errorf("no spec")
	}
	if s, _, _ := unstructured.NestedString(spec, "conversion", "strategy"); s != "" && s != "None" {
		return nil, fmt.Errorf("conversion strategy %q is not converted to v1", s)
	}
	versions, err := v1Versions(spec)
	if err != nil {
		return nil, err
	}
	out := in.DeepCopy()
	out.SetAPIVersion(crdV1)
	out.Object["spec"] = map[string]any{
		"group":    spec["group"],
		"names":    runtime.DeepCopyJSONValue(spec["names"]),
		"scope":    spec["scope"],
		"versions": versions,
	}
	return out, nil
}

// v1Versions builds v1's spec.versions from a v1beta1 spec: its versions list or, without one,
// the single spec.version, each taking the spec-wide schema, subresources and printer columns
// unless it has its own.
func v1Versions(spec map[string]any) ([]any, error) {
	list, _ := spec["versions"].([]any)
	if len(list) == 0 {
		name, _ := spec["version"].(string)
		if name == "" {
			return nil, fmt.Errorf("neither spec.versions nor spec.version is set")
		}
		list = []any{map[string]any{"name": name, "served": true, "storage": true}}
	}
	// v1beta1 defaults preserveUnknownFields to true: nothing is pruned.
	preserveAll := true
	if p, ok := spec["preserveUnknownFields"].(bool); ok {
		preserveAll = p
	}
	sharedSchema, _, _ := unstructured.NestedMap(spec, "validation", "openAPIV3Schema")
	out := make([]any, 0, len(list))
	for _, item := range list {
		v, ok := item.(map[string]any)
		if !ok {
			return nil, fmt.Errorf("spec.versions holds a %T", item)
		}
		nv := map[string]any{"name": v["name"]}
		for _, k := range []string{"served", "storage"} {
			if x, ok := v[k]; ok {
				nv[k] = x
			}
		}
		schema, _, _ := unstructured.NestedMap(v, "schema", "openAPIV3Schema")
		if schema == nil {
			schema = sharedSchema
		}
		nv["schema"] = map[string]any{"openAPIV3Schema": structuralSchema(schema, preserveAll)}
		if sub := firstSet(v["subresources"], spec["subresources"]); sub != nil {
			nv["subresources"] = runtime.DeepCopyJSONValue(sub)
		}
		if cols, ok := firstSet(v["additionalPrinterColumns"], spec["additionalPrinterColumns"]).([]any); ok {
			nv["additionalPrinterColumns"] = v1PrinterColumns(cols)
		}
		out = append(out, nv)
	}
	return out, nil
}

func firstSet(a, b any) any {
	if a != nil {
		return a
	}
	return b
}

// v1PrinterColumns renames v1beta1's JSONPath to v1's jsonPath.
func v1PrinterColumns(cols []any) []any {
	out := make([]any, 0, len(cols))
	for _, c := range cols {
		m, ok := runtime.DeepCopyJSONValue(c).(map[string]any)
		if !ok {
			continue
		}
		if p, ok := m["JSONPath"]; ok {
			m["jsonPath"] = p
			delete(m, "JSONPath")
		}
		out = append(out, m)
	}
	return out
}

// structuralSchema returns a copy of a v1beta1 schema that v1 accepts and that keeps what
// v1beta1 kept. v1 demands a structural schema (a type on every node, type: object at the
// root) and prunes fields the schema does not name; v1beta1 pruned nothing unless the CRD set
// preserveUnknownFields: false. So with preserveAll every object node (the root's metadata
// aside, which v1 lets a CRD say nothing about) gets x-kubernetes-preserve-unknown-fields;
// without it only objects the schema leaves open (no properties) do. This matters for
// kube-batch: its PodGroup schema names no status.phase, which kube-batch itself writes.
// A missing schema becomes "any object".
func structuralSchema(schema map[string]any, preserveAll bool) map[string]any {
	if schema == nil {
		return map[string]any{"type": "object", "x-kubernetes-preserve-unknown-fields": true}
	}
	s := runtime.DeepCopyJSONValue(schema).(map[string]any)
	s["type"] = "object"
	openObjects(s, preserveAll, true)
	return s
}

// openObjects gives node and everything under it a type and, where structuralSchema says so,
// x-kubernetes-preserve-unknown-fields.
func openObjects(node map[string]any, preserveAll, root bool) {
	props, _ := node["properties"].(map[string]any)
	_, hasAdditional := node["additionalProperties"]
	_, intOrString := node["x-kubernetes-int-or-string"]
	typ, _ := node["type"].(string)
	switch {
	case typ == "" && props != nil:
		typ = "object"
		node["type"] = typ
	case typ == "" && !intOrString:
		// An untyped leaf is "anything"; v1 says so with preserve-unknown-fields alone.
		node["x-kubernetes-preserve-unknown-fields"] = true
	}
	if typ == "object" && !hasAdditional && (preserveAll || props == nil) {
		node["x-kubernetes-preserve-unknown-fields"] = true
	}
	for name, p := range props {
		if child, ok := p.(map[string]any); ok && !(root && name == "metadata") {
			openObjects(child, preserveAll, false)
		}
	}
	for _, key := range []string{"items", "additionalProperties"} {
		if child, ok := node[key].(map[string]any); ok {
			openObjects(child, preserveAll, false)
		}
	}
}
