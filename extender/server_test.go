package extender_test

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/lockstep-sched/lockstep/dialect"
	"github.com/lockstep-sched/lockstep/views"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"
	extenderv1 "k8s.io/kube-scheduler/extender/v1"

	"github.com/lockstep-sched/lockstep/extender"
	"github.com/lockstep-sched/lockstep/gang"
	"github.com/lockstep-sched/lockstep/test/lib/builders"
)

// stubScheduler answers with canned results and records what it was asked.
type stubScheduler struct {
	mu sync.Mutex

	filterResult  gang.FilterResult
	bindErr       error
	status        []views.GangStatus
	queues        []gang.QueueView
	preemptResult gang.PreemptResult

	filterPods  []*corev1.Pod
	filterNodes [][]string
	prioNodes   [][]string
	binds       []bindArgs
	statusNS    []string
	preempts    []preemptArgs
}

type preemptArgs struct {
	Pod        string
	Candidates map[string][]types.UID
}

type bindArgs struct {
	Namespace, Name string
	UID             types.UID
	Node            string
}

func (s *stubScheduler) Filter(pod *corev1.Pod, nodes []string) gang.FilterResult {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.filterPods = append(s.filterPods, pod)
	s.filterNodes = append(s.filterNodes, keep(nodes))
	return s.filterResult
}

// keep copies names the stub records: the handler reuses their storage once the call is answered.
func keep(names []string) []string {
	out := make([]string, len(names))
	for i, n := range names {
		out[i] = strings.Clone(n)
	}
	return out
}

// Prioritize scores node i with i+1.
func (s *stubScheduler) Prioritize(_ *corev1.Pod, nodes []string, dst []int64) []int64 {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.prioNodes = append(s.prioNodes, keep(nodes))
	out := dst[:0]
	for i := range nodes {
		out = append(out, int64(i+1))
	}
	return out
}

func (s *stubScheduler) Bind(_ context.Context, namespace, name string, uid types.UID, node string) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.binds = append(s.binds, bindArgs{namespace, name, uid, node})
	return s.bindErr
}

func (s *stubScheduler) Preempt(pod *corev1.Pod, candidates map[string][]types.UID) gang.PreemptResult {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.preempts = append(s.preempts, preemptArgs{pod.Namespace + "/" + pod.Name, candidates})
	return s.preemptResult
}

func (s *stubScheduler) Queues() []gang.QueueView { return s.queues }

func (s *stubScheduler) Nodes(onlyProblems bool) []views.NodeStatus {
	if onlyProblems {
		return []views.NodeStatus{{Name: "bad", TopologyError: "broken"}}
	}
	return []views.NodeStatus{{Name: "bad", TopologyError: "broken"}, {Name: "good"}}
}

func (s *stubScheduler) Status(namespace string) []views.GangStatus {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.statusNS = append(s.statusNS, namespace)
	return s.status
}

func (s *stubScheduler) calls() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return len(s.filterPods) + len(s.prioNodes) + len(s.binds) + len(s.statusNS) + len(s.preempts)
}

// serve starts the handler behind a real HTTP server. A panic in a handler fails the test (net/http
// would otherwise swallow it and drop the connection).
func serve(t *testing.T, sched extender.Scheduler, opts extender.Options) *httptest.Server {
	t.Helper()
	return serveHandler(t, extender.NewHandler(sched, opts))
}

// serveDebug is serve for what people read (extender.NewDebugHandler).
func serveDebug(t *testing.T, sched extender.Scheduler, opts extender.Options) *httptest.Server {
	t.Helper()
	return serveHandler(t, extender.NewDebugHandler(sched, opts))
}

func serveHandler(t *testing.T, h http.Handler) *httptest.Server {
	t.Helper()
	var panicked atomic.Value
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		defer func() {
			if v := recover(); v != nil {
				panicked.Store(fmt.Sprint(v))
				http.Error(w, "panic", http.StatusInternalServerError)
			}
		}()
		h.ServeHTTP(w, r)
	}))
	t.Cleanup(func() {
		srv.Close()
		if v := panicked.Load(); v != nil {
			t.Errorf("handler panicked: %v", v)
		}
	})
	return srv
}

