package main

import (
	"context"
	"path/filepath"

	"github.com/lockstep-sched/lockstep/test/lib/cluster"
	"github.com/lockstep-sched/lockstep/test/lib/harness"
)

// startLockstep runs the lockstep binary with the shipped Deployment's arguments (the sidecar
// configuration and --bind-wait=25s; client rate limits left at their defaults) and the admin
// kubeconfig, then extra, and waits until it is ready.
func startLockstep(ctx context.Context, c *cluster.Cluster, bin, schedulerConfig string, profiling bool, extra []string) (*harness.Lockstep, error) {
	port, err := cluster.FreePort()
	if err != nil {
		return nil, err
	}
	debugPort, err := cluster.FreePort()
	if err != nil {
		return nil, err
	}
	args := []string{"--kubeconfig", c.AdminKubeconfig, "--scheduler-config", schedulerConfig, "--bind-wait=25s"}
	if profiling {
		args = append(args, "--profiling")
	}
	args = append(args, extra...)
	ls := harness.NewLockstep(bin, filepath.Join(c.WorkDir, "lockstep.log"), port, debugPort, args...)
	if err := ls.Start(ctx); err != nil {
		return nil, err
	}
	return ls, nil
}
