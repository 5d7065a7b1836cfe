package main

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"path/filepath"
	"time"

	corev1 "k8s.io/api/core/v1"
	extenderv1 "k8s.io/kube-scheduler/extender/v1"

	"github.com/lockstep-sched/lockstep/test/lib/cluster"
	"github.com/lockstep-sched/lockstep/test/lib/harness"
)

// subject is one lockstep binary under measurement. With -baseline there are two, the working
// tree's and the baseline revision's, on the same cluster: the machine is shared and noisy, and
// two separate runs differ by more than most changes do, so a before-and-after comparison is
// only worth quoting from one run, calls interleaved.
type subject struct {
	label string
	bin   string
	ls    *harness.Lockstep
	rows  []row
	rssMB float64
}

// start runs the subject's lockstep against the cluster.
func (s *subject) start(ctx context.Context, c *cluster.Cluster, index int, extra []string) error {
	port, err := cluster.FreePort()
	if err != nil {
		return err
	}
	debugPort, err := cluster.FreePort()
	if err != nil {
		return err
	}
	args := append([]string{"--kubeconfig", c.AdminKubeconfig, "--kube-api-qps", "1000", "--kube-api-burst", "2000"}, extra...)
	if cpuProfile != "" && index == 0 {
		args = append(args, "--profiling")
	}
	s.ls = harness.NewLockstep(s.bin, filepath.Join(c.WorkDir, fmt.Sprintf("lockstep-%d.log", index)), port, debugPort, args...)
	return s.ls.Start(ctx)
}

// caller sends one subject's calls of one verb, as the scheduler does for one pod, and times each
// until the whole answer is read (decoding it is the scheduler's cost, not lockstep's).
type caller struct {
	url, verb string
	args      []byte
	names     []string
	pending   []*corev1.Pod
	client    http.Client
	// One buffer for every answer: allocating each would have this process's garbage collector
	// compete with lockstep for the same two cores while it is being timed.
	answer bytes.Buffer
	sent   int
}

func newCaller(url, verb string, names []string, pending []*corev1.Pod) *caller {
	return &caller{url: url, verb: verb, args: argsBody(names), names: names, pending: pending}
}

func (c *caller) call() (time.Duration, error) {
	body := c.args
	if c.verb == "bind" {
		p := c.pending[c.sent]
		body, _ = json.Marshal(extenderv1.ExtenderBindingArgs{PodName: p.Name, PodNamespace: p.Namespace, Node: c.names[c.sent%len(c.names)]})
	}
	c.sent++
	start := time.Now()
	resp, err := c.client.Post(c.url+"/"+c.verb, "application/json", bytes.NewReader(body))
	if err != nil {
		return 0, err
	}
	c.answer.Reset()
	_, err = c.answer.ReadFrom(resp.Body)
	resp.Body.Close()
	elapsed := time.Since(start)
	if err != nil || resp.StatusCode != http.StatusOK {
		return 0, fmt.Errorf("%s: status %d: %v", c.verb, resp.StatusCode, err)
	}
	if c.verb == "bind" && !bytes.Contains(c.answer.Bytes(), []byte(`"Error":""`)) {
		return 0, fmt.Errorf("bind: %s", c.answer.Bytes())
	}
	return elapsed, nil
}

// batch is how many calls one subject sends before the next takes over: short enough that both
// meet the same moments of the machine's load, long enough that each keeps its caches warm as a
// scheduler calling it pod after pod would.
const batch = 50

// interleaved times count calls of a verb on every caller, in batches taking turns (the first to
// go alternates), after a warm-up of each. It returns each caller's latencies in call order.
func interleaved(callers []*caller, verb string, count int) ([][]time.Duration, error) {
	out := make([][]time.Duration, len(callers))
	warm := 0
	if verb != "bind" {
		warm = min(count/10, batch)
	}
	for _, c := range callers {
		for range warm {
			if _, err := c.call(); err != nil {
				return nil, err
			}
		}
	}
	for done, turn := 0, 0; done < count; done, turn = done+batch, turn+1 {
		for k := range callers {
			i := (k + turn) % len(callers)
			for range min(batch, count-done) {
				d, err := callers[i].call()
				if err != nil {
					return nil, err
				}
				out[i] = append(out[i], d)
			}
		}
	}
	return out, nil
}
