// Command floorextender is the cheapest scheduler extender that still does what kube-scheduler
// asks of lockstep's verbs for an ordinary pod: filter answers the first node offered (one node, so
// the scheduler skips scoring and prioritize, as lockstep's shortlist usually lets it) and bind
// posts the binding. It decides nothing and keeps no state: no informers, no ledger.
//
// The throughput bench runs it as its "floor" mode (-modes stock,floor,lockstep), to measure what
// the extender protocol itself costs the scheduler's ordinary pods on the same machine: the HTTP
// calls, their JSON on both sides, the binding made by another process. lockstep's ordinary pods
// can come no closer to the scheduler alone than this.
package main

import (
	"context"
	"flag"
	"fmt"
	"io"
	"log"
	"net/http"
	"os"
	"os/signal"
	"syscall"
	"time"

	json "github.com/goccy/go-json"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/clientcmd"
	extenderv1 "k8s.io/kube-scheduler/extender/v1"
)

// ReadyLine is what the extender logs once it serves; the bench waits for it.
const ReadyLine = "floor extender serving"

func main() {
	addr := flag.String("listen", "127.0.0.1:8888", "address the verbs are served on")
	kubeconfig := flag.String("kubeconfig", "", "kubeconfig for the bindings")
	flag.Parse()
	if err := run(*addr, *kubeconfig); err != nil {
		fmt.Fprintln(os.Stderr, "floorextender:", err)
		os.Exit(1)
	}
}

func run(addr, kubeconfig string) error {
	cfg, err := clientcmd.BuildConfigFromFlags("", kubeconfig)
	if err != nil {
		return err
	}
	// As lockstep's clients: protobuf, and a rate limit that never sets the pace.
	cfg.ContentType = "application/vnd.kubernetes.protobuf"
	cfg.QPS, cfg.Burst = 500, 1000
	client, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		return err
	}
	srv := &http.Server{Addr: addr, Handler: newHandler(client), ReadHeaderTimeout: 10 * time.Second}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	go func() {
		<-ctx.Done()
		_ = srv.Close()
	}()
	log.Printf("%s on %s", ReadyLine, addr)
	if err := srv.ListenAndServe(); err != http.ErrServerClosed {
		return err
	}
	return nil
}

func newHandler(client kubernetes.Interface) http.Handler {
	mux := http.NewServeMux()
	mux.HandleFunc("POST /filter", filter)
	mux.HandleFunc("POST /prioritize", prioritize)
	mux.HandleFunc("POST /preempt", preempt)
	mux.HandleFunc("POST /bind", func(w http.ResponseWriter, r *http.Request) { bind(w, r, client) })
	return mux
}

// offered is the part of ExtenderArgs the floor reads: the scheduler is node-cache capable, so it
// sends names; the pod is skipped, not decoded.
type offered struct {
	NodeNames []string
}

func filter(w http.ResponseWriter, r *http.Request) {
	var args offered
	if !decode(w, r, &args) {
		return
	}
	names := args.NodeNames
	if len(names) > 1 {
		names = names[:1]
	}
	reply(w, extenderv1.ExtenderFilterResult{NodeNames: &names})
}

func prioritize(w http.ResponseWriter, r *http.Request) {
	var args offered
	if !decode(w, r, &args) {
		return
	}
	scores := make(extenderv1.HostPriorityList, len(args.NodeNames))
	for i, n := range args.NodeNames {
		scores[i].Host = n
	}
	reply(w, scores)
}

// preempt agrees with every victim the scheduler proposes.
func preempt(w http.ResponseWriter, r *http.Request) {
	var args extenderv1.ExtenderPreemptionArgs
	if !decode(w, r, &args) {
		return
	}
	reply(w, extenderv1.ExtenderPreemptionResult{NodeNameToMetaVictims: args.NodeNameToMetaVictims})
}

func bind(w http.ResponseWriter, r *http.Request, client kubernetes.Interface) {
	var args extenderv1.ExtenderBindingArgs
	if !decode(w, r, &args) {
		return
	}
	binding := &corev1.Binding{
		ObjectMeta: metav1.ObjectMeta{Namespace: args.PodNamespace, Name: args.PodName, UID: types.UID(args.PodUID)},
		Target:     corev1.ObjectReference{Kind: "Node", Name: args.Node},
	}
	var result extenderv1.ExtenderBindingResult
	if err := client.CoreV1().Pods(args.PodNamespace).Bind(r.Context(), binding, metav1.CreateOptions{}); err != nil {
		result.Error = err.Error()
	}
	reply(w, result)
}

func decode(w http.ResponseWriter, r *http.Request, into any) bool {
	body, err := io.ReadAll(r.Body)
	if err == nil {
		err = json.Unmarshal(body, into)
	}
	if err != nil {
		http.Error(w, err.Error(), http.StatusBadRequest)
		return false
	}
	return true
}

func reply(w http.ResponseWriter, v any) {
	w.Header().Set("Content-Type", "application/json")
	if err := json.NewEncoder(w).Encode(v); err != nil {
		log.Printf("writing an answer: %v", err)
	}
}
