package harness

import (
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/lockstep-sched/lockstep/test/lib/cluster"
)

// Each release is started with the switches its own kube_features.go knows: 1.37 refuses the
// GangScheduling gate that 1.36 needs, and serves v1beta1 where 1.36 serves v1alpha2.
func TestWorkloadAPIOf(t *testing.T) {
	w, err := WorkloadAPIOf(cluster.Release{Minor: 37, Version: "v1.37.2"})
	require.NoError(t, err)
	require.Equal(t, "v1beta1", w.Version)
	require.Contains(t, w.RuntimeConfig, "scheduling.k8s.io/v1beta1=true")
	require.NotContains(t, w.SchedulerGates, "GangScheduling")
	require.True(t, w.Composite)

	w, err = WorkloadAPIOf(cluster.Release{Minor: 36, Version: "v1.36.3"})
	require.NoError(t, err)
	require.Equal(t, "v1alpha2", w.Version)
	require.Equal(t, "GenericWorkload=true,GangScheduling=true", w.SchedulerGates)
	require.False(t, w.Composite)

	_, err = WorkloadAPIOf(cluster.Release{Minor: 32, Version: "v1.32.9"})
	require.ErrorContains(t, err, "v1.32.9 serves no PodGroup API lockstep reads")
}
