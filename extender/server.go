// Package extender is lockstep's HTTP face: it decodes kube-scheduler's extender calls, hands them
// to the gang manager and encodes the answers. It holds no scheduling logic of its own.
//
// The speed tricks of the wire (reused request storage, an in-place split of node names, one
// long-lived string per node name, answers written by hand) live here and nowhere else: what it
// hands the manager are ordinary values the manager may keep, and nothing it does depends on what
// the manager does with them.
package extender

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strconv"
	"sync"
	"time"

	"github.com/go-chi/chi/v5"
	"github.com/go-chi/chi/v5/middleware"

	// goccy/go-json decodes the scheduler's ExtenderArgs (a pod and up to thousands of node
	// names per call) about four times faster than encoding/json, with the same results.
	json "github.com/goccy/go-json"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promhttp"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/klog/v2"
	extenderv1 "k8s.io/kube-scheduler/extender/v1"

	"github.com/lockstep-sched/lockstep/gang"
	"github.com/lockstep-sched/lockstep/views"
)

// Scheduler is what the HTTP layer delegates to; *gang.Manager implements it.
type Scheduler interface {
	Filter(pod *corev1.Pod, nodes []string) gang.FilterResult
	// Prioritize scores nodes in dst's storage when it has room.
	Prioritize(pod *corev1.Pod, nodes []string, dst []int64) []int64
	Bind(ctx context.Context, namespace, name string, uid types.UID, node string) error
	// Preempt reviews the scheduler's preemption candidates: each node with the UIDs of the pods
	// it would evict there.
	Preempt(pod *corev1.Pod, candidates map[string][]types.UID) gang.PreemptResult
	Status(namespace string) []views.GangStatus
	Nodes(onlyProblems bool) []views.NodeStatus
	Queues() []gang.QueueView
}

// Options configure the handlers.
type Options struct {
	// MaxRequestBytes caps a request body; larger ones get 413. ExtenderArgs carrying full Node
	// objects for thousands of nodes run to tens of megabytes, hence the generous default.
	MaxRequestBytes int64
	// Ready reports whether the informers have synced; /readyz answers 503 until then.
	Ready func() bool
	// Registry receives the verb latency histogram (NewHandler) and is served as /metrics
	// (NewDebugHandler; NewMetricsHandler serves it alone); nil skips both.
	Registry *prometheus.Registry
	// Profiling serves Go's profiler under /debug/pprof/ (NewDebugHandler).
	Profiling bool
	// Caller, when set, vets the caller of every verb before its body is read: a non-nil error
	// answers 403 with the error's words. /healthz and /readyz are never vetted: the kubelet's
	// probes carry no credentials.
	Caller func(*http.Request) error
}

// preSizeLimit is the most a request's declared length sizes its buffer before the body arrives:
// a filter call naming 5,000 nodes is about 100 KiB.
const preSizeLimit = 1 << 20

// DefaultMaxRequestBytes is 64 MiB.
const DefaultMaxRequestBytes = 64 << 20

type server struct {
	sched   Scheduler
	opts    Options
	latency *prometheus.HistogramVec
	// offered counts the nodes each filter call offers: every node unless kube-scheduler was
	// told to sample them (percentageOfNodesToScore below 100), one when it tries a nominated node.
	offered prometheus.Histogram
	names   nameTable
}

// NewHandler returns the routes kube-scheduler calls, POST /filter, /prioritize, /bind and
// /preempt, beside GET /healthz and /readyz for probes. What people read (NewDebugHandler) is
// served apart, so that the address the scheduler reaches never lists pods to whoever asks.
func NewHandler(sched Scheduler, opts Options) http.Handler {
	s := newServer(sched, opts)
	r := s.router("POST /filter, /prioritize, /bind, /preempt and GET /healthz, /readyz")
	if opts.Registry != nil {
		s.latency = prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Name:    "lockstep_extender_request_duration_seconds",
			Help:    "Time to answer kube-scheduler's extender calls, by verb and HTTP status code.",
			Buckets: []float64{.0001, .00025, .0005, .001, .0025, .005, .01, .025, .05, .1, .25, .5, 1, 2.5, 5, 10},
		}, []string{"verb", "code"})
		s.offered = prometheus.NewHistogram(prometheus.HistogramOpts{
			Name:    "lockstep_filter_offered_nodes",
			Help:    "Nodes kube-scheduler offered per filter call: its cluster after its own filters, or the one node it tries first for a pod nominated there.",
			Buckets: []float64{1, 2, 10, 100, 1000, 5000},
		})
		opts.Registry.MustRegister(s.latency, s.offered)
	}
	r.Group(func(verbs chi.Router) {
		if opts.Caller != nil {
			verbs.Use(s.vetCaller)
		}
		verbs.Post("/filter", s.timed("filter", s.filter))
		verbs.Post("/prioritize", s.timed("prioritize", s.prioritize))
		verbs.Post("/bind", s.timed("bind", s.bind))
		verbs.Post("/preempt", s.timed("preempt", s.preempt))
	})
	return r
}