// post sends body (a []byte or string as is, anything else as JSON) and returns status and body.
func post(t *testing.T, srv *httptest.Server, path string, body any) (int, []byte) {
	t.Helper()
	var raw []byte
	switch b := body.(type) {
	case []byte:
		raw = b
	case string:
		raw = []byte(b)
	default:
		var err error
		raw, err = json.Marshal(body)
		require.NoError(t, err)
	}
	resp, err := srv.Client().Post(srv.URL+path, "application/json", bytes.NewReader(raw))
	require.NoError(t, err)
	defer resp.Body.Close()
	out, err := io.ReadAll(resp.Body)
	require.NoError(t, err)
	return resp.StatusCode, out
}

func get(t *testing.T, srv *httptest.Server, path string) (int, []byte) {
	t.Helper()
	resp, err := srv.Client().Get(srv.URL + path)
	require.NoError(t, err)
	defer resp.Body.Close()
	out, err := io.ReadAll(resp.Body)
	require.NoError(t, err)
	return resp.StatusCode, out
}

func decode[T any](t *testing.T, raw []byte) T {
	t.Helper()
	var v T
	require.NoError(t, json.Unmarshal(raw, &v), string(raw))
	return v
}

func testPod() *corev1.Pod {
	return builders.Pod("default", "w-0").GPU(2).Gang("mpi", 2).Obj()
}

func TestFilterNodeNames(t *testing.T) {
	stub := &stubScheduler{filterResult: gang.FilterResult{
		Feasible: []string{"n-0", "n-2"},
		Failed:   map[string]string{"n-1": "gang default/mpi: member reserved on node n-0"},
	}}
	srv := serve(t, stub, extender.Options{})
	names := []string{"n-0", "n-1", "n-2"}
	code, raw := post(t, srv, "/filter", extenderv1.ExtenderArgs{Pod: testPod(), NodeNames: &names})
	require.Equal(t, http.StatusOK, code, string(raw))

	// kube-scheduler decodes with the Go field names: no json tags on these types.
	require.Contains(t, string(raw), `"NodeNames":["n-0","n-2"]`)
	require.Contains(t, string(raw), `"FailedAndUnresolvableNodes":{"n-1":`)
	out := decode[extenderv1.ExtenderFilterResult](t, raw)
	require.NotNil(t, out.NodeNames)
	require.Equal(t, []string{"n-0", "n-2"}, *out.NodeNames)
	require.Nil(t, out.Nodes)
	require.Equal(t, extenderv1.FailedNodesMap{"n-1": "gang default/mpi: member reserved on node n-0"}, out.FailedAndUnresolvableNodes)
	require.Empty(t, out.FailedNodes)
	require.Empty(t, out.Error)

	require.Len(t, stub.filterPods, 1)
	require.Equal(t, "w-0", stub.filterPods[0].Name)
	require.Equal(t, testPod().Annotations, stub.filterPods[0].Annotations)
	require.Equal(t, names, stub.filterNodes[0])
}

func TestFilterNoFeasibleNode(t *testing.T) {
	stub := &stubScheduler{filterResult: gang.FilterResult{Failed: map[string]string{"n-0": "no"}}}
	srv := serve(t, stub, extender.Options{})
	names := []string{"n-0"}
	code, raw := post(t, srv, "/filter", extenderv1.ExtenderArgs{Pod: testPod(), NodeNames: &names})
	require.Equal(t, http.StatusOK, code)
	out := decode[extenderv1.ExtenderFilterResult](t, raw)
	if out.NodeNames != nil {
		require.Empty(t, *out.NodeNames)
	}
	require.Equal(t, extenderv1.FailedNodesMap{"n-0": "no"}, out.FailedAndUnresolvableNodes)
}

