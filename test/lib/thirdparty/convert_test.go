package thirdparty

import (
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
)

// A v1beta1 CRD shaped like kube-batch's: one spec-wide version, schema and status subresource.
const v1beta1PodGroup = `
apiVersion: apiextensions.k8s.io/v1beta1
kind: CustomResourceDefinition
metadata:
  name: podgroups.scheduling.incubator.k8s.io
  creationTimestamp: null
spec:
  group: scheduling.incubator.k8s.io
  names: {kind: PodGroup, plural: podgroups}
  scope: Namespaced
  version: v1alpha1
  subresources:
    status: {}
  additionalPrinterColumns:
  - {name: Min, type: integer, JSONPath: .spec.minMember}
  validation:
    openAPIV3Schema:
      properties:
        metadata: {type: object}
        spec:
          properties:
            minMember: {type: integer, format: int32}
            queue: {type: string}
            labels: {type: object, additionalProperties: {type: string}}
          type: object
        status:
          properties:
            running: {type: integer}
        extra: {}
status:
  acceptedNames: {kind: "", plural: ""}
`

func decodeOne(t *testing.T, doc string) *unstructured.Unstructured {
	t.Helper()
	objs, err := splitObjects([]byte(doc))
	require.NoError(t, err)
	require.Len(t, objs, 1)
	return objs[0]
}

func nested(t *testing.T, obj map[string]any, path ...string) any {
	t.Helper()
	v, found, err := unstructured.NestedFieldNoCopy(obj, path...)
	require.NoError(t, err, path)
	require.True(t, found, "%v not found", path)
	return v
}

func TestPrepareCRDConvertsV1beta1(t *testing.T) {
	in := decodeOne(t, v1beta1PodGroup)
	out, err := prepareCRD(in)
	require.NoError(t, err)

	assert.Equal(t, crdV1, out.GetAPIVersion())
	assert.Equal(t, crdV1beta1, in.GetAPIVersion(), "the input is left as it was")
	spec := out.Object["spec"].(map[string]any)
	assert.ElementsMatch(t, []string{"group", "names", "scope", "versions"}, keys(spec))
	assert.Equal(t, "scheduling.incubator.k8s.io", spec["group"])
	assert.Equal(t, "Namespaced", spec["scope"])
	versions := spec["versions"].([]any)
	require.Len(t, versions, 1)
	v := versions[0].(map[string]any)
	assert.Equal(t, "v1alpha1", v["name"])
	assert.Equal(t, true, v["served"])
	assert.Equal(t, true, v["storage"])
	assert.Equal(t, map[string]any{"status": map[string]any{}}, v["subresources"])
	assert.Equal(t, []any{map[string]any{"name": "Min", "type": "integer", "jsonPath": ".spec.minMember"}},
		v["additionalPrinterColumns"])

	_, hasStatus := out.Object["status"]
	assert.False(t, hasStatus, "status is the server's")
	_, hasCreated, _ := unstructured.NestedFieldNoCopy(out.Object, "metadata", "creationTimestamp")
	assert.False(t, hasCreated)
	assert.Equal(t, testApproval, out.GetAnnotations()[approvalAnnotation])
}

func TestStructuralSchemaKeepsWhatV1beta1Kept(t *testing.T) {
	out, err := prepareCRD(decodeOne(t, v1beta1PodGroup))
	require.NoError(t, err)
	s := nested(t, out.Object, "spec", "versions").([]any)[0].(map[string]any)["schema"].(map[string]any)["openAPIV3Schema"].(map[string]any)

	const preserve = "x-kubernetes-preserve-unknown-fields"
	assert.Equal(t, "object", s["type"], "the root gets type: object")
	assert.Equal(t, true, s[preserve])
	assert.Equal(t, map[string]any{"type": "object"}, nested(t, s, "properties", "metadata"), "metadata is left alone")
	assert.Equal(t, true, nested(t, s, "properties", "spec", preserve))
	assert.Equal(t, "object", nested(t, s, "properties", "status", "type"), "properties imply type: object")
	assert.Equal(t, true, nested(t, s, "properties", "status", preserve), "kube-batch writes status.phase, which its schema does not name")
	assert.Equal(t, true, nested(t, s, "properties", "extra", preserve), "an untyped node is anything")
	_, found, _ := unstructured.NestedFieldNoCopy(s, "properties", "spec", "properties", "labels", preserve)
	assert.False(t, found, "a map (additionalProperties) needs no preserve")
	_, found, _ = unstructured.NestedFieldNoCopy(s, "properties", "spec", "properties", "queue", preserve)
	assert.False(t, found, "scalars stay as they are")
}

