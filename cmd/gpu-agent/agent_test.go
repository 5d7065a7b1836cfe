package main

import (
	"context"
	"encoding/json"
	"errors"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/kubernetes/fake"
	k8stesting "k8s.io/client-go/testing"

	"github.com/lockstep-sched/lockstep/gpu"
	"github.com/lockstep-sched/lockstep/wellknown"
)

const nodeName = "gpu-node-1"

func fixture(t *testing.T, name string) []byte {
	t.Helper()
	b, err := os.ReadFile(filepath.Join("..", "..", "gpu", "testdata", name))
	require.NoError(t, err)
	return b
}

// fromFixture stands in for nvidia-smi, printing a recorded `nvidia-smi topo -m`.
func fromFixture(out []byte) topoRunner {
	return func(context.Context) ([]byte, error) { return out, nil }
}

func wantAnnotation(t *testing.T, out []byte) string {
	t.Helper()
	topo, err := gpu.ParseNvidiaSMI(strings.NewReader(string(out)))
	require.NoError(t, err)
	return topo.Annotation(gpu.AnnotationSourceNvidiaSMI)
}

func newNode(annotations map[string]string) *corev1.Node {
	return &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: nodeName, Annotations: annotations}}
}

func quietLog() *slog.Logger { return slog.New(slog.NewTextHandler(io.Discard, nil)) }

func TestSync(t *testing.T) {
	dgx1 := fixture(t, "dgx1-v100.txt")
	h100 := fixture(t, "h100-nv18.txt")
	current := wantAnnotation(t, dgx1)
	other := map[string]string{"example.com/keep": "me"}

	tests := []struct {
		name      string
		node      *corev1.Node
		topo      topoRunner
		reactor   k8stesting.ReactionFunc // on patch
		patched   bool
		errSubstr string
		want      map[string]string // the node's annotations afterwards
	}{
		{
			name:    "adds the annotation",
			node:    newNode(other),
			topo:    fromFixture(dgx1),
			patched: true,
			want:    map[string]string{"example.com/keep": "me", wellknown.AnnotationGPUTopology: current},
		},
		{
			name:    "node without annotations",
			node:    newNode(nil),
			topo:    fromFixture(dgx1),
			patched: true,
			want:    map[string]string{wellknown.AnnotationGPUTopology: current},
		},
		{
			name:    "replaces a stale annotation",
			node:    newNode(map[string]string{wellknown.AnnotationGPUTopology: current, "example.com/keep": "me"}),
			topo:    fromFixture(h100),
			patched: true,
			want:    map[string]string{"example.com/keep": "me", wellknown.AnnotationGPUTopology: wantAnnotation(t, h100)},
		},
		{
			name: "up to date: no patch",
			node: newNode(map[string]string{wellknown.AnnotationGPUTopology: current}),
			topo: fromFixture(dgx1),
			want: map[string]string{wellknown.AnnotationGPUTopology: current},
		},
		{
			name:      "nvidia-smi missing leaves the annotation alone",
			node:      newNode(map[string]string{wellknown.AnnotationGPUTopology: current}),
			topo:      nvidiaSMI(filepath.Join(t.TempDir(), "nvidia-smi"), time.Minute),
			errSubstr: "nvidia-smi not found: gpu-agent needs the NVIDIA container runtime",
			want:      map[string]string{wellknown.AnnotationGPUTopology: current},
		},
		{
			name:      "unparsable output names the line",
			node:      newNode(map[string]string{wellknown.AnnotationGPUTopology: current}),
			topo:      fromFixture([]byte("\tGPU0\tGPU1\nGPU0\t X \tNV2\nGPU1\tNV3\t X \n")),
			errSubstr: "nvidia-smi topo -m output, line 3: GPU1 to GPU0 is NV3, but line 2 has GPU0 to GPU1 as NV2",
			want:      map[string]string{wellknown.AnnotationGPUTopology: current},
		},
		{
			name:      "patch refused",
			node:      newNode(nil),
			topo:      fromFixture(dgx1),
			reactor:   func(k8stesting.Action) (bool, runtime.Object, error) { return true, nil, errors.New("forbidden") },
			errSubstr: "patching node gpu-node-1: forbidden",
			want:      nil,
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			client := fake.NewClientset(tt.node)
			if tt.reactor != nil {
				client.PrependReactor("patch", "nodes", tt.reactor)
			}
			a := &agent{nodes: client.CoreV1().Nodes(), nodeName: nodeName, topo: tt.topo, log: quietLog()}

			patched, err := a.sync(t.Context())
			if tt.errSubstr != "" {
				require.Error(t, err)
				assert.Contains(t, err.Error(), tt.errSubstr)
			} else {
				require.NoError(t, err)
			}
			assert.Equal(t, tt.patched, patched)

			node, err := client.CoreV1().Nodes().Get(t.Context(), nodeName, metav1.GetOptions{})
			require.NoError(t, err)
			assert.Equal(t, tt.want, node.Annotations)

			var patches []k8stesting.PatchAction
			for _, action := range client.Actions() {
				if p, ok := action.(k8stesting.PatchAction); ok {
					patches = append(patches, p)
				}
			}
			if !tt.patched {
				if tt.reactor == nil {
					assert.Empty(t, patches)
				}
				return
			}
			require.Len(t, patches, 1)
			assert.Equal(t, types.MergePatchType, patches[0].GetPatchType())
			var body map[string]any
			require.NoError(t, json.Unmarshal(patches[0].GetPatch(), &body))
			assert.Equal(t, map[string]any{"metadata": map[string]any{"annotations": map[string]any{wellknown.AnnotationGPUTopology: tt.want[wellknown.AnnotationGPUTopology]}}},
				body, "the patch touches only the topology annotation")
		})
	}
}