func TestFilterFullNodes(t *testing.T) {
	stub := &stubScheduler{filterResult: gang.FilterResult{
		Feasible: []string{"n-2", "n-0"},
		Failed:   map[string]string{"n-1": "insufficient nvidia.com/gpu"},
	}}
	srv := serve(t, stub, extender.Options{})
	nodes := []*corev1.Node{
		builders.Node("n-0").GPU(8).CPU("64").Label("zone", "a").Obj(),
		builders.Node("n-1").GPU(8).CPU("64").Label("zone", "b").Obj(),
		builders.Node("n-2").GPU(4).CPU("32").Label("zone", "c").Unschedulable().Obj(),
	}
	list := &corev1.NodeList{}
	for _, n := range nodes {
		list.Items = append(list.Items, *n)
	}
	code, raw := post(t, srv, "/filter", extenderv1.ExtenderArgs{Pod: testPod(), Nodes: list})
	require.Equal(t, http.StatusOK, code, string(raw))
	require.Contains(t, string(raw), `"Nodes":{`)
	require.Contains(t, string(raw), `"FailedAndUnresolvableNodes"`)

	out := decode[extenderv1.ExtenderFilterResult](t, raw)
	require.Nil(t, out.NodeNames)
	require.NotNil(t, out.Nodes)
	// The kept nodes are the objects the scheduler sent, in its order; compare through JSON so
	// that quantities compare by value.
	want := &corev1.NodeList{Items: []corev1.Node{list.Items[0], list.Items[2]}}
	require.JSONEq(t, string(mustJSON(t, want)), string(mustJSON(t, out.Nodes)))
	require.Equal(t, extenderv1.FailedNodesMap{"n-1": "insufficient nvidia.com/gpu"}, out.FailedAndUnresolvableNodes)
	require.Equal(t, []string{"n-0", "n-1", "n-2"}, stub.filterNodes[0], "names taken from the full objects")
}

// Failures preemption might cure go to FailedNodes, where the scheduler's preemption looks; the
// rest to FailedAndUnresolvableNodes, in both the nodeCacheCapable answer and the other.
func TestFilterResolvableFailures(t *testing.T) {
	failed := map[string]string{
		"n-1": "insufficient nvidia.com/gpu: needs 2, 1 free",
		"n-2": "2 nvidia.com/gpu reserved for gang default/a: needs 2, 0 free outside reservations",
	}
	names := []string{"n-0", "n-1", "n-2"}
	list := &corev1.NodeList{}
	for _, n := range names {
		list.Items = append(list.Items, *builders.Node(n).GPU(2).Obj())
	}
	cases := []struct {
		name       string
		args       extenderv1.ExtenderArgs
		resolvable map[string]bool
		want       extenderv1.ExtenderFilterResult
	}{
		{"names, some resolvable", extenderv1.ExtenderArgs{Pod: testPod(), NodeNames: &names}, map[string]bool{"n-1": true},
			extenderv1.ExtenderFilterResult{NodeNames: &[]string{"n-0"}, FailedNodes: extenderv1.FailedNodesMap{"n-1": failed["n-1"]},
				FailedAndUnresolvableNodes: extenderv1.FailedNodesMap{"n-2": failed["n-2"]}}},
		{"names, all resolvable", extenderv1.ExtenderArgs{Pod: testPod(), NodeNames: &names}, map[string]bool{"n-1": true, "n-2": true},
			extenderv1.ExtenderFilterResult{NodeNames: &[]string{"n-0"}, FailedNodes: extenderv1.FailedNodesMap(failed)}},
		{"names, none resolvable", extenderv1.ExtenderArgs{Pod: testPod(), NodeNames: &names}, nil,
			extenderv1.ExtenderFilterResult{NodeNames: &[]string{"n-0"}, FailedAndUnresolvableNodes: extenderv1.FailedNodesMap(failed)}},
		{"full nodes, some resolvable", extenderv1.ExtenderArgs{Pod: testPod(), Nodes: list}, map[string]bool{"n-1": true},
			extenderv1.ExtenderFilterResult{Nodes: &corev1.NodeList{Items: list.Items[:1]}, FailedNodes: extenderv1.FailedNodesMap{"n-1": failed["n-1"]},
				FailedAndUnresolvableNodes: extenderv1.FailedNodesMap{"n-2": failed["n-2"]}}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			stub := &stubScheduler{filterResult: gang.FilterResult{Feasible: []string{"n-0"}, Failed: failed, Resolvable: tc.resolvable}}
			srv := serve(t, stub, extender.Options{})
			code, raw := post(t, srv, "/filter", tc.args)
			require.Equal(t, http.StatusOK, code, string(raw))
			require.JSONEq(t, string(mustJSON(t, tc.want)), string(raw))
		})
	}
}