// NewDebugHandler returns what people and Prometheus read: GET /debug/gangs, /debug/nodes,
// /debug/queues, /metrics (with a Registry), /debug/pprof/ (with Profiling), /healthz and /readyz.
func NewDebugHandler(sched Scheduler, opts Options) http.Handler {
	s := newServer(sched, opts)
	r := s.router("GET /debug/gangs, /debug/nodes, /debug/queues, /metrics, /healthz and /readyz")
	if opts.Registry != nil {
		r.Method(http.MethodGet, "/metrics", promhttp.HandlerFor(opts.Registry, promhttp.HandlerOpts{}))
	}
	r.Get("/debug/gangs", s.gangs)
	r.Get("/debug/nodes", s.nodes)
	r.Get("/debug/queues", s.queues)
	if opts.Profiling {
		r.Mount("/debug", middleware.Profiler())
	}
	return r
}

// NewMetricsHandler returns GET /metrics alone, for an address Prometheus reaches across the
// network: nothing of /debug/* (pods of every namespace) nor the probes is served there, so a
// NetworkPolicy opening it to the monitoring namespace opens nothing else.
func NewMetricsHandler(reg *prometheus.Registry) http.Handler {
	r := newRouter("GET /metrics")
	r.Method(http.MethodGet, "/metrics", promhttp.HandlerFor(reg, promhttp.HandlerOpts{}))
	return r
}

func newServer(sched Scheduler, opts Options) *server {
	if opts.MaxRequestBytes <= 0 {
		opts.MaxRequestBytes = DefaultMaxRequestBytes
	}
	if opts.Ready == nil {
		opts.Ready = func() bool { return true }
	}
	return &server{sched: sched, opts: opts}
}

// router is a router with the probes and answers for unknown paths and methods; serves names
// the routes in the 404's words.
func (s *server) router(serves string) chi.Router {
	r := newRouter(serves)
	r.Get("/healthz", func(w http.ResponseWriter, _ *http.Request) { _, _ = io.WriteString(w, "ok\n") })
	r.Get("/readyz", func(w http.ResponseWriter, _ *http.Request) {
		if !s.opts.Ready() {
			writeError(w, http.StatusServiceUnavailable, "informers have not synced yet")
			return
		}
		_, _ = io.WriteString(w, "ok\n")
	})
	return r
}

// newRouter is a router that answers unknown paths and methods, naming what it serves.
func newRouter(serves string) chi.Router {
	r := chi.NewRouter()
	r.NotFound(func(w http.ResponseWriter, r *http.Request) {
		writeError(w, http.StatusNotFound, fmt.Sprintf("no such path %s; this address serves %s", r.URL.Path, serves))
	})
	r.MethodNotAllowed(func(w http.ResponseWriter, r *http.Request) {
		writeError(w, http.StatusMethodNotAllowed, fmt.Sprintf("method %s not allowed on %s", r.Method, r.URL.Path))
	})
	return r
}

// vetCaller answers 403 to a caller Options.Caller refuses, before anything of its request is read.
func (s *server) vetCaller(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if err := s.opts.Caller(r); err != nil {
			klog.V(2).InfoS("Refused a caller", "remote", r.RemoteAddr, "path", r.URL.Path, "reason", err)
			writeError(w, http.StatusForbidden, err.Error())
			return
		}
		next.ServeHTTP(w, r)
	})
}

