package main

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/tools/cache"
)

// Whole-GPU pods only, in creation order (rows break ties), as bench-packing reads the lists.
func TestReadTracePods(t *testing.T) {
	path := filepath.Join(t.TempDir(), "pods.csv")
	require.NoError(t, os.WriteFile(path, []byte(`name,cpu_milli,memory_mib,num_gpu,gpu_milli,creation_time
a,1000,1024,1,1000,30
b,1000,1024,1,460,10
c,1000,1024,0,0,10
d,1000,1024,8,1000,20
e,1000,1024,2,1000,20
`), 0o644))
	pods, err := readTracePods(path)
	require.NoError(t, err)
	require.Len(t, pods, 3)
	assert.Equal(t, []int{3, 4, 0}, []int{pods[0].row, pods[1].row, pods[2].row})
	assert.Equal(t, []int{8, 2, 1}, []int{pods[0].numGPU, pods[1].numGPU, pods[2].numGPU})

	require.NoError(t, os.WriteFile(path, []byte("name,num_gpu\na,1\n"), 0o644))
	_, err = readTracePods(path)
	assert.ErrorContains(t, err, `no column "gpu_milli"`)
}

// A gang never mixes GPU shapes, and one seed always groups alike.
func TestGroupItems(t *testing.T) {
	var pods []tracePod
	for i, g := range []int{1, 1, 1, 1, 8, 8, 2, 2, 2, 2, 4, 1, 1, 1, 1, 1, 1, 1, 1} {
		pods = append(pods, tracePod{row: i, numGPU: g})
	}
	items := groupItems(pods, 1)
	assert.Equal(t, items, groupItems(pods, 1))
	total := 0
	for i, it := range items {
		assert.Positive(t, it.size)
		for _, p := range pods[total : total+it.size] {
			assert.Equal(t, it.gpus, p.numGPU, "item %d", i)
		}
		total += it.size
	}
	assert.Equal(t, len(pods), total, "every pod is in one item")
	assert.Equal(t, []string{"t0000"}, traceItem{name: "t0000", size: 1}.members())
	assert.Equal(t, []string{"t0001-0", "t0001-1"}, traceItem{name: "t0001", size: 2}.members())
}

func TestFewestNodes(t *testing.T) {
	for _, c := range []struct{ size, gpus, want int }{{2, 1, 1}, {8, 1, 1}, {8, 2, 2}, {3, 4, 2}, {4, 8, 4}} {
		assert.Equal(t, c.want, fewestNodes(traceItem{size: c.size, gpus: c.gpus}, 8), "%d x %d GPU", c.size, c.gpus)
	}
}

// At the stop: GPUs of bound pods, placed gangs and which sit on the fewest nodes, partly bound
// gangs, and the binds of pods that came after the stopping gang.
func TestReplayMeasure(t *testing.T) {
	store := cache.NewStore(cache.MetaNamespaceKeyFunc)
	bound := func(name, node string) {
		require.NoError(t, store.Add(&corev1.Pod{ObjectMeta: metaOf(name), Spec: corev1.PodSpec{NodeName: node}}))
	}
	items := []traceItem{{name: "a", size: 2, gpus: 4}, {name: "b", size: 2, gpus: 4}, {name: "c", size: 4, gpus: 8}, {name: "d", size: 1, gpus: 2}}
	bound("a-0", "n1")
	bound("a-1", "n1") // one node: the fewest
	bound("b-0", "n2")
	bound("b-1", "n3") // placed, on two
	bound("c-0", "n4") // partly bound, and the first gang not placed
	bound("d", "n2")   // arrived after c
	b := &bench{w: workload{nodes: 4, gpusPerNode: 8}, items: items, binds: &bindWatch{store: store, at: map[string]time.Time{}}}
	rp := &replayRun{b: b, next: len(items), pods: 9, stop: 2}
	tr := rp.measure(time.Now())
	assert.Equal(t, 4*4+8+2, tr.allocated)
	assert.Equal(t, 32, tr.capacity)
	assert.Equal(t, 3, tr.gangs)
	assert.Equal(t, 2, tr.placedGangs)
	assert.Equal(t, 1, tr.onFewest)
	assert.Equal(t, 1, tr.partial)
	assert.Equal(t, 1, tr.lateBound)
	assert.Equal(t, "c", tr.stop.name)
	assert.Equal(t, 6, rp.boundPods())
	assert.Equal(t, "81.2% (1 pods later)", tr.allocation())
}