// The preempt verb hands the manager each candidate's victims by UID, whichever form the
// scheduler sent them in, and answers with the kept candidates' victims as UIDs, as sent.
func TestPreempt(t *testing.T) {
	victim := func(name string) *corev1.Pod { return builders.Pod("default", name).GPU(1).Node("n-0").Obj() }
	meta := func(pdb int64, pods ...*corev1.Pod) *extenderv1.MetaVictims {
		out := &extenderv1.MetaVictims{Pods: []*extenderv1.MetaPod{}, NumPDBViolations: pdb}
		for _, p := range pods {
			out.Pods = append(out.Pods, &extenderv1.MetaPod{UID: string(p.UID)})
		}
		return out
	}
	a, b, c := victim("a"), victim("b"), victim("c")
	cases := []struct {
		name string
		args extenderv1.ExtenderPreemptionArgs
	}{
		{"UIDs (nodeCacheCapable)", extenderv1.ExtenderPreemptionArgs{Pod: testPod(), NodeNameToMetaVictims: map[string]*extenderv1.MetaVictims{
			"n-0": meta(1, a), "n-1": meta(0, b, c)}}},
		{"whole pods", extenderv1.ExtenderPreemptionArgs{Pod: testPod(), NodeNameToVictims: map[string]*extenderv1.Victims{
			"n-0": {Pods: []*corev1.Pod{a}, NumPDBViolations: 1}, "n-1": {Pods: []*corev1.Pod{b, c}}}}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			stub := &stubScheduler{preemptResult: gang.PreemptResult{Kept: []string{"n-0"}, Dropped: map[string]string{"n-1": "gang default/mpi: ..."}}}
			srv := serve(t, stub, extender.Options{})
			code, raw := post(t, srv, "/preempt", tc.args)
			require.Equal(t, http.StatusOK, code, string(raw))
			require.Contains(t, string(raw), `"NodeNameToMetaVictims":{"n-0":{"Pods":[{"UID":"`+string(a.UID)+`"}],"NumPDBViolations":1}}`)
			out := decode[extenderv1.ExtenderPreemptionResult](t, raw)
			require.Equal(t, map[string]*extenderv1.MetaVictims{"n-0": meta(1, a)}, out.NodeNameToMetaVictims)
			require.Equal(t, []preemptArgs{{"default/w-0", map[string][]types.UID{"n-0": {a.UID}, "n-1": {b.UID, c.UID}}}}, stub.preempts)
		})
	}

	// Nothing kept is an answer too: the scheduler then has no candidate and evicts nothing.
	stub := &stubScheduler{preemptResult: gang.PreemptResult{Dropped: map[string]string{"n-0": "no"}}}
	code, raw := post(t, serve(t, stub, extender.Options{}), "/preempt", cases[0].args)
	require.Equal(t, http.StatusOK, code, string(raw))
	require.JSONEq(t, `{"NodeNameToMetaVictims":{}}`, string(raw))
}

func mustJSON(t *testing.T, v any) []byte {
	t.Helper()
	raw, err := json.Marshal(v)
	require.NoError(t, err)
	return raw
}

func TestPrioritize(t *testing.T) {
	stub := &stubScheduler{}
	srv := serve(t, stub, extender.Options{})
	names := []string{"n-2", "n-0", "n-1"}
	code, raw := post(t, srv, "/prioritize", extenderv1.ExtenderArgs{Pod: testPod(), NodeNames: &names})
	require.Equal(t, http.StatusOK, code, string(raw))
	require.Contains(t, string(raw), `"Host":"n-0","Score":1`)
	out := decode[extenderv1.HostPriorityList](t, raw)
	// The stub scores 1, 2, 3: the lowest-scoring node is left out and the others are lowered by
	// its score, which leaves every difference, and so the scheduler's choice, as it was.
	require.Equal(t, extenderv1.HostPriorityList{{Host: "n-0", Score: 1}, {Host: "n-1", Score: 2}}, out)
	require.Equal(t, [][]string{names}, stub.prioNodes)

	// Full node objects work the same.
	list := &corev1.NodeList{Items: []corev1.Node{*builders.Node("a").Obj(), *builders.Node("b").Obj()}}
	code, raw = post(t, srv, "/prioritize", extenderv1.ExtenderArgs{Pod: testPod(), Nodes: list})
	require.Equal(t, http.StatusOK, code)
	require.Equal(t, extenderv1.HostPriorityList{{Host: "b", Score: 1}}, decode[extenderv1.HostPriorityList](t, raw))
}

