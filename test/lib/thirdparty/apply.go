package thirdparty

import (
	"context"
	"fmt"

	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/client-go/discovery"
	"k8s.io/client-go/discovery/cached/memory"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/restmapper"
)

// ApplyYAML creates every object of a multi-document YAML file, as `kubectl create -f` would,
// and returns them as the apiserver stored them. Namespaced objects go into namespace whatever
// namespace the file names (the repository's examples say "default"; each test has its own),
// unless namespace is "", which keeps the file's. Kinds resolve through discovery, read afresh
// when a kind is unknown, so objects of a CRD installed a moment ago work. An object that
// exists already is an error; the objects created before it are returned with the error.
func ApplyYAML(ctx context.Context, cfg *rest.Config, namespace, path string) ([]*unstructured.Unstructured, error) {
	objs, err := ReadObjects(path)
	if err != nil {
		return nil, err
	}
	oc, err := newObjectClient(cfg)
	if err != nil {
		return nil, err
	}
	var created []*unstructured.Unstructured
	for _, obj := range objs {
		got, err := oc.create(ctx, namespace, obj)
		if err != nil {
			return created, fmt.Errorf("thirdparty: %s: %w", path, err)
		}
		created = append(created, got)
	}
	return created, nil
}

// objectClient creates objects of any kind the apiserver serves.
type objectClient struct {
	dyn    dynamic.Interface
	mapper *restmapper.DeferredDiscoveryRESTMapper
}

func newObjectClient(cfg *rest.Config) (*objectClient, error) {
	dc, err := discovery.NewDiscoveryClientForConfig(cfg)
	if err != nil {
		return nil, fmt.Errorf("thirdparty: %w", err)
	}
	dyn, err := dynamic.NewForConfig(cfg)
	if err != nil {
		return nil, fmt.Errorf("thirdparty: %w", err)
	}
	return &objectClient{dyn: dyn, mapper: restmapper.NewDeferredDiscoveryRESTMapper(memory.NewMemCacheClient(dc))}, nil
}

// mapping resolves a kind, reading discovery again once if the cached copy does not know it.
func (oc *objectClient) mapping(obj *unstructured.Unstructured) (*meta.RESTMapping, error) {
	gvk := obj.GroupVersionKind()
	m, err := oc.mapper.RESTMapping(gvk.GroupKind(), gvk.Version)
	if meta.IsNoMatchError(err) {
		oc.mapper.Reset()
		m, err = oc.mapper.RESTMapping(gvk.GroupKind(), gvk.Version)
	}
	if err != nil {
		return nil, fmt.Errorf("%s %s: %w", gvk, obj.GetName(), err)
	}
	return m, nil
}

// create creates one object, in namespace if its kind is namespaced (see ApplyYAML).
func (oc *objectClient) create(ctx context.Context, namespace string, obj *unstructured.Unstructured) (*unstructured.Unstructured, error) {
	m, err := oc.mapping(obj)
	if err != nil {
		return nil, err
	}
	obj = obj.DeepCopy()
	var ri dynamic.ResourceInterface = oc.dyn.Resource(m.Resource)
	if m.Scope.Name() == meta.RESTScopeNameNamespace {
		if namespace != "" {
			obj.SetNamespace(namespace)
		}
		if obj.GetNamespace() == "" {
			obj.SetNamespace(metav1.NamespaceDefault)
		}
		ri = oc.dyn.Resource(m.Resource).Namespace(obj.GetNamespace())
	} else {
		obj.SetNamespace("")
	}
	got, err := ri.Create(ctx, obj, metav1.CreateOptions{FieldValidation: "Strict"})
	if err != nil {
		return nil, fmt.Errorf("creating %s %s/%s: %w", obj.GetKind(), obj.GetNamespace(), obj.GetName(), err)
	}
	return got, nil
}
