// Command demo is `make demo`: it starts a real control plane on loopback with lockstep as
// kube-scheduler's extender, adds four simulated nodes with 2 GPUs each, submits the seed
// scenario from examples/ (an MPI job of 5 workers x 2 GPUs that cannot fit on 8 GPUs, then one
// of 4 workers that can), and prints the pods and lockstep's /debug/gangs.
package main

import (
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/signal"
	"path/filepath"
	"syscall"
	"text/tabwriter"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"

	"github.com/lockstep-sched/lockstep/inspect"
	"github.com/lockstep-sched/lockstep/test/lib/cluster"
	"github.com/lockstep-sched/lockstep/test/lib/harness"
	"github.com/lockstep-sched/lockstep/views"
	"github.com/lockstep-sched/lockstep/wellknown"
)

const namespace = "default"

func main() {
	keep := flag.Bool("keep", false, "keep everything running after the scenario until Ctrl-C, to explore with curl and kubectl")
	flag.Parse()
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	if err := run(ctx, *keep); err != nil {
		fmt.Fprintf(os.Stderr, "demo: %v\n", err)
		os.Exit(1)
	}
}

func run(ctx context.Context, keep bool) error {
	step("Starting etcd, kube-apiserver, lockstep and kube-scheduler on loopback")
	env, err := harness.Up(ctx, harness.Options{Logf: func(f string, a ...any) { fmt.Printf("  "+f+"\n", a...) }})
	if err != nil {
		return err
	}
	defer env.Down()
	client := env.Cluster.Client

	step("Adding 4 simulated nodes with 2 nvidia.com/gpu each (8 GPUs)")
	for i := range 4 {
		if _, err := env.Cluster.CreateNode(ctx, cluster.NodeSpec{Name: fmt.Sprintf("gpu-node-%d", i), GPUs: 2}); err != nil {
			return err
		}
	}

	step("Submitting examples/mpi-5x2gpu-pending.yaml: 5 workers x 2 GPUs, min-available 5 (needs 10 GPUs)")
	if err := submit(ctx, env, "mpi-5x2gpu-pending.yaml"); err != nil {
		return err
	}
	if err := waitFor(ctx, "lockstep to turn the gang away", func() bool {
		return gangPhase(env, "mpi-5x2gpu") == views.PhaseWaiting && gangAttempts(env, "mpi-5x2gpu") >= 5
	}); err != nil {
		return err
	}
	if err := printPods(ctx, env); err != nil {
		return err
	}

	step("Submitting examples/mpi-4x2gpu-runs.yaml: 4 workers x 2 GPUs, min-available 4 (needs 8 GPUs)")
	if err := submit(ctx, env, "mpi-4x2gpu-runs.yaml"); err != nil {
		return err
	}
	if err := waitFor(ctx, "the 4-worker gang to bind", func() bool { return gangPhase(env, "mpi-4x2gpu") == views.PhaseBound }); err != nil {
		return err
	}
	if err := printPods(ctx, env); err != nil {
		return err
	}

	step("curl " + env.Lockstep.DebugURL + "/debug/gangs")
	raw, err := get(env.Lockstep.DebugURL + "/debug/gangs?namespace=" + namespace)
	if err != nil {
		return err
	}
	var pretty any
	_ = json.Unmarshal(raw, &pretty)
	out, _ := json.MarshalIndent(pretty, "", "  ")
	fmt.Println(string(out))

	step("FailedScheduling event on mpi-5x2gpu-0, as `kubectl describe pod` shows it")
	events, err := client.CoreV1().Events(namespace).List(ctx, metav1.ListOptions{FieldSelector: "involvedObject.name=mpi-5x2gpu-0,reason=FailedScheduling"})
	if err == nil && len(events.Items) > 0 {
		fmt.Println("  " + events.Items[len(events.Items)-1].Message)
	}
	step("kubectl lockstep why mpi-5x2gpu-0 (here with --debug-url " + env.Lockstep.DebugURL + "; in a cluster it port-forwards to lockstep's pod)")
	if err := explain(ctx, env, "mpi-5x2gpu-0"); err != nil {
		return err
	}
	fmt.Println("\nThe 5-worker job holds no GPU while it waits; the 4-worker job got all 8 at once.")

	if keep {
		step("Still running (Ctrl-C to stop)")
		fmt.Printf("  curl %s/debug/gangs\n  kubectl --kubeconfig %s get pods -o wide\n",
			env.Lockstep.DebugURL, env.Cluster.AdminKubeconfig)
		<-ctx.Done()
	}
	return nil
}