func TestBind(t *testing.T) {
	args := extenderv1.ExtenderBindingArgs{PodName: "w-0", PodNamespace: "default", PodUID: "uid-1", Node: "n-0"}

	t.Run("success", func(t *testing.T) {
		stub := &stubScheduler{}
		srv := serve(t, stub, extender.Options{})
		code, raw := post(t, srv, "/bind", args)
		require.Equal(t, http.StatusOK, code)
		require.JSONEq(t, `{"Error":""}`, string(raw))
		require.Equal(t, []bindArgs{{"default", "w-0", "uid-1", "n-0"}}, stub.binds)
	})

	t.Run("scheduler error is an answer, not a transport error", func(t *testing.T) {
		err := fmt.Errorf("gang default/mpi: %w: 1 of 2 members ready", gang.ErrAwaitingQuorum)
		stub := &stubScheduler{bindErr: err}
		srv := serve(t, stub, extender.Options{})
		code, raw := post(t, srv, "/bind", args)
		require.Equal(t, http.StatusOK, code)
		out := decode[extenderv1.ExtenderBindingResult](t, raw)
		require.Equal(t, err.Error(), out.Error)
	})
}

func TestBadRequests(t *testing.T) {
	const limit = 4096
	big := testPod()
	big.Annotations["padding"] = strings.Repeat("x", 2*limit)
	names := []string{"n-0"}
	tests := []struct {
		name     string
		method   string
		path     string
		body     any
		wantCode int
		wantMsg  string
	}{
		{"malformed JSON", "POST", "/filter", `{"Pod": {`, 400, "malformed JSON at byte 9: unexpected end of JSON input"},
		{"syntax error", "POST", "/filter", `{"Pod": }`, 400, "malformed JSON at byte 9"},
		{"trailing garbage", "POST", "/filter", `{"Pod": {"metadata": {"name": "p"}}} xyz`, 400, "malformed JSON at byte 38: invalid character 'x' after top-level value"},
		{"second document", "POST", "/prioritize", `{"Pod": {}} {}`, 400, "malformed JSON at byte 13: invalid character '{' after top-level value"},
		{"empty body", "POST", "/filter", ``, 400, "empty body"},
		{"wrong type", "POST", "/filter", `{"Pod": 5}`, 400, `field "Pod"`},
		{"missing pod in filter", "POST", "/filter", extenderv1.ExtenderArgs{NodeNames: &names}, 400, "ExtenderArgs.Pod is missing"},
		{"missing pod in prioritize", "POST", "/prioritize", extenderv1.ExtenderArgs{NodeNames: &names}, 400, "ExtenderArgs.Pod is missing"},
		{"bind without node", "POST", "/bind", extenderv1.ExtenderBindingArgs{PodName: "p", PodNamespace: "default"}, 400, "needs PodName, PodNamespace and Node"},
		{"bind malformed", "POST", "/bind", `[`, 400, "decoding ExtenderBindingArgs"},
		{"body over the limit", "POST", "/filter", extenderv1.ExtenderArgs{Pod: big, NodeNames: &names}, 413, "4096-byte limit"},
		{"bind body over the limit", "POST", "/bind", strings.Repeat(" ", 2*limit) + "{}", 413, "4096-byte limit"},
		{"preempt malformed", "POST", "/preempt", `{"Pod": [`, 400, "decoding ExtenderPreemptionArgs: malformed JSON"},
		{"preempt wrong type", "POST", "/preempt", `{"Pod": {}, "NodeNameToMetaVictims": []}`, 400, `decoding ExtenderPreemptionArgs: field "NodeNameToMetaVictims"`},
		{"missing pod in preempt", "POST", "/preempt", extenderv1.ExtenderPreemptionArgs{NodeNameToMetaVictims: map[string]*extenderv1.MetaVictims{}}, 400, "ExtenderPreemptionArgs.Pod is missing"},
		{"preempt body over the limit", "POST", "/preempt", extenderv1.ExtenderPreemptionArgs{Pod: big}, 413, "4096-byte limit"},
		{"GET preempt", "GET", "/preempt", nil, 405, "not allowed"},
		{"unknown path", "POST", "/unreserve", `{}`, 404, "no such path /unreserve; this address serves POST /filter, /prioritize, /bind, /preempt"},
		{"unknown GET", "GET", "/nothing", nil, 404, "no such path"},
		{"GET filter", "GET", "/filter", nil, 405, "method GET not allowed on /filter"},
		{"GET bind", "GET", "/bind", nil, 405, "not allowed"},
		{"debug is not on the scheduler's address", "GET", "/debug/gangs", nil, 404, "no such path /debug/gangs"},
		{"metrics are not on the scheduler's address", "GET", "/metrics", nil, 404, "no such path /metrics"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel() // a 413 costs net/http's half-second close delay
			stub := &stubScheduler{}
			srv := serve(t, stub, extender.Options{MaxRequestBytes: limit})
			var code int
			var raw []byte
			if tc.method == "GET" {
				code, raw = get(t, srv, tc.path)
			} else {
				code, raw = post(t, srv, tc.path, tc.body)
			}
			require.Equal(t, tc.wantCode, code, string(raw))
			msg := decode[map[string]string](t, raw)["error"]
			require.Contains(t, msg, tc.wantMsg)
			require.Zero(t, stub.calls(), "the scheduler must not be asked")
		})
	}
}

