package kubeletsim

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/kubernetes/fake"
)

func pod(name, node string, deleting bool) *corev1.Pod {
	p := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: name, UID: types.UID("uid-" + name)}, Spec: corev1.PodSpec{NodeName: node}}
	if deleting {
		p.DeletionTimestamp = &metav1.Time{Time: time.Now()}
	}
	return p
}

// Only a bound pod whose deletion began goes; running pods and pods no node has are left alone,
// and one that starts going later goes then.
func TestFinishesOnlyBoundPodsOnTheirWayOut(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	client := fake.NewClientset(pod("evicted", "n-0", true), pod("running", "n-0", false), pod("pending", "", true))
	s, err := Start(ctx, client, "ns")
	require.NoError(t, err)

	exists := func(name string) bool {
		_, err := client.CoreV1().Pods("ns").Get(ctx, name, metav1.GetOptions{})
		require.True(t, err == nil || apierrors.IsNotFound(err), "%v", err)
		return err == nil
	}
	gone := func(name string) {
		require.NoError(t, wait.PollUntilContextTimeout(ctx, 10*time.Millisecond, 10*time.Second, true, func(context.Context) (bool, error) {
			return !exists(name), nil
		}), "pod %s to be finished", name)
	}
	gone("evicted")
	require.True(t, exists("running"))
	require.True(t, exists("pending"), "a pod no node has is the apiserver's to remove")

	_, err = client.CoreV1().Pods("ns").Update(ctx, pod("running", "n-0", true), metav1.UpdateOptions{})
	require.NoError(t, err)
	gone("running")
	require.Equal(t, []string{"evicted", "running"}, s.Finished())
	require.NoError(t, s.Err())
}