func TestSyncNodeMissing(t *testing.T) {
	a := &agent{nodes: fake.NewClientset().CoreV1().Nodes(), nodeName: nodeName, topo: fromFixture(fixture(t, "t4-2gpu.txt")), log: quietLog()}
	_, err := a.sync(t.Context())
	require.Error(t, err)
	assert.Contains(t, err.Error(), `reading node gpu-node-1: nodes "gpu-node-1" not found`)
}

// The annotation gpu-agent writes is what the scheduler side reads back.
func TestSyncedAnnotationReadsBack(t *testing.T) {
	client := fake.NewClientset(newNode(nil))
	a := &agent{nodes: client.CoreV1().Nodes(), nodeName: nodeName, topo: fromFixture(fixture(t, "a100-nvswitch.txt")), log: quietLog()}
	_, err := a.sync(t.Context())
	require.NoError(t, err)
	node, err := client.CoreV1().Nodes().Get(t.Context(), nodeName, metav1.GetOptions{})
	require.NoError(t, err)
	topo, source, err := gpu.FromNode(node)
	require.NoError(t, err)
	assert.Equal(t, gpu.SourceNvidiaSMI, source)
	assert.Equal(t, 8, topo.Len())
	assert.Equal(t, [][]int{{0, 1, 2, 3, 4, 5, 6, 7}}, topo.Islands())
}

func TestRunRetriesWithBackoff(t *testing.T) {
	fail := errors.New("driver not loaded")
	results := []error{fail, fail, nil, fail}
	runs := 0
	topo := func(context.Context) ([]byte, error) {
		err := results[runs]
		runs++
		if err != nil {
			return nil, err
		}
		return fixture(t, "t4-2gpu.txt"), nil
	}
	client := fake.NewClientset(newNode(nil))
	a := &agent{nodes: client.CoreV1().Nodes(), nodeName: nodeName, topo: topo, log: quietLog()}

	// after hands each requested delay to the test, which answers by firing the timer or, at
	// the end, by cancelling; the loop never waits on a real clock.
	ctx, cancel := context.WithCancel(t.Context())
	waits := make(chan time.Duration)
	fire := make(chan time.Time)
	after := func(d time.Duration) <-chan time.Time {
		waits <- d
		return fire
	}
	done := make(chan struct{})
	go func() {
		defer close(done)
		a.run(ctx, 15*time.Minute, after)
	}()

	want := []time.Duration{firstRetry, 2 * firstRetry, 15 * time.Minute, firstRetry}
	for i, w := range want {
		assert.Equal(t, w, <-waits, "wait %d", i)
		if i < len(want)-1 {
			fire <- time.Time{}
		}
	}
	cancel()
	<-done
	assert.Equal(t, len(results), runs)
	node, err := client.CoreV1().Nodes().Get(t.Context(), nodeName, metav1.GetOptions{})
	require.NoError(t, err)
	assert.Contains(t, node.Annotations, wellknown.AnnotationGPUTopology)
}

