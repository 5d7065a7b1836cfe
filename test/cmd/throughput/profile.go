package main

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"net/http"
	"os/exec"
	"path/filepath"
	"strings"

	"k8s.io/client-go/rest"

	"github.com/lockstep-sched/lockstep/test/lib/procstat"
)

// profiler takes CPU profiles of the scheduler, lockstep and kube-apiserver over the first seconds
// of a phase, through their /debug/pprof/profile endpoints, into dir. A nil *profiler takes none.
type profiler struct {
	dir     string
	seconds int
	files   []string
	client  *http.Client
	// clients are those of processes that want credentials, by name (the apiserver).
	clients map[string]*http.Client
}

func newProfiler(dir string, seconds int, apiserver *rest.Config) (*profiler, error) {
	// The schedulers serve on loopback with a certificate they generated at start-up.
	tr := &http.Transport{TLSClientConfig: &tls.Config{InsecureSkipVerify: true}} //nolint:gosec // see above
	api, err := rest.HTTPClientFor(apiserver)
	if err != nil {
		return nil, err
	}
	return &profiler{dir: dir, seconds: seconds, client: &http.Client{Transport: tr}, clients: map[string]*http.Client{apiserverProfile: api}}, nil
}

// apiserverProfile names kube-apiserver's profiles.
const apiserverProfile = "kube-apiserver"

// profiles in flight; wait blocks until all are written.
type inflight []<-chan error

// start begins one profile per named URL (base URL of a process serving /debug/pprof/), written
// to dir/<prefix>-<name>.pprof.
func (p *profiler) start(ctx context.Context, prefix string, urls map[string]string) inflight {
	if p == nil {
		return nil
	}
	var out inflight
	for name, url := range urls {
		if url == "" {
			continue
		}
		file := filepath.Join(p.dir, prefix+"-"+name+".pprof")
		p.files = append(p.files, file)
		client := p.client
		if c, ok := p.clients[name]; ok {
			client = c
		}
		out = append(out, p.fetch(ctx, client, url, file))
	}
	return out
}

func (p *profiler) fetch(ctx context.Context, client *http.Client, url, file string) <-chan error {
	done := make(chan error, 1)
	go func() { done <- procstat.CPUProfile(ctx, client, url, p.seconds, file) }()
	return done
}

// wait blocks until every profile is written and returns their errors.
func (f inflight) wait() error {
	var errs []error
	for _, done := range f {
		errs = append(errs, <-done)
	}
	return errors.Join(errs...)
}

// printTop prints, for every profile taken, `go tool pprof -top`: the functions that used the most
// CPU themselves, then the same by cumulative time, which names the work they were called for.
func (p *profiler) printTop() {
	if p == nil {
		return
	}
	for _, file := range p.files {
		fmt.Printf("\n--- %s ---\n", file)
		for _, args := range [][]string{{"-nodecount=10"}, {"-cum", "-nodecount=25"}} {
			cmd := exec.Command("go", append([]string{"tool", "pprof", "-top"}, append(args, file)...)...)
			out, err := cmd.Output()
			if err != nil {
				fmt.Printf("go tool pprof: %v\n", err)
				continue
			}
			fmt.Print(skipHeader(string(out)))
		}
	}
}

// skipHeader drops pprof's preamble (file, build ID, type, time) but keeps the totals line.
func skipHeader(out string) string {
	if i := strings.Index(out, "Duration:"); i >= 0 {
		return out[i:]
	}
	return out
}
