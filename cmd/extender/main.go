// Command extender runs lockstep: a kube-scheduler extender that gang-schedules pods
// all-or-nothing. See docs/operating.md for how kube-scheduler is configured to call it.
package main

import (
	"context"
	"flag"
	"fmt"
	"os"
	"os/signal"
	"syscall"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"k8s.io/klog/v2"

	"github.com/lockstep-sched/lockstep/serving"
)

func main() {
	klog.InitFlags(nil)
	opts := defaultOptions()
	opts.register(flag.CommandLine)
	flag.Usage = func() {
		fmt.Fprintf(flag.CommandLine.Output(), "Usage: extender [flags]\n\nlockstep: a kube-scheduler extender that binds a gang of pods all-or-nothing.\n\nFlags:\n")
		flag.PrintDefaults()
	}
	flag.Parse()
	if flag.NArg() > 0 {
		fmt.Fprintf(os.Stderr, "extender: unexpected arguments %q\n", flag.Args())
		os.Exit(2)
	}
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGINT, syscall.SIGTERM)
	defer stop()
	if err := run(ctx, opts); err != nil {
		klog.ErrorS(err, "lockstep stopped")
		klog.Flush()
		os.Exit(1)
	}
	klog.Flush()
}

func run(ctx context.Context, opts options) error {
	if err := opts.validate(); err != nil {
		return err
	}
	opts.tuneGC()
	clients, err := opts.kubeClients()
	if err != nil {
		return err
	}
	reg := prometheus.NewRegistry()
	reg.MustRegister(collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}))

	app, err := newApp(clients, opts, reg)
	if err != nil {
		return err
	}
	servers, err := opts.servers(app)
	if err != nil {
		return err
	}
	// Either server failing stops everything: a lockstep the scheduler cannot reach, or one
	// nobody can look into, should restart rather than limp on.
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	go app.start(ctx)
	errc := make(chan error, len(servers))
	for _, s := range servers {
		go func() {
			errc <- s.Run(ctx, opts.bindWait+time.Second)
			cancel()
		}()
	}
	var first error
	for range servers {
		if err := <-errc; err != nil && first == nil {
			first = err
		}
	}
	return first
}

// servers are the listeners: kube-scheduler's verbs on --listen, what people read on
// --debug-listen, what Prometheus scrapes on --metrics-listen.
func (o *options) servers(a *app) ([]*serving.Server, error) {
	verbs, err := serving.New(serving.Config{
		Name: "extender verbs", Addr: o.listen, Handler: a.handler,
		CertFile: o.tlsCertFile, KeyFile: o.tlsKeyFile, ClientCAFile: o.clientCAFile,
		// A request still arriving when the scheduler gives up on it is talking to nobody; and a
		// held bind answers within bind-wait, so the same bound serves the answer.
		ReadTimeout:  o.httpTimeout,
		WriteTimeout: o.httpTimeout + 5*time.Second,
	})
	if err != nil {
		return nil, err
	}
	out := []*serving.Server{verbs}
	if o.metricsListen != "" {
		metrics, err := serving.New(serving.Config{
			Name: "metrics", Addr: o.metricsListen, Handler: a.metricsHandler,
			// Prometheus' default scrape timeout is 10s; a scrape is one small page.
			ReadTimeout: 10 * time.Second, WriteTimeout: 30 * time.Second,
		})
		if err != nil {
			return nil, err
		}
		out = append(out, metrics)
	}
	if o.debugListen == "" {
		return out, nil
	}
	debug, err := serving.New(serving.Config{
		Name: "debug", Addr: o.debugListen, Handler: a.debugHandler,
		// A CPU profile streams for 30s by default.
		ReadTimeout: 30 * time.Second, WriteTimeout: 2 * time.Minute,
	})
	if err != nil {
		return nil, err
	}
	return append(out, debug), nil
}
