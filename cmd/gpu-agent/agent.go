package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"log/slog"
	"os/exec"
	"strings"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	corev1client "k8s.io/client-go/kubernetes/typed/core/v1"

	"github.com/lockstep-sched/lockstep/gpu"
	"github.com/lockstep-sched/lockstep/wellknown"
)

// fieldManager names gpu-agent in the node's managedFields.
const fieldManager = "lockstep-gpu-agent"

// topoRunner returns the output of `nvidia-smi topo -m`. It is a function so that tests can
// stand a fixture in for the real command.
type topoRunner func(ctx context.Context) ([]byte, error)

// agent keeps one node's wellknown.AnnotationGPUTopology annotation in line with what nvidia-smi
// reports.
type agent struct {
	nodes    corev1client.NodeInterface
	nodeName string
	topo     topoRunner
	log      *slog.Logger
}

// sync reads the topology and patches the node when its annotation differs. On any error the
// annotation is left alone: a stale but valid topology serves the scheduler better than none.
func (a *agent) sync(ctx context.Context) (patched bool, err error) {
	out, err := a.topo(ctx)
	if err != nil {
		return false, err
	}
	t, err := gpu.ParseNvidiaSMI(bytes.NewReader(out))
	if err != nil {
		return false, err
	}
	want := t.Annotation(gpu.AnnotationSourceNvidiaSMI)

	node, err := a.nodes.Get(ctx, a.nodeName, metav1.GetOptions{})
	if err != nil {
		return false, fmt.Errorf("reading node %s: %w", a.nodeName, err)
	}
	if node.Annotations[wellknown.AnnotationGPUTopology] == want {
		return false, nil
	}
	// A merge patch of this one key cannot clobber annotations other controllers write
	// concurrently, and needs no resourceVersion round trip.
	patch, err := json.Marshal(map[string]any{
		"metadata": map[string]any{"annotations": map[string]string{wellknown.AnnotationGPUTopology: want}},
	})
	if err != nil {
		return false, fmt.Errorf("building patch: %w", err)
	}
	if _, err := a.nodes.Patch(ctx, a.nodeName, types.MergePatchType, patch, metav1.PatchOptions{FieldManager: fieldManager}); err != nil {
		return false, fmt.Errorf("patching node %s: %w", a.nodeName, err)
	}
	a.log.Info("updated GPU topology annotation", "node", a.nodeName, "gpus", t.Len(), "islands", len(t.Islands()))
	return true, nil
}

// Retry delays after a failed sync: quick at first, since a failure on start-up is often the
// driver still loading, then backing off to the regular interval.
const (
	firstRetry = 10 * time.Second
	maxRetry   = 5 * time.Minute
)

// run syncs now and then every interval until ctx is done. Failures are logged and retried
// with exponential backoff, never longer than interval. after is time.After outside tests.
func (a *agent) run(ctx context.Context, interval time.Duration, after func(time.Duration) <-chan time.Time) {
	retry := firstRetry
	for {
		wait := interval
		if _, err := a.sync(ctx); err != nil {
			if ctx.Err() != nil {
				return
			}
			wait = min(retry, interval)
			a.log.Error("GPU topology sync failed", "node", a.nodeName, "err", err, "retryIn", wait)
			retry = min(2*retry, maxRetry)
		} else {
			retry = firstRetry
		}
		select {
		case <-ctx.Done():
			return
		case <-after(wait):
		}
	}
}

// nvidiaSMI runs `path topo -m`, giving up after timeout: nvidia-smi can hang on a GPU that
// has fallen off the bus, and a hung agent would never retry.
func nvidiaSMI(path string, timeout time.Duration) topoRunner {
	return func(ctx context.Context) ([]byte, error) {
		ctx, cancel := context.WithTimeout(ctx, timeout)
		defer cancel()
		var stdout, stderr bytes.Buffer
		cmd := exec.CommandContext(ctx, path, "topo", "-m")
		cmd.Stdout, cmd.Stderr = &stdout, &stderr
		err := cmd.Run()
		switch {
		case errors.Is(err, fs.ErrNotExist) && isExecutable(path):
			// The kernel reports ENOENT for a missing ELF interpreter too: the runtime-mounted
			// nvidia-smi is linked against glibc, which static-only images lack.
			return nil, fmt.Errorf("%s is there but cannot be started (%w); it is dynamically linked, so gpu-agent's image must provide glibc", path, err)
		case errors.Is(err, exec.ErrNotFound) || errors.Is(err, fs.ErrNotExist):
			return nil, fmt.Errorf("%s not found: gpu-agent needs the NVIDIA container runtime to mount nvidia-smi into its container "+
				"(runtimeClassName: nvidia, NVIDIA_VISIBLE_DEVICES=all, NVIDIA_DRIVER_CAPABILITIES=utility) or --nvidia-smi pointing at it: %w", path, err)
		case errors.Is(ctx.Err(), context.DeadlineExceeded):
			return nil, fmt.Errorf("%s topo -m did not finish within %v", path, timeout)
		case err != nil:
			msg := strings.TrimSpace(stderr.String())
			if msg == "" {
				msg = strings.TrimSpace(stdout.String()) // nvidia-smi prints some failures on stdout
			}
			return nil, fmt.Errorf("%s topo -m: %w: %s", path, err, msg)
		}
		return stdout.Bytes(), nil
	}
}

func isExecutable(path string) bool {
	_, err := exec.LookPath(path)
	return err == nil
}
