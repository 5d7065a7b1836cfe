package main

import (
	"net"
	"path/filepath"

	"github.com/lockstep-sched/lockstep/test/lib/cluster"
	"github.com/lockstep-sched/lockstep/test/lib/harness"
)

// floorExtender is test/cmd/floorextender's program in bin/ and the name of its row and column.
const floorExtender = "floor-extender"

// floorReadyLine is what test/cmd/floorextender logs once it serves (its ReadyLine).
const floorReadyLine = "floor extender serving"

// floorMode is kube-scheduler (sched, with the shipped configuration) calling the floor extender,
// which answers every verb without deciding anything: what the extender protocol alone costs.
func floorMode(c *cluster.Cluster, root, config string, sched *metered) mode {
	m := mode{key: "floor", label: "kube-scheduler + no-op extender (floor)", sched: sched, config: config}
	addr, err := freeLoopbackAddr()
	if err == nil {
		err = harness.BuildCommand(root, "./test/cmd/floorextender", filepath.Join(c.BinDir, floorExtender), false)
	}
	if err != nil {
		m.unavailable = err
		return m
	}
	m.useExtender("http://" + addr)
	m.companion = newMetered(floorExtender, &component{c: c, binary: floorExtender, ready: floorReadyLine,
		args: []string{"--listen", addr, "--kubeconfig", c.AdminKubeconfig}})
	return m
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
