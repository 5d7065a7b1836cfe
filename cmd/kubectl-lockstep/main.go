// Command kubectl-lockstep is `kubectl lockstep`: what lockstep knows of gangs, team queues and
// nodes, and why a pod waits, read from lockstep's debug address through a port-forward the
// apiserver authorizes. The logic is package inspect; this file is flags and wiring.
package main

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/signal"
	"strings"
	"syscall"
	"time"

	"github.com/spf13/pflag"
	"golang.org/x/term"
	"k8s.io/cli-runtime/pkg/genericclioptions"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"

	"github.com/lockstep-sched/lockstep/inspect"
)

const usage = `kubectl lockstep: what lockstep's gang scheduler knows, read through the apiserver.

Usage:
  kubectl lockstep gangs  [-n NAMESPACE | -A] [-o wide|json|yaml]
  kubectl lockstep queues [-o wide|json|yaml]
  kubectl lockstep nodes  [-o wide|json|yaml]
  kubectl lockstep why POD [-n NAMESPACE] [-o json|yaml]

It port-forwards through the apiserver to the lockstep pod's debug address (127.0.0.1 in the pod),
so you need create and get on pods/portforward in lockstep's namespace, and list on pods.

Flags:
`

// commandTimeout bounds a run whose apiserver or lockstep stopped answering.
const commandTimeout = 2 * time.Minute

type flags struct {
	kube          *genericclioptions.ConfigFlags
	allNamespaces bool
	output        string
	lockstepNS    string
	selector      string
	debugPort     int
	debugURL      string
}

func newFlags(fs *pflag.FlagSet) *flags {
	f := &flags{kube: genericclioptions.NewConfigFlags(true)}
	f.kube.AddFlags(fs)
	fs.BoolVarP(&f.allNamespaces, "all-namespaces", "A", false, "gangs of every namespace")
	fs.StringVarP(&f.output, "output", "o", "", "wide, json or yaml (json and yaml print what lockstep answered)")
	fs.StringVar(&f.lockstepNS, "lockstep-namespace", "", "where the lockstep pod runs; empty looks in every namespace")
	fs.StringVar(&f.selector, "lockstep-selector", inspect.DefaultSelector, "label selector of the lockstep pod (its container must be named \"lockstep\")")
	fs.IntVar(&f.debugPort, "debug-port", 0, "lockstep's debug port inside its pod; 0 reads it from the container's --debug-listen (default 8889)")
	fs.StringVar(&f.debugURL, "debug-url", "", "read lockstep's debug address at this URL (e.g. http://127.0.0.1:8889 on a control-plane node running lockstep beside the scheduler) instead of port-forwarding to its pod")
	return f
}

func main() {
	os.Exit(run())
}

func run() int {
	fs := pflag.NewFlagSet("kubectl-lockstep", pflag.ContinueOnError)
	fs.SortFlags = false
	f := newFlags(fs)
	fs.Usage = func() { fmt.Fprint(os.Stderr, usage+fs.FlagUsages()) }
	if err := fs.Parse(os.Args[1:]); err != nil {
		if errors.Is(err, pflag.ErrHelp) {
			return 0
		}
		fmt.Fprintf(os.Stderr, "error: %v\n", err)
		return 2
	}
	if fs.NArg() == 0 {
		fs.Usage()
		return 2
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	ctx, cancel := context.WithTimeout(ctx, commandTimeout)
	defer cancel()
	if err := f.execute(ctx, fs.Arg(0), fs.Args()[1:]); err != nil {
		fmt.Fprintf(os.Stderr, "error: %v\n", err)
		return 1
	}
	return 0
}

func (f *flags) execute(ctx context.Context, command string, args []string) error {
	req := inspect.Request{Command: command, Args: args, AllNamespaces: f.allNamespaces,
		Output: strings.ToLower(f.output), Width: terminalWidth(), Out: os.Stdout, ErrOut: os.Stderr}
	if err := req.Validate(); err != nil {
		return err
	}
	cfg, err := f.kube.ToRESTConfig()
	if err != nil {
		return fmt.Errorf("reading the kubeconfig: %w", err)
	}
	namespace, _, err := f.kube.ToRawKubeConfigLoader().Namespace()
	if err != nil {
		return fmt.Errorf("reading the namespace from the kubeconfig: %w", err)
	}
	client, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		return err
	}
	req.Namespace = namespace
	return inspect.Run(ctx, req, inspect.Cluster{Client: client, Connect: f.connect(cfg, client), Now: time.Now})
}

// connect finds the lockstep pod and port-forwards to it when a command first needs lockstep.
func (f *flags) connect(cfg *rest.Config, client kubernetes.Interface) func(context.Context) (inspect.Fetcher, func(), error) {
	return func(ctx context.Context) (inspect.Fetcher, func(), error) {
		if f.debugURL != "" {
			return inspect.Direct{URL: f.debugURL}, func() {}, nil
		}
		finder := inspect.Finder{Client: client, Namespace: f.lockstepNS, Selector: f.selector, Port: f.debugPort}
		target, err := finder.Find(ctx)
		if err != nil {
			return nil, nil, err
		}
		tunnel, err := inspect.Open(cfg, target)
		if err != nil {
			return nil, nil, err
		}
		return tunnel, func() { _ = tunnel.Close() }, nil
	}
}

// terminalWidth is stdout's width, so that REASON fits the line; 0 when stdout is no terminal.
func terminalWidth() int {
	fd := int(os.Stdout.Fd())
	if !term.IsTerminal(fd) {
		return 0
	}
	w, _, err := term.GetSize(fd)
	if err != nil {
		return 0
	}
	return w
}