func (s *server) filter(w http.ResponseWriter, r *http.Request) int {
	call, code := s.decodeExtenderArgs(w, r)
	if code != 0 {
		return code
	}
	defer call.release()
	if s.offered != nil {
		s.offered.Observe(float64(len(call.names)))
	}
	result := s.sched.Filter(call.args.Pod, call.names)
	resolvable, unresolvable := splitFailures(result)

	if call.namesSent() {
		// nodeCacheCapable: the scheduler sent names and reads names back. Feasible holds only
		// offered names, so they are plain when the offered ones are.
		feasible, asSent := result.Feasible, ""
		if result.AllPass {
			feasible, asSent = call.names, call.namesAsSent()
		}
		call.answer = appendFilterResult(call.answer, feasible, call.plainNames, asSent, resolvable, unresolvable)
		return writeRaw(w, call.answer)
	}
	passing := result.Passing(call.names)
	keep := make(map[string]bool, len(passing))
	for _, n := range passing {
		keep[n] = true
	}
	list := &corev1.NodeList{Items: []corev1.Node{}}
	for i := range call.args.Nodes.Items {
		if keep[call.args.Nodes.Items[i].Name] {
			list.Items = append(list.Items, call.args.Nodes.Items[i])
		}
	}
	return writeJSON(w, http.StatusOK, &extenderv1.ExtenderFilterResult{Nodes: list, FailedNodes: resolvable, FailedAndUnresolvableNodes: unresolvable})
}

// splitFailures sorts a filter's failed nodes into those the scheduler's preemption might cure
// (its FailedNodes) and the rest (FailedAndUnresolvableNodes, which it does not preempt on). An
// answer without resolvable failures passes its failures on as they are; an empty part is nil,
// which encodes as null.
func splitFailures(r gang.FilterResult) (resolvable, unresolvable map[string]string) {
	if len(r.Resolvable) == 0 {
		return nil, r.Failed
	}
	resolvable = make(map[string]string, len(r.Resolvable))
	unresolvable = make(map[string]string, len(r.Failed)-len(r.Resolvable))
	for node, reason := range r.Failed {
		if r.Resolvable[node] {
			resolvable[node] = reason
		} else {
			unresolvable[node] = reason
		}
	}
	if len(unresolvable) == 0 {
		unresolvable = nil
	}
	return resolvable, unresolvable
}

func (s *server) prioritize(w http.ResponseWriter, r *http.Request) int {
	call, code := s.decodeExtenderArgs(w, r)
	if code != 0 {
		return code
	}
	defer call.release()
	call.scores = s.sched.Prioritize(call.args.Pod, call.names, call.scores)
	if len(call.scores) != len(call.names) {
		return writeError(w, http.StatusInternalServerError, fmt.Sprintf("lockstep scored %d of %d nodes", len(call.scores), len(call.names)))
	}
	// Compacted in place: call.names keeps its length, so release still wipes every name.
	names, scores := aboveLowest(call.names, call.scores)
	call.answer = appendHostPriorities(call.answer, names, scores, call.plainNames)
	return writeRaw(w, call.answer)
}

func (s *server) bind(w http.ResponseWriter, r *http.Request) int {
	var args extenderv1.ExtenderBindingArgs
	if code := s.decode(w, r, &args, "ExtenderBindingArgs"); code != 0 {
		return code
	}
	if args.PodName == "" || args.PodNamespace == "" || args.Node == "" {
		return writeError(w, http.StatusBadRequest, "ExtenderBindingArgs needs PodName, PodNamespace and Node")
	}
	// A bind failure is an answer, not a transport error: the scheduler reads Error only from a
	// 200 response, and the message is what tells the user why the pod was not bound.
	var out extenderv1.ExtenderBindingResult
	if err := s.sched.Bind(r.Context(), args.PodNamespace, args.PodName, args.PodUID, args.Node); err != nil {
		out.Error = err.Error()
		klog.V(2).InfoS("Bind not done", "pod", args.PodNamespace+"/"+args.PodName, "node", args.Node, "reason", err)
	}
	return writeJSON(w, http.StatusOK, &out)
}

func (s *server) gangs(w http.ResponseWriter, r *http.Request) {
	writeJSON(w, http.StatusOK, s.sched.Status(r.URL.Query().Get("namespace")))
}

// nodes lists what lockstep knows of each node; ?problems=true keeps those with an invalid
// topology annotation.
func (s *server) nodes(w http.ResponseWriter, r *http.Request) {
	writeJSON(w, http.StatusOK, s.sched.Nodes(r.URL.Query().Get("problems") == "true"))
}

