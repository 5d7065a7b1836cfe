package inspect

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"strings"
	"time"

	"github.com/lockstep-sched/lockstep/views"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"sigs.k8s.io/yaml"
)

// Commands are the subcommands, in the order the help lists them.
var Commands = []string{"gangs", "queues", "nodes", "why"}

// Outputs are the values of -o; "" is the table.
var Outputs = []string{"", "wide", "json", "yaml"}

// Request is one invocation of the plugin.
type Request struct {
	Command string
	Args    []string
	// Namespace is -n, or the kubeconfig context's namespace without it.
	Namespace     string
	AllNamespaces bool
	Output        string
	// Width is the terminal's width; 0 when the output is no terminal.
	Width       int
	Out, ErrOut io.Writer
}

// Cluster is what the commands read: the apiserver, and lockstep, reached only when a command
// needs it (Connect returns the Fetcher and what closes it).
type Cluster struct {
	Client  kubernetes.Interface
	Connect func(ctx context.Context) (Fetcher, func(), error)
	Now     func() time.Time
}

// Run carries out one request.
func Run(ctx context.Context, req Request, cl Cluster) error {
	if err := req.Validate(); err != nil {
		return err
	}
	if req.Command == "why" {
		return why(ctx, req, cl)
	}
	f, done, err := cl.Connect(ctx)
	if err != nil {
		return err
	}
	defer done()
	switch req.Command {
	case "gangs":
		return gangs(ctx, req, cl, f)
	case "queues":
		return queues(ctx, req, f)
	default:
		return nodes(ctx, req, f)
	}
}

// Validate checks the command, its arguments and the output before anything is read.
func (r Request) Validate() error {
	if !contains(Commands, r.Command) {
		return fmt.Errorf("unknown command %q; the commands are %s", r.Command, strings.Join(Commands, ", "))
	}
	if !contains(Outputs, r.Output) {
		return fmt.Errorf("-o %s: the outputs are wide, json and yaml", r.Output)
	}
	want := 0
	if r.Command == "why" {
		want = 1
	}
	if len(r.Args) != want {
		if want == 1 {
			return fmt.Errorf("why takes one pod name, got %d arguments: kubectl lockstep why POD [-n NAMESPACE]", len(r.Args))
		}
		return fmt.Errorf("%s takes no arguments, got %q", r.Command, r.Args)
	}
	if r.Command == "why" && r.AllNamespaces {
		return errors.New("why explains one pod: name its namespace with -n, not -A")
	}
	return nil
}

func contains(list []string, s string) bool {
	for _, v := range list {
		if v == s {
			return true
		}
	}
	return false
}

func (r Request) view(now time.Time) View {
	return View{AllNamespaces: r.AllNamespaces, Wide: r.Output == "wide", Width: r.Width, Now: now}
}

// scope is the namespace to read; "" is all of them.
func (r Request) scope() string {
	if r.AllNamespaces {
		return ""
	}
	return r.Namespace
}

func gangs(ctx context.Context, req Request, cl Cluster, f Fetcher) error {
	answer, err := ReadGangs(ctx, f, req.scope())
	if err != nil {
		return err
	}
	if printed, err := req.printRaw(answer.Raw); printed || err != nil {
		return err
	}
	if len(answer.Items) == 0 {
		fmt.Fprintf(req.ErrOut, "No gangs found %s.\n", req.where())
		return nil
	}
	created := podAges(ctx, req, cl)
	return GangsTable(req.Out, answer.Items, created, req.view(cl.Now()))
}

func (r Request) where() string {
	if r.AllNamespaces {
		return "in any namespace"
	}
	return "in namespace " + r.Namespace
}

// podAges reads when the pods of the scope were created, for the AGE column. Without the right
// to list pods the column says <unknown>, and a warning says why.
func podAges(ctx context.Context, req Request, cl Cluster) Created {
	out := Created{}
	list, err := cl.Client.CoreV1().Pods(req.scope()).List(ctx, metav1.ListOptions{})
	if err != nil {
		fmt.Fprintf(req.ErrOut, "Warning: AGE unknown: listing pods %s: %v\n", req.where(), err)
		return out
	}
	for _, p := range list.Items {
		out[podKey(&p)] = p.CreationTimestamp.Time
	}
	return out
}

