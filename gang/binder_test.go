package gang

import (
	"context"
	"errors"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/kubernetes/fake"
	k8stesting "k8s.io/client-go/testing"

	"github.com/lockstep-sched/lockstep/test/builders"
)

func TestAPIBinder(t *testing.T) {
	podsGR := schema.GroupResource{Resource: "pods"}
	tests := []struct {
		name string
		// errs are the answers to successive binding requests; past the end, success.
		errs         []error
		podOnNode    string // the pod as a later GET returns it
		wantAttempts int
		wantErr      func(error) bool
	}{
		{
			name:         "transient errors then success",
			errs:         []error{apierrors.NewInternalError(errors.New("etcd leader changed")), apierrors.NewInternalError(errors.New("etcd leader changed"))},
			wantAttempts: 3,
		},
		{
			name:         "not found fails at once",
			errs:         []error{apierrors.NewNotFound(podsGR, "w-0")},
			wantAttempts: 1,
			wantErr:      apierrors.IsNotFound,
		},
		{
			name:         "conflict on the first attempt: someone else bound it",
			errs:         []error{apierrors.NewConflict(podsGR, "w-0", errors.New("pod is already assigned"))},
			wantAttempts: 1,
			wantErr:      apierrors.IsConflict,
		},
		{
			name:         "conflict after a lost answer that did land",
			errs:         []error{apierrors.NewServerTimeout(podsGR, "create", 1), apierrors.NewConflict(podsGR, "w-0", errors.New("pod is already assigned"))},
			podOnNode:    "n-0",
			wantAttempts: 2,
		},
		{
			name: "transient errors until the steps run out",
			errs: []error{
				apierrors.NewTooManyRequests("slow down", 0), apierrors.NewTooManyRequests("slow down", 0),
				apierrors.NewTooManyRequests("slow down", 0), apierrors.NewTooManyRequests("slow down", 0),
			},
			wantAttempts: 3,
			wantErr:      apierrors.IsTooManyRequests,
		},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			pod := builders.Pod("default", "w-0").Node(tc.podOnNode).Obj()
			client := fake.NewClientset(pod)
			var mu sync.Mutex
			var got []*corev1.Binding
			client.PrependReactor("create", "pods/binding", func(action k8stesting.Action) (bool, runtime.Object, error) {
				require.Equal(t, "binding", action.GetSubresource())
				mu.Lock()
				defer mu.Unlock()
				got = append(got, action.(k8stesting.CreateAction).GetObject().(*corev1.Binding))
				if n := len(got); n <= len(tc.errs) {
					return true, nil, tc.errs[n-1]
				}
				return true, nil, nil
			})
			b := NewAPIBinder(client)
			b.Backoff = wait.Backoff{Duration: time.Millisecond, Factor: 1, Steps: 3}

			err := b.Bind(context.Background(), "default", "w-0", pod.UID, "n-0", nil)
			if tc.wantErr == nil {
				require.NoError(t, err)
			} else {
				require.Error(t, err)
				require.True(t, tc.wantErr(err), "unexpected error %v", err)
			}
			require.Len(t, got, tc.wantAttempts)
			if tc.wantAttempts > 1 && err != nil {
				require.Contains(t, err.Error(), "after 3 attempts")
			}
			for _, binding := range got {
				require.Equal(t, "w-0", binding.Name)
				require.Equal(t, "default", binding.Namespace)
				require.Equal(t, pod.UID, binding.UID)
				require.Equal(t, corev1.ObjectReference{Kind: "Node", Name: "n-0"}, binding.Target)
			}
		})
	}

	t.Run("a cancelled context stops the retries", func(t *testing.T) {
		client := fake.NewClientset()
		attempts := 0
		ctx, cancel := context.WithCancel(context.Background())
		client.PrependReactor("create", "pods/binding", func(k8stesting.Action) (bool, runtime.Object, error) {
			attempts++
			cancel()
			return true, nil, apierrors.NewServiceUnavailable("apiserver shutting down")
		})
		b := NewAPIBinder(client)
		b.Backoff = wait.Backoff{Duration: time.Millisecond, Factor: 1, Steps: 5}
		require.Error(t, b.Bind(ctx, "default", "w-0", "uid", "n-0", nil))
		require.Equal(t, 1, attempts)
	})
}