func TestStructuralSchemaPrunesWhenV1beta1Did(t *testing.T) {
	s := structuralSchema(map[string]any{"properties": map[string]any{
		"spec": map[string]any{"type": "object", "properties": map[string]any{"a": map[string]any{"type": "string"}}},
		"open": map[string]any{"type": "object"},
	}}, false)
	_, found, _ := unstructured.NestedFieldNoCopy(s, "x-kubernetes-preserve-unknown-fields")
	assert.False(t, found, "a root with properties prunes")
	_, found, _ = unstructured.NestedFieldNoCopy(s, "properties", "spec", "x-kubernetes-preserve-unknown-fields")
	assert.False(t, found)
	assert.Equal(t, true, nested(t, s, "properties", "open", "x-kubernetes-preserve-unknown-fields"), "an open object stays open")

	assert.Equal(t, map[string]any{"type": "object", "x-kubernetes-preserve-unknown-fields": true}, structuralSchema(nil, false))
}

func TestCRDToV1PerVersionSettingsWin(t *testing.T) {
	in := decodeOne(t, `
apiVersion: apiextensions.k8s.io/v1beta1
kind: CustomResourceDefinition
metadata: {name: things.example.com}
spec:
  group: example.com
  names: {kind: Thing, plural: things}
  scope: Cluster
  preserveUnknownFields: false
  validation: {openAPIV3Schema: {type: object, properties: {shared: {type: string}}}}
  versions:
  - name: v1
    served: true
    storage: true
  - name: v2
    served: false
    storage: false
    schema: {openAPIV3Schema: {type: object, properties: {own: {type: string}}}}
    subresources: {scale: {specReplicasPath: .spec.n, statusReplicasPath: .status.n}}
`)
	out, err := prepareCRD(in)
	require.NoError(t, err)
	versions := nested(t, out.Object, "spec", "versions").([]any)
	require.Len(t, versions, 2)
	v1, v2 := versions[0].(map[string]any), versions[1].(map[string]any)
	assert.Contains(t, nested(t, v1, "schema", "openAPIV3Schema", "properties"), "shared")
	assert.Contains(t, nested(t, v2, "schema", "openAPIV3Schema", "properties"), "own")
	assert.NotContains(t, v1, "subresources")
	assert.Contains(t, v2["subresources"], "scale")
	assert.Equal(t, false, v2["served"])
	assert.NotContains(t, out.GetAnnotations(), approvalAnnotation, "example.com is nobody's protected group")
}

func TestCRDToV1Refuses(t *testing.T) {
	for name, doc := range map[string]string{
		"webhook conversion": `{apiVersion: apiextensions.k8s.io/v1beta1, kind: CustomResourceDefinition, metadata: {name: a.b},
spec: {group: b, version: v1, names: {kind: A, plural: a}, scope: Cluster, conversion: {strategy: Webhook}}}`,
		"no version":  `{apiVersion: apiextensions.k8s.io/v1beta1, kind: CustomResourceDefinition, metadata: {name: a.b}, spec: {group: b, names: {kind: A, plural: a}}}`,
		"not a CRD":   `{apiVersion: v1, kind: ConfigMap, metadata: {name: c}}`,
		"unknown CRD": `{apiVersion: apiextensions.k8s.io/v2, kind: CustomResourceDefinition, metadata: {name: a.b}}`,
	} {
		t.Run(name, func(t *testing.T) {
			_, err := prepareCRD(decodeOne(t, doc))
			assert.Error(t, err)
		})
	}
}

func TestApproveProtectedGroup(t *testing.T) {
	for group, protected := range map[string]bool{
		"scheduling.incubator.k8s.io": true,
		"scheduling.sigs.k8s.io":      true,
		"k8s.io":                      true,
		"apps.kubernetes.io":          true,
		"scheduling.x-k8s.io":         false,
		"scheduling.volcano.sh":       false,
		"kubeflow.org":                false,
		"notk8s.io":                   false,
	} {
		assert.Equal(t, protected, isProtectedGroup(group), group)
		crd := &unstructured.Unstructured{Object: map[string]any{"spec": map[string]any{"group": group}}}
		approveProtectedGroup(crd)
		if protected {
			assert.Equal(t, testApproval, crd.GetAnnotations()[approvalAnnotation], group)
		} else {
			assert.Empty(t, crd.GetAnnotations(), group)
		}
	}

	crd := &unstructured.Unstructured{Object: map[string]any{"spec": map[string]any{"group": "scheduling.sigs.k8s.io"}}}
	crd.SetAnnotations(map[string]string{approvalAnnotation: "https://github.com/kubernetes-sigs/scheduler-plugins/pull/52", "x": "y"})
	approveProtectedGroup(crd)
	assert.Equal(t, map[string]string{approvalAnnotation: "https://github.com/kubernetes-sigs/scheduler-plugins/pull/52", "x": "y"},
		crd.GetAnnotations(), "the project's own approval stays")
}

func keys(m map[string]any) []string {
	out := make([]string, 0, len(m))
	for k := range m {
		out = append(out, k)
	}
	return out
}