func TestProbesMetricsAndDebug(t *testing.T) {
	var ready atomic.Bool
	reg := prometheus.NewRegistry()
	stub := &stubScheduler{status: []views.GangStatus{{Namespace: "x", Name: "mpi", MinAvailable: 2, Phase: views.PhaseReserving,
		Members: []views.MemberStatus{{Pod: "x/w-0", State: "Reserved", Node: "n-0", Requests: "nvidia.com/gpu=2"}}}}}
	opts := extender.Options{Ready: ready.Load, Registry: reg}
	srv, debug := serve(t, stub, opts), serveDebug(t, stub, opts)

	for _, s := range []*httptest.Server{srv, debug} {
		code, raw := get(t, s, "/readyz")
		require.Equal(t, http.StatusServiceUnavailable, code)
		require.Contains(t, decode[map[string]string](t, raw)["error"], "not synced")
	}
	ready.Store(true)
	for _, s := range []*httptest.Server{srv, debug} {
		code, _ := get(t, s, "/readyz")
		require.Equal(t, http.StatusOK, code)
		code, _ = get(t, s, "/healthz")
		require.Equal(t, http.StatusOK, code)
	}

	code, raw := get(t, debug, "/metrics")
	require.Equal(t, http.StatusOK, code)
	require.NotContains(t, string(raw), "lockstep_extender_request_duration_seconds_count{")
	names := []string{"n-0"}
	code, _ = post(t, srv, "/filter", extenderv1.ExtenderArgs{Pod: testPod(), NodeNames: &names})
	require.Equal(t, http.StatusOK, code)
	code, _ = post(t, srv, "/filter", `nonsense`)
	require.Equal(t, http.StatusBadRequest, code)
	code, raw = get(t, debug, "/metrics")
	require.Equal(t, http.StatusOK, code)
	require.Contains(t, string(raw), `lockstep_extender_request_duration_seconds_count{code="200",verb="filter"} 1`)
	require.Contains(t, string(raw), `lockstep_extender_request_duration_seconds_count{code="400",verb="filter"} 1`)
	require.Contains(t, string(raw), `lockstep_filter_offered_nodes_bucket{le="1"} 1`, "the decoded call offered one node; the malformed one counts nowhere")
	require.Contains(t, string(raw), `lockstep_filter_offered_nodes_count 1`)

	code, raw = get(t, debug, "/debug/gangs?namespace=x")
	require.Equal(t, http.StatusOK, code)
	require.Equal(t, []string{"x"}, stub.statusNS)
	require.JSONEq(t, string(mustJSON(t, stub.status)), string(raw))
	code, _ = get(t, debug, "/debug/gangs")
	require.Equal(t, http.StatusOK, code)
	require.Equal(t, []string{"x", ""}, stub.statusNS)

	// Without a registry there is no /metrics.
	bare := serveDebug(t, &stubScheduler{}, extender.Options{})
	code, _ = get(t, bare, "/metrics")
	require.Equal(t, http.StatusNotFound, code)
	code, _ = get(t, bare, "/readyz")
	require.Equal(t, http.StatusOK, code, "no Ready func means ready")
}

// noopBinder accepts every binding.
type noopBinder struct{ n atomic.Int64 }

func (b *noopBinder) Bind(context.Context, string, string, types.UID, string, []int) error {
	b.n.Add(1)
	return nil
}

