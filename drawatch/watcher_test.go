package drawatch

import (
	"context"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	fakediscovery "k8s.io/client-go/discovery/fake"
	"k8s.io/client-go/kubernetes/fake"

	"github.com/lockstep-sched/lockstep/dra"
	"github.com/lockstep-sched/lockstep/test/lib/builders"
)

// inventory is the manager's side: an inventory under a lock of its own.
type inventory struct {
	mu  sync.Mutex
	inv *dra.Inventory
}

func (i *inventory) UpdateDevices(_ string, change func(*dra.Inventory) []string) {
	i.mu.Lock()
	defer i.mu.Unlock()
	change(i.inv)
}

func (i *inventory) gpus(node string) int {
	i.mu.Lock()
	defer i.mu.Unlock()
	if g := i.inv.Node(node); g != nil {
		return len(g.Devices)
	}
	return -1
}

// Where resource.k8s.io/v1 is served, the objects reach the inventory, and HasSynced waits for
// their initial lists; where it is not, nothing is watched and HasSynced holds nothing up.
func TestWatcher(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	client := fake.NewClientset(builders.NVIDIADeviceClasses()[0], builders.GPUSlice("n-0", 4).Obj())
	disc := client.Discovery().(*fakediscovery.FakeDiscovery)
	disc.Resources = []*metav1.APIResourceList{{GroupVersion: "resource.k8s.io/v1", APIResources: []metav1.APIResource{
		{Name: "deviceclasses"}, {Name: "resourceslices"}, {Name: "resourceclaims"}, {Name: "resourceclaimtemplates"}}}}
	m := &inventory{inv: dra.NewInventory(dra.DefaultGPUClasses)}
	w := New(client, disc, m, 10*time.Millisecond)
	require.False(t, w.HasSynced(), "before discovery")
	go w.Run(ctx)
	require.Eventually(t, w.HasSynced, 10*time.Second, 10*time.Millisecond)
	require.Eventually(t, func() bool { return m.gpus("n-0") == 4 }, 10*time.Second, 10*time.Millisecond)

	_, err := client.ResourceV1().ResourceSlices().Create(ctx, builders.GPUSlice("n-1", 2).Obj(), metav1.CreateOptions{})
	require.NoError(t, err)
	require.Eventually(t, func() bool { return m.gpus("n-1") == 2 }, 10*time.Second, 10*time.Millisecond)

	bare := fake.NewClientset()
	none := New(bare, bare.Discovery(), &inventory{inv: dra.NewInventory(nil)}, 10*time.Millisecond)
	go none.Run(ctx)
	require.Eventually(t, none.HasSynced, 10*time.Second, 10*time.Millisecond, "an apiserver without DRA")
}
