package cluster

import (
	"context"
	"syscall"
)

// Replica is a kube-scheduler started beside the cluster's own (StartReplica): one of several
// schedulers electing a leader, or one whose configuration the test writes whole.
type Replica struct {
	Name string
	p    *process
}

// ReplicaOptions choose what StartReplica runs.
type ReplicaOptions struct {
	// Name names the replica's log (WorkDir/<Name>.log) and its configuration file.
	Name string
	// Config is a KubeSchedulerConfiguration, used as given: the test sets the kubeconfig,
	// leader election and extenders it wants.
	Config []byte
	// Hostname runs the replica in a UTS namespace of its own under this name (this needs root).
	// kube-scheduler's leader identity is <hostname>_<uuid>, and lockstep recognises its own
	// scheduler by that hostname, as the containers of one pod share theirs.
	Hostname string
}

// StartReplica runs a kube-scheduler with opts and returns once its /readyz answers 200. A
// replica waiting for the leader's Lease is ready too: its informers have synced.
func (c *Cluster) StartReplica(ctx context.Context, opts ReplicaOptions) (*Replica, error) {
	if err := checkBinaries(c.BinDir, KubeScheduler); err != nil {
		return nil, err
	}
	p, _, err := c.runScheduler(ctx, schedulerRun{name: opts.Name, binary: KubeScheduler, files: opts.Name, config: opts.Config, hostname: opts.Hostname})
	if err != nil {
		return nil, err
	}
	c.logf("cluster: replica %s ready (pid %d, hostname %q)", opts.Name, p.pid(), opts.Hostname)
	return &Replica{Name: opts.Name, p: p}, nil
}

// startProcessUnder is startProcess, in a new UTS namespace under hostname when one is given:
// a shell sets the name there and then becomes kube-scheduler.
func startProcessUnder(name, binary string, args []string, workDir, hostname string) (*process, error) {
	if hostname == "" {
		return startProcess(name, binary, args, workDir)
	}
	attr, err := newUTSNamespace()
	if err != nil {
		return nil, err
	}
	shArgs := append([]string{"-c", `printf %s "$0" > /proc/sys/kernel/hostname && exec "$@"`, hostname, binary}, args...)
	return startProcessWith(name, "/bin/sh", shArgs, workDir, attr)
}

// Kill ends the replica at once (SIGKILL), as a crashed node would.
func (r *Replica) Kill() {
	if !r.p.exited() {
		_ = syscall.Kill(-r.p.pid(), syscall.SIGKILL)
		<-r.p.done
	}
	r.p.logFile.Close()
}

// Stop ends the replica gracefully; safe after Kill.
func (r *Replica) Stop() { r.p.stop(StopTimeout) }

// LogTail is the last n lines of the replica's log.
func (r *Replica) LogTail(n int) string { return r.p.tail(n) }
