package harness

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"strconv"

	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	utilyaml "k8s.io/apimachinery/pkg/util/yaml"
	"k8s.io/client-go/discovery"
	"k8s.io/client-go/discovery/cached/memory"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/restmapper"
)

// DecodeFile reads every object of a multi-document YAML file.
func DecodeFile(path string) ([]*unstructured.Unstructured, error) {
	raw, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	dec := utilyaml.NewYAMLOrJSONDecoder(bytes.NewReader(raw), 4096)
	var out []*unstructured.Unstructured
	for i := 1; ; i++ {
		obj := &unstructured.Unstructured{}
		if err := dec.Decode(&obj.Object); err != nil {
			if errors.Is(err, io.EOF) {
				return out, nil
			}
			return nil, fmt.Errorf("%s: document %d: %w", path, i, err)
		}
		if len(obj.Object) == 0 {
			continue
		}
		out = append(out, obj)
	}
}

// Create creates objects as `kubectl create` would, resolving kinds through discovery. Objects
// that exist already are left as they are.
func Create(ctx context.Context, cfg *rest.Config, objs []*unstructured.Unstructured) error {
	dc, err := discovery.NewDiscoveryClientForConfig(cfg)
	if err != nil {
		return err
	}
	mapper := restmapper.NewDeferredDiscoveryRESTMapper(memory.NewMemCacheClient(dc))
	dyn, err := dynamic.NewForConfig(cfg)
	if err != nil {
		return err
	}
	for _, obj := range objs {
		gvk := obj.GroupVersionKind()
		mapping, err := mapper.RESTMapping(gvk.GroupKind(), gvk.Version)
		if err != nil {
			return fmt.Errorf("%s %s: %w", gvk.Kind, obj.GetName(), err)
		}
		var ri dynamic.ResourceInterface = dyn.Resource(mapping.Resource)
		if ns := obj.GetNamespace(); ns != "" {
			ri = dyn.Resource(mapping.Resource).Namespace(ns)
		}
		if _, err := ri.Create(ctx, obj, metav1.CreateOptions{FieldValidation: "Strict"}); err != nil && !apierrors.IsAlreadyExists(err) {
			return fmt.Errorf("creating %s %s/%s: %w", gvk.Kind, obj.GetNamespace(), obj.GetName(), err)
		}
	}
	return nil
}

// PodsOf turns an example file into the pods a controller would create from it: a Job becomes
// `parallelism` pods from its template (the demo's control plane runs no kube-controller-manager,
// and a test that makes the pods itself controls their names and order), a Pod stays itself. Every pod is put in namespace. Any other kind is an error;
// SplitExample takes files that hold group objects too.
func PodsOf(path, namespace string) ([]*corev1.Pod, error) {
	pods, others, err := SplitExample(path, namespace)
	if err == nil && len(others) > 0 {
		err = fmt.Errorf("%s: %s %s is neither a Pod nor a Job", path, others[0].GetKind(), others[0].GetName())
	}
	return pods, err
}

// SplitExample is PodsOf for files that also hold other objects (PodGroups, say): those are
// returned as they are, in namespace, for the caller to create.
func SplitExample(path, namespace string) (pods []*corev1.Pod, others []*unstructured.Unstructured, err error) {
	objs, err := DecodeFile(path)
	if err != nil {
		return nil, nil, err
	}
	for _, obj := range objs {
		switch obj.GetKind() {
		case "Pod":
			pod := &corev1.Pod{}
			if err := runtime.DefaultUnstructuredConverter.FromUnstructured(obj.Object, pod); err != nil {
				return nil, nil, fmt.Errorf("%s: pod %s: %w", path, obj.GetName(), err)
			}
			pod.Namespace = namespace
			pods = append(pods, pod)
		case "Job":
			job := &batchv1.Job{}
			if err := runtime.DefaultUnstructuredConverter.FromUnstructured(obj.Object, job); err != nil {
				return nil, nil, fmt.Errorf("%s: job %s: %w", path, obj.GetName(), err)
			}
			pods = append(pods, jobPods(job, namespace)...)
		default:
			obj.SetNamespace(namespace)
			others = append(others, obj)
		}
	}
	return pods, others, nil
}

// jobPods are the pods the Job controller would create for job.
func jobPods(job *batchv1.Job, namespace string) []*corev1.Pod {
	n := int32(1)
	if job.Spec.Parallelism != nil {
		n = *job.Spec.Parallelism
	}
	var pods []*corev1.Pod
	for i := range n {
		pod := &corev1.Pod{ObjectMeta: *job.Spec.Template.ObjectMeta.DeepCopy(), Spec: *job.Spec.Template.Spec.DeepCopy()}
		pod.Name = fmt.Sprintf("%s-%d", job.Name, i)
		pod.Namespace = namespace
		if pod.Labels == nil {
			pod.Labels = map[string]string{}
		}
		pod.Labels["job-name"] = job.Name
		if pod.Annotations == nil {
			pod.Annotations = map[string]string{}
		}
		pod.Annotations[batchv1.JobCompletionIndexAnnotation] = strconv.Itoa(int(i))
		pods = append(pods, pod)
	}
	return pods
}