// explain prints what `kubectl lockstep why` says of pod, through the plugin's own code.
func explain(ctx context.Context, env *harness.Env, pod string) error {
	req := inspect.Request{Command: "why", Args: []string{pod}, Namespace: namespace, Out: os.Stdout, ErrOut: os.Stderr}
	direct := func(context.Context) (inspect.Fetcher, func(), error) {
		return inspect.Direct{URL: env.Lockstep.DebugURL}, func() {}, nil
	}
	return inspect.Run(ctx, req, inspect.Cluster{Client: env.Cluster.Client, Connect: direct, Now: time.Now})
}

func submit(ctx context.Context, env *harness.Env, example string) error {
	pods, err := harness.PodsOf(filepath.Join(env.Root, "examples", example), namespace)
	if err != nil {
		return err
	}
	for _, p := range pods {
		if _, err := env.Cluster.Client.CoreV1().Pods(namespace).Create(ctx, p, metav1.CreateOptions{}); err != nil {
			return fmt.Errorf("creating %s: %w", p.Name, err)
		}
	}
	return nil
}

func printPods(ctx context.Context, env *harness.Env) error {
	list, err := env.Cluster.Client.CoreV1().Pods(namespace).List(ctx, metav1.ListOptions{})
	if err != nil {
		return err
	}
	w := tabwriter.NewWriter(os.Stdout, 0, 0, 2, ' ', 0)
	fmt.Fprintln(w, "  POD\tGANG\tGPUS\tNODE\tSTATE")
	for _, p := range list.Items {
		node, state := p.Spec.NodeName, "Bound"
		if node == "" {
			node, state = "-", "Pending"
		}
		gpus := p.Spec.Containers[0].Resources.Requests[corev1.ResourceName(wellknown.ResourceGPU)]
		fmt.Fprintf(w, "  %s\t%s\t%s\t%s\t%s\n", p.Name, p.Annotations[wellknown.AnnotationGangName], gpus.String(), node, state)
	}
	return w.Flush()
}

func gangs(env *harness.Env) map[string]views.GangStatus {
	raw, err := get(env.Lockstep.DebugURL + "/debug/gangs?namespace=" + namespace)
	out := map[string]views.GangStatus{}
	if err != nil {
		return out
	}
	var list []views.GangStatus
	if json.Unmarshal(raw, &list) == nil {
		for _, g := range list {
			out[g.Name] = g
		}
	}
	return out
}

func gangPhase(env *harness.Env, name string) views.Phase { return gangs(env)[name].Phase }
func gangAttempts(env *harness.Env, name string) int      { return gangs(env)[name].Attempts }

func get(url string) ([]byte, error) {
	resp, err := http.Get(url)
	if err != nil {
		return nil, err
	}
	defer resp.Body.Close()
	return io.ReadAll(resp.Body)
}

func waitFor(ctx context.Context, what string, cond func() bool) error {
	fmt.Printf("  waiting for %s...\n", what)
	err := wait.PollUntilContextTimeout(ctx, 250*time.Millisecond, 2*time.Minute, true, func(context.Context) (bool, error) { return cond(), nil })
	if err != nil {
		return fmt.Errorf("waiting for %s: %w", what, err)
	}
	return nil
}

func step(s string) { fmt.Printf("\n==> %s\n", s) }
