// Command extender runs lockstep: a kube-scheduler extender that gang-schedules pods
// all-or-nothing. See the README for how kube-scheduler is configured to call it.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"net/http"
	"os"
	"os/signal"
	"syscall"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"k8s.io/klog/v2"
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
	srv := &http.Server{
		Addr:              opts.listen,
		Handler:           app.handler,
		ReadHeaderTimeout: 10 * time.Second,
		// A held bind answers within bind-wait; anything slower than the scheduler's own timeout
		// is talking to nobody.
		WriteTimeout: opts.httpTimeout + 5*time.Second,
	}
	errc := make(chan error, 1)
	go func() {
		klog.InfoS("lockstep listening", "address", opts.listen, "bindWait", opts.bindWait, "schedulerHTTPTimeout", opts.httpTimeout, "defaultWaitingTime", opts.defaultWaitingTime)
		if err := srv.ListenAndServe(); err != nil && !errors.Is(err, http.ErrServerClosed) {
			errc <- fmt.Errorf("serving on %s: %w", opts.listen, err)
		}
	}()
	go app.start(ctx)

	select {
	case <-ctx.Done():
	case err := <-errc:
		return err
	}
	shutdownCtx, cancel := context.WithTimeout(context.Background(), opts.bindWait+time.Second)
	defer cancel()
	return srv.Shutdown(shutdownCtx)
}