func queues(ctx context.Context, req Request, f Fetcher) error {
	answer, err := ReadQueues(ctx, f)
	if err != nil {
		return err
	}
	if printed, err := req.printRaw(answer.Raw); printed || err != nil {
		return err
	}
	if len(answer.Items) == 0 {
		fmt.Fprintln(req.ErrOut, "No team queues: lockstep found no Volcano or kube-batch Queue, nor ElasticQuota.")
		return nil
	}
	return QueuesTable(req.Out, answer.Items, req.view(time.Time{}))
}

func nodes(ctx context.Context, req Request, f Fetcher) error {
	answer, err := ReadNodes(ctx, f)
	if err != nil {
		return err
	}
	if printed, err := req.printRaw(answer.Raw); printed || err != nil {
		return err
	}
	if len(answer.Items) == 0 {
		fmt.Fprintln(req.ErrOut, "No nodes: lockstep counts none yet.")
		return nil
	}
	return NodesTable(req.Out, answer.Items, req.view(time.Time{}))
}

func why(ctx context.Context, req Request, cl Cluster) error {
	name := req.Args[0]
	pod, err := cl.Client.CoreV1().Pods(req.Namespace).Get(ctx, name, metav1.GetOptions{})
	if apierrors.IsNotFound(err) {
		return fmt.Errorf("pod %s not found in namespace %s (name another with -n)", name, req.Namespace)
	}
	if err != nil {
		return fmt.Errorf("reading pod %s/%s: %w", req.Namespace, name, err)
	}
	f, done, err := cl.Connect(ctx)
	if err != nil {
		return err
	}
	defer done()
	answer, err := ReadGangs(ctx, f, pod.Namespace)
	if err != nil {
		return err
	}
	g := GangOf(answer.Items, podKey(pod))
	paragraph := Why(Case{Pod: pod, Gang: g, Now: cl.Now(), Facts: readFacts(ctx, f)})
	if req.Output == "json" || req.Output == "yaml" {
		return req.printWhy(pod, g, answer, paragraph)
	}
	_, err = fmt.Fprintln(req.Out, paragraph)
	return err
}

// readFacts reads what the advice weighs from /debug/nodes; the paragraph goes without it when
// lockstep does not answer, as advice is the part a reader can most easily do without.
func readFacts(ctx context.Context, f Fetcher) Facts {
	nodes, err := ReadNodes(ctx, f)
	if err != nil {
		return Facts{}
	}
	var facts Facts
	for _, n := range nodes.Items {
		if !n.Unschedulable {
			facts.ClusterGPUs += n.GPUs
		}
	}
	return facts
}

// printWhy prints the paragraph beside the gang's entry as lockstep answered it.
func (r Request) printWhy(pod *corev1.Pod, g *views.GangStatus, answer Answer[views.GangStatus], paragraph string) error {
	out := struct {
		Pod  string          `json:"pod"`
		Gang json.RawMessage `json:"gang"`
		Why  string          `json:"why"`
	}{Pod: podKey(pod), Gang: json.RawMessage("null"), Why: paragraph}
	if g != nil {
		var entries []json.RawMessage
		if err := json.Unmarshal(answer.Raw, &entries); err != nil {
			return err
		}
		for i := range answer.Items {
			if &answer.Items[i] == g && i < len(entries) {
				out.Gang = entries[i]
			}
		}
	}
	raw, err := json.Marshal(out)
	if err != nil {
		return err
	}
	_, err = r.printRaw(raw)
	return err
}

// printRaw prints lockstep's answer for -o json or -o yaml; printed is false for a table.
func (r Request) printRaw(raw []byte) (printed bool, err error) {
	switch r.Output {
	case "json":
		// Indented as it came: lockstep's field order, and fields this plugin does not know.
		var pretty bytes.Buffer
		if err := json.Indent(&pretty, bytes.TrimSpace(raw), "", "  "); err != nil {
			return true, fmt.Errorf("lockstep's answer is not JSON: %w", err)
		}
		_, err = fmt.Fprintln(r.Out, pretty.String())
		return true, err
	case "yaml":
		y, err := yaml.JSONToYAML(raw)
		if err != nil {
			return true, err
		}
		_, err = r.Out.Write(y)
		return true, err
	}
	return false, nil
}