// Many scheduler connections at once against a real manager: every answer must be well formed.
func TestConcurrentRequests(t *testing.T) {
	binder := &noopBinder{}
	var podsMu sync.Mutex
	pods := map[string]*corev1.Pod{}
	getPod := func(_ context.Context, namespace, name string) (*corev1.Pod, error) {
		podsMu.Lock()
		defer podsMu.Unlock()
		if p, ok := pods[namespace+"/"+name]; ok {
			return p, nil
		}
		return nil, errors.New("not found")
	}
	m := gang.NewManager(gang.Config{BindWait: 50 * time.Millisecond, ExpiryCheckInterval: 20 * time.Millisecond, Reader: dialect.Pods{}}, binder, getPod, nil, nil)
	t.Cleanup(m.Stop)
	nodes := builders.GPUNodes("n", 10, 8)
	for _, n := range nodes {
		m.UpsertNode(n)
	}
	names := builders.Names(nodes)
	srv := serve(t, m, extender.Options{Registry: prometheus.NewRegistry()})

	const workers, rounds = 50, 20
	var wg sync.WaitGroup
	errs := make(chan error, workers*rounds*3)
	for w := 0; w < workers; w++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for r := 0; r < rounds; r++ {
				var pod *corev1.Pod
				if w%5 == 0 {
					// Gang members: gangs of 2 so that binds reach quorum.
					pod = builders.Pod("default", fmt.Sprintf("g-%d-%d", w, r)).GPU(1).Gang(fmt.Sprintf("g-%d-%d", w/10, r), 2).Obj()
				} else {
					pod = builders.Pod("default", fmt.Sprintf("p-%d-%d", w, r)).CPU("10m").Obj()
				}
				podsMu.Lock()
				pods[pod.Namespace+"/"+pod.Name] = pod
				podsMu.Unlock()
				m.UpsertPod(pod)

				if err := roundTrip(srv, pod, names); err != nil {
					errs <- fmt.Errorf("worker %d round %d: %w", w, r, err)
				}
			}
		}()
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Error(err)
	}
	require.Positive(t, binder.n.Load())
}

// roundTrip runs filter, preempt, prioritize and (when a node passed) bind for one pod over HTTP.
func roundTrip(srv *httptest.Server, pod *corev1.Pod, names []string) error {
	call := func(path string, in, out any) error { return postJSON(srv, path, in, out) }
	if err := preemptTrip(srv, pod, names); err != nil {
		return err
	}
	var fr extenderv1.ExtenderFilterResult
	if err := call("/filter", extenderv1.ExtenderArgs{Pod: pod, NodeNames: &names}, &fr); err != nil {
		return err
	}
	// kube-scheduler reads a null NodeNames as "no node passed".
	var feasible []string
	if fr.NodeNames != nil {
		feasible = *fr.NodeNames
	}
	failed := len(fr.FailedNodes) + len(fr.FailedAndUnresolvableNodes)
	reservedAlone := len(feasible) == 1 && failed == 0 // a gang member passing its reserved node
	if !reservedAlone && len(feasible)+failed != len(names) {
		return fmt.Errorf("filter answer does not account for every node: %+v", fr)
	}
	var pr extenderv1.HostPriorityList
	if err := call("/prioritize", extenderv1.ExtenderArgs{Pod: pod, NodeNames: &names}, &pr); err != nil {
		return err
	}
	// Nodes at the lowest score are left out of the answer (see TestPrioritizeAnswerKeepsDifferences).
	offered := map[string]bool{}
	for _, n := range names {
		offered[n] = true
	}
	for _, hp := range pr {
		if !offered[hp.Host] || hp.Score < 1 || hp.Score > extenderv1.MaxExtenderPriority {
			return fmt.Errorf("prioritize: entry %+v is not an offered node with a score in 1..%d", hp, extenderv1.MaxExtenderPriority)
		}
		delete(offered, hp.Host)
	}
	if len(feasible) == 0 {
		return nil
	}
	var br extenderv1.ExtenderBindingResult
	return call("/bind", extenderv1.ExtenderBindingArgs{PodName: pod.Name, PodNamespace: pod.Namespace, PodUID: pod.UID, Node: feasible[0]}, &br)
}

