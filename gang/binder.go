package gang

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/util/retry"
)

// APIBinder posts pods/binding through client-go.
type APIBinder struct {
	Client kubernetes.Interface
	// Backoff spaces retries of transient failures; the caller's context bounds them too.
	Backoff wait.Backoff
}

// NewAPIBinder retries a transient failure six times over about six seconds.
func NewAPIBinder(client kubernetes.Interface) *APIBinder {
	return &APIBinder{Client: client, Backoff: wait.Backoff{Duration: 100 * time.Millisecond, Factor: 2, Jitter: 0.1, Steps: 6, Cap: 2 * time.Second}}
}

func (b *APIBinder) Bind(ctx context.Context, namespace, name string, uid types.UID, node string, gpuIDs []int) error {
	if len(gpuIDs) > 0 {
		if err := b.annotateGPUs(ctx, namespace, name, uid, gpuIDs); err != nil {
			return fmt.Errorf("writing %s: %w", AnnotationGPUIDs, err)
		}
	}
	binding := &corev1.Binding{
		ObjectMeta: metav1.ObjectMeta{Namespace: namespace, Name: name, UID: uid},
		Target:     corev1.ObjectReference{Kind: "Node", Name: node},
	}
	attempts := 0
	err := retry.OnError(b.Backoff, func(err error) bool { return ctx.Err() == nil && transient(err) }, func() error {
		attempts++
		err := b.Client.CoreV1().Pods(namespace).Bind(ctx, binding, metav1.CreateOptions{})
		if apierrors.IsConflict(err) && attempts > 1 {
			// An earlier attempt may have landed before its answer was lost.
			if pod, getErr := b.Client.CoreV1().Pods(namespace).Get(ctx, name, metav1.GetOptions{}); getErr == nil && pod.Spec.NodeName == node {
				return nil
			}
		}
		return err
	})
	if err != nil && attempts > 1 {
		return fmt.Errorf("after %d attempts: %w", attempts, err)
	}
	return err
}

// annotateGPUs writes AnnotationGPUIDs on the pod. The uid in the patch is a precondition: a pod
// recreated under the same name is not annotated with another pod's GPUs.
func (b *APIBinder) annotateGPUs(ctx context.Context, namespace, name string, uid types.UID, ids []int) error {
	patch, err := json.Marshal(map[string]any{"metadata": map[string]any{
		"uid":         uid,
		"annotations": map[string]string{AnnotationGPUIDs: FormatGPUIDs(ids)},
	}})
	if err != nil {
		return err
	}
	return retry.OnError(b.Backoff, func(err error) bool { return ctx.Err() == nil && transient(err) }, func() error {
		_, err := b.Client.CoreV1().Pods(namespace).Patch(ctx, name, types.MergePatchType, patch, metav1.PatchOptions{})
		return err
	})
}

// transient reports whether a failed binding may succeed if sent again.
func transient(err error) bool {
	switch {
	case apierrors.IsServerTimeout(err), apierrors.IsTimeout(err), apierrors.IsTooManyRequests(err),
		apierrors.IsInternalError(err), apierrors.IsServiceUnavailable(err), apierrors.IsUnexpectedServerError(err):
		return true
	case apierrors.IsConflict(err):
		// A conflict on the first attempt means someone else bound the pod; after a lost answer it
		// is handled above.
		return false
	}
	var netErr net.Error
	var status apierrors.APIStatus
	return errors.As(err, &netErr) || (!errors.As(err, &status) && !errors.Is(err, context.Canceled) && !errors.Is(err, context.DeadlineExceeded))
}
