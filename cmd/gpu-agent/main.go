// Command gpu-agent runs on every GPU node, reads the GPU interconnect topology with
// `nvidia-smi topo -m` and publishes it on its own Node object in the lockstep.dev/gpu-topology
// annotation, where the lockstep scheduler extender reads it. See docs/gpu-topology.md.
//
//	gpu-agent --node-name $(NODE_NAME) [--kubeconfig FILE] [--nvidia-smi PATH] [--interval 10m] [--once]
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"os"
	"os/signal"
	"syscall"
	"time"

	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"
)

type options struct {
	nodeName   string
	kubeconfig string
	nvidiaSMI  string
	interval   time.Duration
	timeout    time.Duration
	once       bool
}

func parseFlags(args []string, getenv func(string) string, output io.Writer) (options, error) {
	var o options
	fs := flag.NewFlagSet("gpu-agent", flag.ContinueOnError)
	fs.SetOutput(output)
	fs.StringVar(&o.nodeName, "node-name", getenv("NODE_NAME"), "name of the Node this agent runs on (default $NODE_NAME)")
	fs.StringVar(&o.kubeconfig, "kubeconfig", "", "kubeconfig file; in-cluster configuration when empty")
	fs.StringVar(&o.nvidiaSMI, "nvidia-smi", "nvidia-smi", "nvidia-smi binary, looked up in $PATH unless it contains a slash")
	fs.DurationVar(&o.interval, "interval", 10*time.Minute, "how often to re-read the topology")
	fs.DurationVar(&o.timeout, "nvidia-smi-timeout", time.Minute, "how long nvidia-smi may run")
	fs.BoolVar(&o.once, "once", false, "update the annotation once and exit; the exit status reports failure")
	if err := fs.Parse(args); err != nil {
		return o, err
	}
	switch {
	case fs.NArg() > 0:
		return o, fmt.Errorf("unexpected arguments: %q", fs.Args())
	case o.nodeName == "":
		return o, errors.New("--node-name is required (the DaemonSet passes it from the downward API as $NODE_NAME)")
	case o.interval <= 0:
		return o, errors.New("--interval must be positive")
	case o.timeout <= 0:
		return o, errors.New("--nvidia-smi-timeout must be positive")
	}
	return o, nil
}

func main() { os.Exit(run()) }

// run is main with an exit status, so that deferred cleanup runs before the process exits.
func run() int {
	log := slog.New(slog.NewTextHandler(os.Stderr, nil))
	o, err := parseFlags(os.Args[1:], os.Getenv, os.Stderr)
	switch {
	case errors.Is(err, flag.ErrHelp):
		return 0
	case err != nil:
		log.Error("invalid command line", "err", err)
		return 2
	}
	cfg, err := restConfig(o.kubeconfig)
	if err != nil {
		log.Error("loading Kubernetes client configuration", "err", err)
		return 1
	}
	client, err := kubernetes.NewForConfig(rest.AddUserAgent(cfg, "lockstep-gpu-agent"))
	if err != nil {
		log.Error("creating Kubernetes client", "err", err)
		return 1
	}
	a := &agent{nodes: client.CoreV1().Nodes(), nodeName: o.nodeName, topo: nvidiaSMI(o.nvidiaSMI, o.timeout), log: log}

	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGINT, syscall.SIGTERM)
	defer stop()
	if o.once {
		if _, err := a.sync(ctx); err != nil {
			log.Error("GPU topology sync failed", "node", o.nodeName, "err", err)
			return 1
		}
		return 0
	}
	log.Info("gpu-agent started", "node", o.nodeName, "interval", o.interval)
	a.run(ctx, o.interval, time.After)
	return 0
}

func restConfig(kubeconfig string) (*rest.Config, error) {
	if kubeconfig == "" {
		return rest.InClusterConfig()
	}
	return clientcmd.BuildConfigFromFlags("", kubeconfig)
}