func TestDebugNodes(t *testing.T) {
	srv := serveDebug(t, &stubScheduler{}, extender.Options{})
	code, body := get(t, srv, "/debug/nodes")
	require.Equal(t, http.StatusOK, code)
	require.Len(t, decode[[]views.NodeStatus](t, body), 2)
	code, body = get(t, srv, "/debug/nodes?problems=true")
	require.Equal(t, http.StatusOK, code)
	require.Equal(t, []views.NodeStatus{{Name: "bad", TopologyError: "broken"}}, decode[[]views.NodeStatus](t, body))
}

// The profiler is served only when asked for, and never in the way of /debug/gangs.
func TestProfiling(t *testing.T) {
	for _, on := range []bool{false, true} {
		srv := serveDebug(t, &stubScheduler{}, extender.Options{Profiling: on})
		code, _ := get(t, srv, "/debug/pprof/")
		if on {
			require.Equal(t, http.StatusOK, code)
		} else {
			require.Equal(t, http.StatusNotFound, code)
		}
		code, body := get(t, srv, "/debug/gangs")
		require.Equal(t, http.StatusOK, code, string(body))
	}
}

// A caller that Options.Caller refuses gets 403 with its words from every verb, and the manager
// never hears of the call; the probes stay open to it.
func TestVerbsVetTheirCaller(t *testing.T) {
	stub := &stubScheduler{}
	srv := serve(t, stub, extender.Options{Caller: func(*http.Request) error {
		return errors.New("client certificate required")
	}})
	names := []string{"n-0"}
	for path, body := range map[string]any{
		"/filter":     extenderv1.ExtenderArgs{Pod: testPod(), NodeNames: &names},
		"/prioritize": extenderv1.ExtenderArgs{Pod: testPod(), NodeNames: &names},
		"/bind":       extenderv1.ExtenderBindingArgs{PodName: "p", PodNamespace: "ns", Node: "n-0"},
		"/preempt":    extenderv1.ExtenderPreemptionArgs{Pod: testPod()},
	} {
		code, raw := post(t, srv, path, body)
		require.Equal(t, http.StatusForbidden, code, path)
		require.Equal(t, "client certificate required", decode[map[string]string](t, raw)["error"], path)
	}
	require.Zero(t, stub.calls())
	for _, probe := range []string{"/healthz", "/readyz"} {
		code, _ := get(t, srv, probe)
		require.Equal(t, http.StatusOK, code, probe)
	}
}

// What people read never answers the scheduler's verbs.
func TestDebugAddressServesNoVerbs(t *testing.T) {
	stub := &stubScheduler{}
	srv := serveDebug(t, stub, extender.Options{})
	code, raw := post(t, srv, "/bind", extenderv1.ExtenderBindingArgs{PodName: "p", PodNamespace: "ns", Node: "n-0"})
	require.Equal(t, http.StatusNotFound, code)
	require.Contains(t, decode[map[string]string](t, raw)["error"], "GET /debug/gangs")
	require.Zero(t, stub.calls())
}

// postJSON posts in and decodes a 200 answer into out.
func postJSON(srv *httptest.Server, path string, in, out any) error {
	raw, err := json.Marshal(in)
	if err != nil {
		return err
	}
	resp, err := srv.Client().Post(srv.URL+path, "application/json", bytes.NewReader(raw))
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		body, _ := io.ReadAll(resp.Body)
		return fmt.Errorf("%s: %d %s", path, resp.StatusCode, body)
	}
	return json.NewDecoder(resp.Body).Decode(out)
}

// preemptTrip asks to preempt a pod nobody knows on every node for the pod: the answer may keep
// only offered nodes, with their victims as sent.
func preemptTrip(srv *httptest.Server, pod *corev1.Pod, names []string) error {
	victims := map[string]*extenderv1.MetaVictims{}
	for _, n := range names {
		victims[n] = &extenderv1.MetaVictims{Pods: []*extenderv1.MetaPod{{UID: "nobody"}}, NumPDBViolations: 1}
	}
	var out extenderv1.ExtenderPreemptionResult
	if err := postJSON(srv, "/preempt", extenderv1.ExtenderPreemptionArgs{Pod: pod, NodeNameToMetaVictims: victims}, &out); err != nil {
		return err
	}
	for n, v := range out.NodeNameToMetaVictims {
		if sent, ok := victims[n]; !ok || v == nil || len(v.Pods) != 1 || *v.Pods[0] != *sent.Pods[0] || v.NumPDBViolations != 1 {
			return fmt.Errorf("preempt kept %s with victims %+v, not as offered", n, v)
		}
	}
	return nil
}