func metaOf(name string) metav1.ObjectMeta {
	return metav1.ObjectMeta{Namespace: namespace, Name: name}
}

// Every mode gets a row, the ones that did not run too, with what stopped them below.
func TestPrintTraceResults(t *testing.T) {
	ran := result{mode: mode{key: "stock", label: "kube-scheduler alone"}, procs: []usage{{name: "kube-scheduler", cpu: 1.5, peakMB: 80}},
		trace: &traceResult{pods: 10, gangs: 2, placedGangs: 1, onFewest: 1, allocated: 6, capacity: 8,
			stop: &traceItem{name: "t0003", size: 2, gpus: 4}, placed: []time.Duration{time.Second},
			gangPlaced: []time.Duration{time.Second}, gangPods: 8, gangSpan: 4 * time.Second}}
	failed := result{mode: mode{key: "volcano", label: "Volcano"}, err: errors.New("vc-scheduler not built")}
	var out strings.Builder
	printTraceResults(&out, traceOptions{placeWait: 15 * time.Second}, []result{ran, failed})
	text := out.String()
	assert.Contains(t, text, "t0003 (2 x 4 GPU)")
	assert.Contains(t, text, "75.0% (0 pods later)")
	assert.Contains(t, text, "Volcano  (did not run: see below)")
	assert.Contains(t, text, "error: volcano: vc-scheduler not built")
	assert.Regexp(t, `stock\s+kube-scheduler\s+1\.5\s+80`, text)
	assert.Regexp(t, `1\.000s\s+1\.000s\s+2\.0\s+1\.5\s+80`, text, "gang placed p50, p99 and 8 gang pods over 4s")
}

// Placed items leave the pending list; the oldest one left pauses arrivals past pauseAfter and
// stops the replay past placeWait.
func TestReplayCheck(t *testing.T) {
	store := cache.NewStore(cache.MetaNamespaceKeyFunc)
	watch := &bindWatch{store: store, at: map[string]time.Time{}}
	now := time.Now()
	watch.at["a-0"], watch.at["a-1"] = now, now
	items := []traceItem{{name: "a", size: 2, gpus: 1}, {name: "b", size: 1, gpus: 8}, {name: "c", size: 2, gpus: 1}}
	b := &bench{items: items, binds: watch, trace: traceOptions{pauseAfter: 2 * time.Second, placeWait: 15 * time.Second}}
	rp := &replayRun{b: b, stop: -1, pending: []int{0, 1, 2},
		created: map[int]time.Time{0: now.Add(-time.Second), 1: now.Add(-3 * time.Second), 2: now}}
	stop, paused := rp.check(now)
	assert.False(t, stop)
	assert.True(t, paused, "the 8-GPU pod has waited 3s")
	assert.Equal(t, []int{1, 2}, rp.pending)
	assert.Equal(t, []time.Duration{time.Second}, rp.placed)
	assert.Equal(t, []time.Duration{time.Second}, rp.gangPlaced, "gang a")
	assert.Equal(t, 2, rp.gangPods)

	stop, _ = rp.check(now.Add(13 * time.Second))
	assert.True(t, stop)
	assert.Equal(t, 1, rp.stop, "an ordinary pod that cannot be placed ends the replay")

	watch.at["b"] = now.Add(time.Second)
	rp.check(now.Add(time.Second))
	assert.Len(t, rp.placed, 2)
	assert.Len(t, rp.gangPlaced, 1, "b is an ordinary pod, not a gang")
	assert.Equal(t, now, rp.lastGangBind, "the last gang bind is a's")
}
