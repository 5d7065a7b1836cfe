package main

import (
	"fmt"
	"net"
	"os/exec"
	"path/filepath"

	"github.com/lockstep-sched/lockstep/test/lib/cluster"
)

// floorExtender is test/cmd/floorextender's program in bin/ and the name of its row and column.
const floorExtender = "floor-extender"

// floorReadyLine is what test/cmd/floorextender logs once it serves (its ReadyLine).
const floorReadyLine = "floor extender serving"

// floorMode is kube-scheduler with the shipped configuration calling the floor extender, which
// answers every verb without deciding anything: what the extender protocol alone costs.
func floorMode(c *cluster.Cluster, root, config string, profiling bool) mode {
	m := mode{key: "floor", label: "kube-scheduler + no-op extender (floor)", config: config}
	sched := &kubeScheduler{c: c, opts: cluster.SchedulerOptions{Binary: cluster.KubeScheduler, ConfigPath: config, Profiling: profiling}}
	m.sched = newMetered(cluster.KubeScheduler, sched)
	addr, err := freeLoopbackAddr()
	if err == nil {
		err = buildFloorExtender(root, c.BinDir)
	}
	if err != nil {
		m.unavailable = err
		return m
	}
	sched.opts.ExtenderURL = "http://" + addr
	m.companion = newMetered(floorExtender, &component{c: c, binary: floorExtender, ready: floorReadyLine,
		args: []string{"--listen", addr, "--kubeconfig", c.AdminKubeconfig}})
	return m
}

func buildFloorExtender(root, binDir string) error {
	cmd := exec.Command("go", "build", "-o", filepath.Join(binDir, floorExtender), "./test/cmd/floorextender")
	cmd.Dir = root
	if out, err := cmd.CombinedOutput(); err != nil {
		return fmt.Errorf("building ./test/cmd/floorextender: %w\n%s", err, out)
	}
	return nil
}

// freeLoopbackAddr is a loopback address whose port was free a moment ago.
func freeLoopbackAddr() (string, error) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return "", err
	}
	defer l.Close()
	return l.Addr().String(), nil
}