func TestRunBackoffIsCappedByInterval(t *testing.T) {
	a := &agent{
		nodes: fake.NewClientset().CoreV1().Nodes(), nodeName: nodeName, log: quietLog(),
		topo: func(context.Context) ([]byte, error) { return nil, errors.New("no GPUs") },
	}
	ctx, cancel := context.WithCancel(t.Context())
	waits := make(chan time.Duration)
	fire := make(chan time.Time)
	done := make(chan struct{})
	go func() {
		defer close(done)
		a.run(ctx, 25*time.Second, func(d time.Duration) <-chan time.Time { waits <- d; return fire })
	}()
	for _, w := range []time.Duration{10 * time.Second, 20 * time.Second, 25 * time.Second, 25 * time.Second} {
		assert.Equal(t, w, <-waits)
		fire <- time.Time{}
	}
	<-waits
	cancel()
	<-done
}

func TestNvidiaSMIRunner(t *testing.T) {
	dir := t.TempDir()
	script := func(name, body string) string { return writeFile(t, dir, name, "#!/bin/sh\n"+body) }
	fixturePath, err := filepath.Abs(filepath.Join("..", "..", "gpu", "testdata", "t4-2gpu.txt"))
	require.NoError(t, err)
	tests := []struct {
		name      string
		path      string
		errSubstr string
	}{
		{"prints the matrix", script("ok", `[ "$1 $2" = "topo -m" ] || exit 3; cat "`+fixturePath+`"`), ""},
		{"driver failure", script("fails", "echo 'NVIDIA-SMI has failed because it could not communicate with the NVIDIA driver.'; exit 9"),
			"exit status 9: NVIDIA-SMI has failed because it could not communicate with the NVIDIA driver."},
		{"stderr preferred", script("stderr", "echo noise; echo 'Failed to initialize NVML' >&2; exit 1"), "exit status 1: Failed to initialize NVML"},
		{"not on PATH", "nvidia-smi-is-not-installed-here", "nvidia-smi-is-not-installed-here not found: gpu-agent needs the NVIDIA container runtime"},
		{"no such file", filepath.Join(dir, "missing"), "missing not found"},
		// What a glibc-linked nvidia-smi does in a static-only image: exec fails with ENOENT
		// although the file is there.
		{"interpreter missing", writeFile(t, dir, "nolibc", "#!/lib64/no-such-loader\n"), "nolibc is there but cannot be started"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			out, err := nvidiaSMI(tt.path, time.Minute)(t.Context())
			if tt.errSubstr != "" {
				require.Error(t, err)
				assert.Contains(t, err.Error(), tt.errSubstr)
				return
			}
			require.NoError(t, err)
			assert.Equal(t, fixture(t, "t4-2gpu.txt"), out)
		})
	}
}

func TestParseFlags(t *testing.T) {
	env := func(vars map[string]string) func(string) string { return func(k string) string { return vars[k] } }
	tests := []struct {
		name      string
		args      []string
		env       map[string]string
		want      options
		errSubstr string
	}{
		{
			name: "defaults, node from the environment",
			env:  map[string]string{"NODE_NAME": "n1"},
			want: options{nodeName: "n1", nvidiaSMI: "nvidia-smi", interval: 10 * time.Minute, timeout: time.Minute},
		},
		{
			name: "all flags",
			args: []string{"--node-name", "n2", "--kubeconfig", "/k", "--nvidia-smi", "/usr/bin/nvidia-smi", "--interval", "1h", "--nvidia-smi-timeout", "5s", "--once"},
			env:  map[string]string{"NODE_NAME": "ignored"},
			want: options{nodeName: "n2", kubeconfig: "/k", nvidiaSMI: "/usr/bin/nvidia-smi", interval: time.Hour, timeout: 5 * time.Second, once: true},
		},
		{name: "no node name", errSubstr: "--node-name is required"},
		{name: "zero interval", args: []string{"--node-name", "n", "--interval", "0s"}, errSubstr: "--interval must be positive"},
		{name: "zero timeout", args: []string{"--node-name", "n", "--nvidia-smi-timeout", "0s"}, errSubstr: "--nvidia-smi-timeout must be positive"},
		{name: "stray argument", args: []string{"--node-name", "n", "extra"}, errSubstr: `unexpected arguments: ["extra"]`},
		{name: "unknown flag", args: []string{"--bogus"}, errSubstr: "flag provided but not defined: -bogus"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := parseFlags(tt.args, env(tt.env), io.Discard)
			if tt.errSubstr != "" {
				require.Error(t, err)
				assert.Contains(t, err.Error(), tt.errSubstr)
				return
			}
			require.NoError(t, err)
			assert.Equal(t, tt.want, got)
		})
	}
}

func writeFile(t *testing.T, dir, name, content string) string {
	t.Helper()
	path := filepath.Join(dir, name)
	require.NoError(t, os.WriteFile(path, []byte(content), 0o755))
	return path
}
