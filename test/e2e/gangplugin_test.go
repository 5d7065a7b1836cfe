package e2e

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/lockstep-sched/lockstep/test/lib/builders"
	"github.com/lockstep-sched/lockstep/test/lib/cluster"
	"github.com/lockstep-sched/lockstep/test/lib/harness"
)

// kube-scheduler (1.36 and 1.37) schedules Kubernetes' PodGroups itself when its GenericWorkload
// gate is on: a group's pods go through one cycle of their own (lockstep's filter still asked
// about each), and kube-scheduler writes the group's condition from that cycle
// (PodGroupInitiallyScheduled in 1.37, PodGroupScheduled in 1.36). Its GangScheduling plugin (on
// with GenericWorkload in 1.37, behind a gate of its own in 1.36) also holds the pods at Permit, up
// to a fixed 5 minutes, until minCount are placed; the shipped configurations disable it so that
// lockstep's waiting time and rules alone apply. These tests show, with the gates on, that groups
// still bind whole or not at all with the plugin disabled or left on, and that lockstep then
// leaves the condition to kube-scheduler rather than write over it on every cycle.
func TestBesideKubeSchedulersWorkloadScheduling(t *testing.T) {
	shipped := filepath.Join(env.root, harness.SchedulerConfig)
	for _, tc := range []struct{ name, config string }{
		{"GangScheduling disabled, as shipped", shipped},
		{"GangScheduling left on", configWithGangPlugin(t, shipped)},
	} {
		t.Run(tc.name, func(t *testing.T) {
			withSchedulerGates(t, tc.config)
			s := newScenario(t, 2, 4)
			s.gangsOfThree()
			s.eventually(30*time.Second, "lockstep to leave the groups' condition to kube-scheduler", func() bool {
				return lockstepLogged("Another scheduler writes this PodGroup's status", `podGroup="`+s.ns+`/train"`, `writer="kube-scheduler"`)
			})
			s.eventually(30*time.Second, "the fitting group's condition True and the big one's False", func() bool {
				train, big := s.podGroupCondition("train"), s.podGroupCondition("big")
				return train != nil && train.Status == metav1.ConditionTrue && big != nil && big.Status == metav1.ConditionFalse
			})
		})
	}
}

// lockstepLogged reports whether one line of lockstep's log holds every part.
func lockstepLogged(parts ...string) bool {
	for _, line := range strings.Split(env.lockstep.Tail(200000), "\n") {
		all := true
		for _, p := range parts {
			all = all && strings.Contains(line, p)
		}
		if all {
			return true
		}
	}
	return false
}

// gangsOfThree creates two PodGroups of 3 on the scenario's 2 nodes x 4 GPUs: "big" (4 GPUs a
// pod) cannot fit and binds nothing; "train" (2 GPUs a pod) fits and binds whole.
func (s *scenario) gangsOfThree() {
	s.t.Helper()
	for _, g := range []struct {
		name string
		gpus int64
	}{{"big", 4}, {"train", 2}} {
		s.createPodGroup(g.name, 3)
		for i := range 3 {
			s.create(builders.Pod("", g.name+"-"+string(rune('0'+i))).CPU("100m").GPU(g.gpus).PodGroup(g.name).Obj())
		}
	}
	s.eventually(60*time.Second, "the fitting group bound whole", func() bool { return s.boundIn("train-") == 3 })
	s.binds.assertNeverPartial(s.t, "train", 3)
	s.eventually(30*time.Second, "lockstep to say why the big group waits", func() bool {
		return s.waitsFor("big", "3 members need 12 nvidia.com/gpu") // what is free depends on which group the scheduler tried first
	})
	require.Zero(s.t, s.boundIn("big-"), "no member of a group that does not fit may bind")
}

// withSchedulerGates runs the rest of the test with kube-scheduler's gang scheduling gates on
// and config, and the suite's scheduler back as it was afterwards.
func withSchedulerGates(t *testing.T, config string) {
	t.Helper()
	restartScheduler(t, cluster.SchedulerOptions{ConfigPath: config, ExtenderURL: env.lockstep.URL,
		FeatureGates: workloadGates(t)})
	t.Cleanup(func() {
		restartScheduler(t, cluster.SchedulerOptions{ConfigPath: filepath.Join(env.root, harness.SchedulerConfig), ExtenderURL: env.lockstep.URL})
	})
}

// workloadGates turn on kube-scheduler's own gang scheduling on this release.
func workloadGates(t *testing.T) string {
	t.Helper()
	nativeAPI(t)
	return env.workload.SchedulerGates
}

func restartScheduler(t *testing.T, opts cluster.SchedulerOptions) {
	t.Helper()
	env.cluster.StopScheduler()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	require.NoError(t, env.cluster.StartSchedulerWith(ctx, opts))
}

// configWithGangPlugin is the shipped configuration with the plugin's disabling taken out, as a
// user's own configuration might be.
func configWithGangPlugin(t *testing.T, shipped string) string {
	t.Helper()
	raw, err := os.ReadFile(shipped)
	require.NoError(t, err)
	stanza := "    plugins:\n      multiPoint:\n        disabled:\n          - name: GangScheduling\n"
	require.Contains(t, string(raw), stanza)
	path := filepath.Join(t.TempDir(), "with-gang-plugin.yaml")
	require.NoError(t, os.WriteFile(path, []byte(strings.ReplaceAll(string(raw), stanza, "")), 0o644))
	return path
}