// decodeExtenderArgs reads the arguments of filter and prioritize, which must name a pod. The
// call it returns must be released once the answer is written.
func (s *server) decodeExtenderArgs(w http.ResponseWriter, r *http.Request) (*extenderCall, int) {
	call := newExtenderCall()
	body, code := s.readBody(w, r, &call.body, "ExtenderArgs")
	if code == 0 {
		if err := call.decode(body, &s.names); err != nil {
			code = writeError(w, http.StatusBadRequest, "decoding ExtenderArgs: "+describeJSONError(err))
		} else if call.args.Pod == nil {
			code = writeError(w, http.StatusBadRequest, "ExtenderArgs.Pod is missing")
		}
	}
	if code != 0 {
		call.release()
		return nil, code
	}
	return call, 0
}

// decode reads one JSON document of the named wire type, answering 413 or 400 itself on failure
// and returning the status it wrote (0 when decoding succeeded).
func (s *server) decode(w http.ResponseWriter, r *http.Request, into any, what string) int {
	buf := bodyBuffers.Get().(*bytes.Buffer)
	defer bodyBuffers.Put(buf)
	body, code := s.readBody(w, r, buf, what)
	if code != 0 {
		return code
	}
	if err := json.Unmarshal(body, into); err != nil {
		return writeError(w, http.StatusBadRequest, "decoding "+what+": "+describeJSONError(err))
	}
	return 0
}

// readBody reads a request body whole into buf, so that an oversized one is told apart from a
// malformed one; on failure it answers 413 or 400 itself and returns the status it wrote.
func (s *server) readBody(w http.ResponseWriter, r *http.Request, buf *bytes.Buffer, what string) ([]byte, int) {
	buf.Reset()
	if r.ContentLength > 0 && r.ContentLength <= s.opts.MaxRequestBytes {
		// Sized for what the header promises, up to preSizeLimit: a promise costs the client
		// nothing, and a dozen connections each declaring the whole limit would otherwise commit
		// the limit's worth of memory each before a byte arrived. Larger bodies grow as they come.
		buf.Grow(int(min(r.ContentLength, preSizeLimit)))
	}
	_, err := buf.ReadFrom(http.MaxBytesReader(w, r.Body, s.opts.MaxRequestBytes))
	if err != nil {
		var tooLarge *http.MaxBytesError
		if errors.As(err, &tooLarge) {
			return nil, writeError(w, http.StatusRequestEntityTooLarge, fmt.Sprintf("request body is over the %d-byte limit (--max-request-bytes)", tooLarge.Limit))
		}
		return nil, writeError(w, http.StatusBadRequest, "reading "+what+": "+err.Error())
	}
	body := buf.Bytes()
	if len(bytes.TrimSpace(body)) == 0 {
		return nil, writeError(w, http.StatusBadRequest, "decoding "+what+": empty body")
	}
	return body, 0
}

// bodyBuffers recycles the bodies of binds, which keep nothing of them once decoded (filter and
// prioritize keep theirs in their extenderCall).
var bodyBuffers = sync.Pool{New: func() any { return new(bytes.Buffer) }}

func describeJSONError(err error) string {
	var syntax *json.SyntaxError
	var typeErr *json.UnmarshalTypeError
	switch {
	case errors.As(err, &syntax):
		return fmt.Sprintf("malformed JSON at byte %d: %v", syntax.Offset, err)
	case errors.As(err, &typeErr):
		return fmt.Sprintf("field %q: got JSON %s, want %s", typeErr.Field, typeErr.Value, typeErr.Type)
	}
	return err.Error()
}

// timed records a verb's latency with the status code its handler wrote.
func (s *server) timed(verb string, h func(http.ResponseWriter, *http.Request) int) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		start := time.Now()
		code := h(w, r)
		if s.latency != nil {
			s.latency.WithLabelValues(verb, strconv.Itoa(code)).Observe(time.Since(start).Seconds())
		}
	}
}

func writeJSON(w http.ResponseWriter, code int, v any) int {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(code)
	if err := json.NewEncoder(w).Encode(v); err != nil {
		klog.V(2).InfoS("Writing response failed", "err", err)
	}
	return code
}

// writeRaw sends an answer already encoded as JSON.
func writeRaw(w http.ResponseWriter, answer []byte) int {
	w.Header().Set("Content-Type", "application/json")
	// Known in advance, the length spares the answer chunked framing, and the scheduler's reader
	// knows when it has it all.
	w.Header().Set("Content-Length", strconv.Itoa(len(answer)))
	w.WriteHeader(http.StatusOK)
	if _, err := w.Write(answer); err != nil {
		klog.V(2).InfoS("Writing response failed", "err", err)
	}
	return http.StatusOK
}

func writeError(w http.ResponseWriter, code int, msg string) int {
	return writeJSON(w, code, map[string]string{"error": msg})
}
