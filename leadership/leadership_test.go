package leadership

import (
	"context"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	coordinationv1 "k8s.io/api/coordination/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes/fake"
)

func lease(name, holder string) *coordinationv1.Lease {
	return &coordinationv1.Lease{
		ObjectMeta: metav1.ObjectMeta{Namespace: "lockstep-system", Name: name},
		Spec:       coordinationv1.LeaseSpec{HolderIdentity: &holder},
	}
}

func TestFollowsItsOwnScheduler(t *testing.T) {
	client := fake.NewClientset(lease("lockstep-scheduler", "pod-b_7f3c"), lease("other-lease", "pod-a_1111"))
	f := New(client, "lockstep-system", "lockstep-scheduler", "pod-a")
	var started atomic.Int32
	f.OnStartedLeading(func() { started.Add(1) })
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	synced := f.Run(ctx)
	require.Eventually(t, synced, 5*time.Second, 10*time.Millisecond)
	require.Eventually(t, func() bool { return f.Holder() == "pod-b_7f3c" }, 5*time.Second, 10*time.Millisecond)
	require.False(t, f.Leading(), "another replica's scheduler leads; another Lease naming us does not count")

	leases := client.CoordinationV1().Leases("lockstep-system")
	update := func(holder string) {
		_, err := leases.Update(ctx, lease("lockstep-scheduler", holder), metav1.UpdateOptions{})
		require.NoError(t, err)
		require.Eventually(t, func() bool { return f.Holder() == holder }, 5*time.Second, 10*time.Millisecond)
	}
	update("pod-a_9d2e")
	require.True(t, f.Leading())
	require.Equal(t, int32(1), started.Load())
	update("pod-a_9d2e-renewed") // same prefix: still ours, no second start
	require.True(t, f.Leading())
	require.Equal(t, int32(1), started.Load())
	update("pod-ab_0000") // a hostname that merely starts like ours is not ours
	require.False(t, f.Leading())
	update("pod-a_5555")
	require.Equal(t, int32(2), started.Load(), "leading again runs the callbacks again")

	require.NoError(t, leases.Delete(ctx, "lockstep-scheduler", metav1.DeleteOptions{}))
	require.Eventually(t, func() bool { return !f.Leading() }, 5*time.Second, 10*time.Millisecond)
}

func TestAlwaysLeads(t *testing.T) {
	f := Always()
	require.True(t, f.Leading())
	require.True(t, f.Run(context.Background())())
}
