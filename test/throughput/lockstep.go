package main

import (
	"bufio"
	"context"
	"fmt"
	"net/http"
	"path/filepath"
	"strconv"
	"strings"

	"github.com/lockstep-sched/lockstep/test/cluster"
	"github.com/lockstep-sched/lockstep/test/harness"
)

// startLockstep runs the lockstep binary with the shipped Deployment's arguments (the sidecar
// configuration and --bind-wait=8s; client rate limits left at their defaults) and the admin
// kubeconfig, then extra, and waits until it is ready.
func startLockstep(ctx context.Context, c *cluster.Cluster, bin, schedulerConfig string, profiling bool, extra []string) (*harness.Lockstep, error) {
	port, err := cluster.FreePort()
	if err != nil {
		return nil, err
	}
	args := []string{"--kubeconfig", c.AdminKubeconfig, "--scheduler-config", schedulerConfig, "--bind-wait=8s"}
	if profiling {
		args = append(args, "--profiling")
	}
	args = append(args, extra...)
	ls := harness.NewLockstep(bin, filepath.Join(c.WorkDir, "lockstep.log"), port, args...)
	if err := ls.Start(ctx); err != nil {
		return nil, err
	}
	return ls, nil
}

// committedBinds sums lockstep_binds_total{result="committed"} over its kinds, from /metrics.
func committedBinds(ctx context.Context, url string) (int, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, url+"/metrics", nil)
	if err != nil {
		return 0, err
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return 0, err
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return 0, fmt.Errorf("lockstep /metrics: %s", resp.Status)
	}
	total := 0.0
	sc := bufio.NewScanner(resp.Body)
	sc.Buffer(make([]byte, 64<<10), 1<<20)
	for sc.Scan() {
		line := sc.Text()
		if !strings.HasPrefix(line, "lockstep_binds_total{") || !strings.Contains(line, `result="committed"`) {
			continue
		}
		v, err := strconv.ParseFloat(line[strings.LastIndexByte(line, ' ')+1:], 64)
		if err != nil {
			return 0, fmt.Errorf("lockstep /metrics: %q: %w", line, err)
		}
		total += v
	}
	return int(total), sc.Err()
}
