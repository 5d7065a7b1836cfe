package main

import (
	"context"
	"path/filepath"

	"github.com/lockstep-sched/lockstep/test/lib/cluster"
	"github.com/lockstep-sched/lockstep/test/lib/harness"
)

// startLockstep runs the mode's lockstep binary with the shipped Deployment's arguments (the
// mode's scheduler configuration and --bind-wait=25s; client rate limits left at their defaults)
// and the admin kubeconfig, then extra, and waits until it is ready. Each mode logs to a file of
// its own, so that this tree's lockstep and the baseline's are told apart.
func startLockstep(ctx context.Context, c *cluster.Cluster, m mode, profiling bool, extra []string) (*harness.Lockstep, error) {
	port, err := cluster.FreePort()
	if err != nil {
		return nil, err
	}
	debugPort, err := cluster.FreePort()
	if err != nil {
		return nil, err
	}
	args := []string{"--kubeconfig", c.AdminKubeconfig, "--scheduler-config", m.config, "--bind-wait=25s"}
	if profiling {
		args = append(args, "--profiling")
	}
	args = append(args, extra...)
	ls := harness.NewLockstep(m.lockstepBin, filepath.Join(c.WorkDir, m.key+".log"), port, debugPort, args...)
	if err := ls.Start(ctx); err != nil {
		return nil, err
	}
	return ls, nil
}
