package extender

import (
	"bytes"
	"context"
	stdjson "encoding/json"
	"errors"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"
	extenderv1 "k8s.io/kube-scheduler/extender/v1"

	"github.com/lockstep-sched/lockstep/gang"
	"github.com/lockstep-sched/lockstep/test/lib/builders"
	"github.com/lockstep-sched/lockstep/views"
)

// The targets here hold lockstep's wire to what kube-scheduler itself means by a request: the
// scheduler encodes with encoding/json into the k8s.io/kube-scheduler/extender/v1 types, so
// encoding/json decoding the same bytes into those types is the reference. lockstep decodes with
// a hand-written fast path and goccy/go-json instead; a body the two read differently is a pod
// scheduled on nodes the scheduler never offered, or a bind of another pod than it asked for.
//
// Either way round counts: lockstep accepting what encoding/json refuses answers a request the
// scheduler cannot have sent, and refusing what it accepts fails a request it can.

// FuzzExtenderArgsStdlib checks filter's and prioritize's whole decoder (the fast path, or the
// library when the fast path declines) against encoding/json: the same verdict, the same pod, the
// same candidate names, and the same reading of which form (names or Node objects) was sent.
func FuzzExtenderArgsStdlib(f *testing.F) {
	for _, body := range fuzzExtenderArgsSeeds(f) {
		f.Add(body)
	}
	// One table across inputs, as in the server: a name seen before is handed out from the table,
	// and a full table starts over, which a fresh table per input would never reach.
	var table nameTable
	f.Fuzz(func(t *testing.T, body []byte) {
		var want extenderv1.ExtenderArgs
		wantErr := stdjson.Unmarshal(body, &want)

		// Pooled, as the handler's are: a call that kept anything of the previous input would
		// show here as a wrong answer.
		call := newExtenderCall()
		defer call.release()
		// The handler decodes from the call's own buffer, which the fast path's names point into.
		call.body.Write(body)
		err := call.decode(call.body.Bytes(), &table)
		switch {
		case err != nil && wantErr != nil:
			return
		case err == nil && wantErr != nil:
			t.Fatalf("lockstep accepted a body encoding/json refuses (%v): %q", wantErr, body)
		case err != nil && wantErr == nil:
			t.Fatalf("lockstep refused a body encoding/json accepts (%v): %q", err, body)
		}
		require.Equal(t, want.Pod, call.args.Pod, "pod of %q", body)
		require.Equal(t, stdCandidates(&want), append([]string{}, call.names...), "candidate nodes of %q", body)
		require.Equal(t, want.NodeNames != nil || want.Nodes == nil, call.namesSent(), "answered with names, for %q", body)
		if call.plainNames {
			for _, name := range call.names {
				require.True(t, plainJSONString(name), "%q called plain, in %q", name, body)
			}
		}
		if asSent := call.namesAsSent(); asSent != "" {
			encoded, err := stdjson.Marshal(append([]string{}, call.names...))
			require.NoError(t, err)
			require.Equal(t, string(encoded), asSent, "array copied into answers, from %q", body)
		}
	})
}

// stdCandidates are the nodes encoding/json's reading offers, the way kube-scheduler reads its own
// request: names when it sent names, else the Node objects' names.
func stdCandidates(args *extenderv1.ExtenderArgs) []string {
	names := []string{}
	switch {
	case args.NodeNames != nil:
		names = append(names, *args.NodeNames...)
	case args.Nodes != nil:
		for _, n := range args.Nodes.Items {
			names = append(names, n.Name)
		}
	}
	return names
}

// fuzzExtenderArgsSeeds are bodies of filter and prioritize: what kube-scheduler sends in either
// form, the shapes the fast path declines (each sends the body to the library), keys encoding/json
// matches that a byte comparison does not, and the node-name arrays kept in testdata from earlier
// fuzzing, each wrapped in a request.
func fuzzExtenderArgsSeeds(tb testing.TB) [][]byte {
	pod := builders.Pod("team-a", "w-0").Gang("g", 2).GPU(2).CPU("1").Label("a", `{"}`).Obj()
	podJSON := string(fuzzMarshal(tb, pod))
	names := []string{"node-0", "node-1", "n\u00f6de-2", "a<b"}
	nodes := &corev1.NodeList{Items: []corev1.Node{*builders.Node("node-0").GPU(8).Obj(), *builders.Node("node-1").Obj()}}
	var seeds [][]byte
	for _, args := range []extenderv1.ExtenderArgs{
		{Pod: pod, NodeNames: &names},
		{Pod: pod, NodeNames: &[]string{}},
		{Pod: pod, Nodes: nodes},
		{Pod: pod},
		{NodeNames: &names},
	} {
		seeds = append(seeds, fuzzMarshal(tb, args))
	}
	for _, form := range []string{
		`{"Pod":%s,"Nodes":null,"NodeNames":["n-0","n-1"]}`,
		`{"NodeNames":["n-0"],"Pod":%s}`,
		" { \"Pod\" : %s ,\n\t\"NodeNames\" : [ \"a\" ] } ",
		`{"Pod":%s,"NodeNames":["a"],"NodeNames":["b"]}`,
		`{"Pod":%s,"Pod":{"metadata":{"name":"other"}},"NodeNames":["a"]}`,
		`{"pod":%s,"nodenames":["a"],"NODES":null}`,
		`{"Pod":%s,"NodeNames":["a\u0041","\"q\"","\/"]}`,
		`{"Pod":%s,"NodeNames":null,"Nodes":{"items":[{"metadata":{"name":"full"}}]}}`,
		`{"Pod":%s,"Nodes":{"items":[]},"NodeNames":["a"]}`,
		`{"Pod":%s,"NodeNames":["a"],"Extra":[1,{"x":"}"}]}`,
		`{"Pod":%s,"NodeNames":["a"]}x`,
		`{"Pod":%s,"NodeNames":["a",]}`,
		`{"Pod":%s,"NodeNames":"a"}`,
		// U+017F and U+212A fold to s and k: encoding/json matches "NodeNameſ" to NodeNames
		// and "\u212aind" to kind, a byte comparison of keys does not.
		"{\"Pod\":%s,\"NodeName\u017f\":[\"a\"]}",
		"{\"Pod\":{\"\u212aind\":\"Pod\",\"metadata\":{\"name\":\"p\",\"name\u017fpace\":\"ns\"}},\"NodeNames\":[]}",
		// A pod's own fields, read by their own decoders (quantities, times, int-or-string).
		`{"Pod":{"metadata":{"name":"p","creationTimestamp":"2024-01-01T00:00:00Z"},"spec":{"priority":5,"containers":[{"resources":{"requests":{"cpu":"1.5","nvidia.com/gpu":"2"}},"ports":[{"containerPort":80}]}]}},"NodeNames":["a"]}`,
		`{"Pod":{"spec":{"priority":1e3}},"NodeNames":["a"]}`,
		`{"Pod":{"spec":{"priority":2147483648}},"NodeNames":["a"]}`,
		`{"Pod":{"spec":{"priority":1.0}},"NodeNames":["a"]}`,
		`{"Pod":{"metadata":null,"spec":{"priority":-0}},"NodeNames":["a"]}`,
		`{"Pod":{"metadata":{"uid":"u-1","namespace":"team-a"}},"NodeNames":["a"]}`,
		`{"Pod":{"spec":{"containers":[{"resources":{"requests":{"cpu":"1x"}}}]}},"NodeNames":["a"]}`,
		`{"Pod":null,"NodeNames":["a"]}`,
		`{"Pod":%s}`,
		`{}`,
		`[]`,
		`null`,
	} {
		if strings.Contains(form, "%s") {
			form = strings.Replace(form, "%s", podJSON, 1)
		}
		seeds = append(seeds, []byte(form))
	}
	// One level past encoding/json's nesting limit, which goccy/go-json keeps too: a decoder
	// without one recurses until the stack limit kills the process.
	const depth = 10001
	seeds = append(seeds, []byte(`{"Pod":{"x":`+strings.Repeat("[", depth)+strings.Repeat("]", depth)+`},"NodeNames":[]}`))
	for _, array := range fuzzCorpus(tb, "FuzzNodeNameList") {
		seeds = append(seeds, []byte(`{"Pod":`+podJSON+`,"NodeNames":`+array+`}`))
	}
	for _, name := range fuzzCorpus(tb, "FuzzFilterResult") {
		seeds = append(seeds, []byte(`{"Pod":{},"NodeNames":[`+strconv.Quote(name)+`]}`))
	}
	return seeds
}

// fuzzCorpus reads the string values of the inputs kept in testdata/fuzz/<target>, the files
// `go test -fuzz` writes (a version line, then one Go literal per argument).
func fuzzCorpus(tb testing.TB, target string) []string {
	dir := filepath.Join("testdata", "fuzz", target)
	entries, err := os.ReadDir(dir)
	require.NoError(tb, err)
	var out []string
	for _, e := range entries {
		raw, err := os.ReadFile(filepath.Join(dir, e.Name()))
		require.NoError(tb, err)
		for _, line := range strings.Split(string(raw), "\n") {
			if lit, ok := strings.CutPrefix(line, "string("); ok {
				s, err := strconv.Unquote(strings.TrimSuffix(lit, ")"))
				require.NoError(tb, err, "%s: %s", e.Name(), line)
				out = append(out, s)
			}
		}
	}
	require.NotEmpty(tb, out, "no seeds in %s", dir)
	return out
}

func fuzzMarshal(tb testing.TB, v any) []byte {
	raw, err := stdjson.Marshal(v)
	require.NoError(tb, err)
	return raw
}

// fuzzVerbs are the POST paths FuzzHandler sends bodies to, chosen by the input's first byte.
var fuzzVerbs = []string{"/filter", "/prioritize", "/bind", "/preempt"}

// fuzzMaxBody is small so that the fuzzer reaches the 413 answer too.
const fuzzMaxBody = 8 << 10

// FuzzHandler sends any body to each POST verb through the whole handler and checks the answer
// against what encoding/json reads from the body: 200 with the answer type's JSON for a request
// the scheduler could have sent, built from exactly what encoding/json reads; 400 with a JSON
// error for anything else, 413 past the size limit; never a panic and never a 5xx (the one
// documented 500, a manager scoring the wrong number of nodes, cannot happen with this one). The
// answers' own shape (what a filter result with these failures looks like) is checked against the
// encoder by FuzzFilterResult and FuzzHostPriorities; here it is what reaches the manager and
// comes back from it.
func FuzzHandler(f *testing.F) {
	// Filter and prioritize decode alike, so each body goes to one of them: `go test -fuzz`
	// re-runs every seed, far slower than it mutates, before it starts fuzzing.
	for i, body := range fuzzExtenderArgsSeeds(f) {
		f.Add(uint8(i%2), body)
	}
	pod := builders.Pod("team-a", "w-0").GPU(1).Obj()
	victim := builders.Pod("team-a", "v-0").GPU(1).Node("n-0").Obj()
	for _, body := range [][]byte{
		fuzzMarshal(f, extenderv1.ExtenderBindingArgs{PodName: "w-0", PodNamespace: "team-a", PodUID: "uid-1", Node: "n-0"}),
		fuzzMarshal(f, extenderv1.ExtenderBindingArgs{PodName: "w-x", PodNamespace: "team-a", Node: "n-0"}), // the manager refuses
		fuzzMarshal(f, extenderv1.ExtenderBindingArgs{PodName: "w-0", PodNamespace: "team-a"}),
		[]byte(`{"podname":"w-0","PODNAMESPACE":"team-a","node":"n-0","PodUID":null}`),
		[]byte(`{"PodName":"w-0","PodNamespace":"team-a","Node":"n-0","Node":""}`),
		[]byte(`{"PodName":5}`),
		[]byte(`{"PodName":"a\ud800b","PodNamespace":"\u00e9","Node":"n\u0000"}`),
	} {
		f.Add(uint8(2), body)
	}
	for _, body := range [][]byte{
		fuzzMarshal(f, extenderv1.ExtenderPreemptionArgs{Pod: pod, NodeNameToMetaVictims: map[string]*extenderv1.MetaVictims{
			"n-0": {Pods: []*extenderv1.MetaPod{{UID: "u-1"}}, NumPDBViolations: 1}, "n-10": {Pods: []*extenderv1.MetaPod{}}}}),
		fuzzMarshal(f, extenderv1.ExtenderPreemptionArgs{Pod: pod, NodeNameToVictims: map[string]*extenderv1.Victims{
			"n-0": {Pods: []*corev1.Pod{victim}, NumPDBViolations: 2}, "n-10": {}}}),
		[]byte(`{"Pod":{},"NodeNameToMetaVictims":{"n-0":null,"n-22":{"Pods":[null,{"UID":"u"}]}}}`),
		[]byte(`{"Pod":{},"NodeNameToVictims":{"n-0":{"Pods":[null,{"metadata":{"uid":"u"}}]},"n-22":null}}`),
		[]byte(`{"Pod":{},"NodeNameToVictims":{"n-0":{}},"NodeNameToMetaVictims":{}}`),
		[]byte(`{"Pod":{},"NodeNameToMetaVictims":{"n-0":{"NumPDBViolations":1.5}}}`),
		[]byte(`{"Pod":{},"NodeNameToMetaVictims":[]}`),
		[]byte(`{"NodeNameToMetaVictims":{}}`),
	} {
		f.Add(uint8(3), body)
	}
	for verb := range fuzzVerbs {
		f.Add(uint8(verb), []byte(""))
		f.Add(uint8(verb), []byte(" \n"))
		f.Add(uint8(verb), []byte(`{"Pod":{}} {}`))
		f.Add(uint8(verb), bytes.Repeat([]byte(" "), fuzzMaxBody+1))
	}

	sched := new(fuzzScheduler)
	h := NewHandler(sched, Options{MaxRequestBytes: fuzzMaxBody})
	f.Fuzz(func(t *testing.T, verb uint8, body []byte) {
		path := fuzzVerbs[int(verb)%len(fuzzVerbs)]
		sched.reset()
		rec := httptest.NewRecorder()
		h.ServeHTTP(rec, httptest.NewRequest(http.MethodPost, path, bytes.NewReader(body)))
		answer := rec.Body.Bytes()
		require.Equal(t, "application/json", rec.Header().Get("Content-Type"), "POST %s %q", path, body)

		if len(body) > fuzzMaxBody {
			require.Equal(t, http.StatusRequestEntityTooLarge, rec.Code, "POST %s of %d bytes: %s", path, len(body), answer)
			requireErrorBody(t, answer)
			require.Zero(t, sched.calls)
			return
		}
		want, why := sched.expect(t, path, body)
		if want == nil {
			require.Equal(t, http.StatusBadRequest, rec.Code, "POST %s %q (%s): %s", path, body, why, answer)
			requireErrorBody(t, answer)
			require.Zero(t, sched.calls, "the manager was asked about a request answered 400")
			return
		}
		require.Equal(t, http.StatusOK, rec.Code, "POST %s %q: %s", path, body, answer)
		require.Equal(t, 1, sched.calls)
		want(answer)
	})
}

// requireErrorBody checks an error answer is the JSON object the scheduler logs: {"error": "..."}.
func requireErrorBody(t *testing.T, answer []byte) {
	var e map[string]string
	require.NoError(t, stdjson.Unmarshal(answer, &e), "error answer %q", answer)
	require.NotEmpty(t, e["error"], "error answer %q", answer)
}

// fuzzScheduler answers by rules of the names it is given, so that the test knows the answer
// without asking it, and records what the handler handed it.
type fuzzScheduler struct {
	calls      int
	pod        *corev1.Pod
	nodes      []string
	bind       [4]string // namespace, name, UID, node
	candidates map[string][]types.UID
}

func (s *fuzzScheduler) reset() { *s = fuzzScheduler{} }

// fuzzFails says whether the scheduler fails a node, and if so why and whether preemption would
// cure it: an uneven rule, so that both answer forms (all pass, some fail) come up often.
func fuzzFails(node string) (reason string, fails, resolvable bool) {
	if len(node)%2 == 0 {
		return "", false, false
	}
	return "no room on " + node, true, len(node)%3 == 0
}

// fuzzScore spans negative scores and scores past the usual 0..10, which the hand-written answer
// writes by a slower path.
func fuzzScore(node string) int64 { return int64(len(node)%14) - 2 }

// fuzzKeeps says whether preempt keeps a candidate node.
func fuzzKeeps(node string) bool { return len(node)%2 == 0 }

func (s *fuzzScheduler) Filter(pod *corev1.Pod, nodes []string) gang.FilterResult {
	s.calls, s.pod, s.nodes = s.calls+1, pod, append([]string{}, nodes...)
	var r gang.FilterResult
	for _, n := range nodes {
		reason, fails, resolvable := fuzzFails(n)
		if !fails {
			r.Feasible = append(r.Feasible, n)
			continue
		}
		if r.Failed == nil {
			r.Failed = map[string]string{}
		}
		r.Failed[n] = reason
		if resolvable {
			if r.Resolvable == nil {
				r.Resolvable = map[string]bool{}
			}
			r.Resolvable[n] = true
		}
	}
	if r.Failed == nil {
		r.AllPass, r.Feasible = true, nil
	}
	return r
}

func (s *fuzzScheduler) Prioritize(pod *corev1.Pod, nodes []string, dst []int64) []int64 {
	s.calls, s.pod, s.nodes = s.calls+1, pod, append([]string{}, nodes...)
	dst = dst[:0]
	for _, n := range nodes {
		dst = append(dst, fuzzScore(n))
	}
	return dst
}

func (s *fuzzScheduler) Bind(_ context.Context, namespace, name string, uid types.UID, node string) error {
	s.calls, s.bind = s.calls+1, [4]string{namespace, name, string(uid), node}
	if strings.Contains(name, "x") {
		return errors.New("gang " + namespace + "/" + name + " is not ready")
	}
	return nil
}

func (s *fuzzScheduler) Preempt(pod *corev1.Pod, candidates map[string][]types.UID) gang.PreemptResult {
	s.calls, s.pod, s.candidates = s.calls+1, pod, candidates
	var r gang.PreemptResult
	for node := range candidates {
		if fuzzKeeps(node) {
			r.Kept = append(r.Kept, node)
		}
	}
	slices.Sort(r.Kept)
	return r
}

func (s *fuzzScheduler) Status(string) []views.GangStatus { return nil }
func (s *fuzzScheduler) Nodes(bool) []views.NodeStatus    { return nil }
func (s *fuzzScheduler) Queues() []gang.QueueView         { return nil }

// expect reads body with encoding/json as the request of the verb at path. When the scheduler
// could have sent it, it returns a check of the answer and of what the manager was handed; nil
// with the reason otherwise, for a request that must be answered 400.
func (s *fuzzScheduler) expect(t *testing.T, path string, body []byte) (check func(answer []byte), why string) {
	switch path {
	case "/filter", "/prioritize":
		var args extenderv1.ExtenderArgs
		if err := stdjson.Unmarshal(body, &args); err != nil {
			return nil, err.Error()
		}
		if args.Pod == nil {
			return nil, "no pod"
		}
		offered := stdCandidates(&args)
		return func(answer []byte) {
			require.Equal(t, args.Pod, s.pod, "pod handed to the manager, for %q", body)
			require.Equal(t, offered, s.nodes, "nodes handed to the manager, for %q", body)
			if path == "/filter" {
				checkFilterAnswer(t, &args, offered, answer)
			} else {
				checkPrioritizeAnswer(t, offered, answer)
			}
		}, ""
	case "/bind":
		var args extenderv1.ExtenderBindingArgs
		if err := stdjson.Unmarshal(body, &args); err != nil {
			return nil, err.Error()
		}
		if args.PodName == "" || args.PodNamespace == "" || args.Node == "" {
			return nil, "a name missing"
		}
		return func(answer []byte) {
			require.Equal(t, [4]string{args.PodNamespace, args.PodName, string(args.PodUID), args.Node}, s.bind, "bind handed to the manager, for %q", body)
			var out extenderv1.ExtenderBindingResult
			require.NoError(t, stdjson.Unmarshal(answer, &out), "answer %q", answer)
			wantErr := ""
			if strings.Contains(args.PodName, "x") {
				wantErr = "gang " + args.PodNamespace + "/" + args.PodName + " is not ready"
			}
			require.Equal(t, wantErr, out.Error)
		}, ""
	case "/preempt":
		var args extenderv1.ExtenderPreemptionArgs
		if err := stdjson.Unmarshal(body, &args); err != nil {
			return nil, err.Error()
		}
		if args.Pod == nil {
			return nil, "no pod"
		}
		return func(answer []byte) {
			require.Equal(t, args.Pod, s.pod, "pod handed to the manager, for %q", body)
			// Decoded by encoding/json, converted as the handler converts (metaVictimsOf): what is
			// compared here is the decoding.
			candidates := metaVictimsOf(&args)
			uids := map[string][]types.UID{}
			for node, v := range candidates {
				uids[node] = nil
				if v != nil {
					for _, p := range v.Pods {
						if p != nil {
							uids[node] = append(uids[node], types.UID(p.UID))
						}
					}
				}
			}
			require.Equal(t, uids, s.candidates, "candidates handed to the manager, for %q", body)
			var out extenderv1.ExtenderPreemptionResult
			require.NoError(t, stdjson.Unmarshal(answer, &out), "answer %q", answer)
			kept := map[string]*extenderv1.MetaVictims{}
			for node, v := range candidates {
				if fuzzKeeps(node) {
					kept[node] = v
				}
			}
			require.Equal(t, kept, out.NodeNameToMetaVictims, "answer %q to %q", answer, body)
		}, ""
	}
	t.Fatalf("no verb %s", path)
	return nil, ""
}

// checkFilterAnswer reads a filter answer as kube-scheduler does and checks it passes the nodes
// the manager passed, in the form the request came in, and fails the others with their reasons.
func checkFilterAnswer(t *testing.T, args *extenderv1.ExtenderArgs, offered []string, answer []byte) {
	var out extenderv1.ExtenderFilterResult
	require.NoError(t, stdjson.Unmarshal(answer, &out), "answer %q", answer)
	require.Empty(t, out.Error)
	passing := []string{}
	var resolvable, unresolvable extenderv1.FailedNodesMap
	for _, n := range offered {
		reason, fails, cure := fuzzFails(n)
		switch {
		case !fails:
			passing = append(passing, n)
		case cure:
			if resolvable == nil {
				resolvable = extenderv1.FailedNodesMap{}
			}
			resolvable[n] = reason
		default:
			if unresolvable == nil {
				unresolvable = extenderv1.FailedNodesMap{}
			}
			unresolvable[n] = reason
		}
	}
	require.Equal(t, resolvable, out.FailedNodes, "answer %q", answer)
	require.Equal(t, unresolvable, out.FailedAndUnresolvableNodes, "answer %q", answer)
	if args.NodeNames != nil || args.Nodes == nil {
		require.Nil(t, out.Nodes, "answer %q", answer)
		require.NotNil(t, out.NodeNames, "answer %q", answer)
		require.Equal(t, passing, *out.NodeNames, "answer %q", answer)
		return
	}
	require.Nil(t, out.NodeNames, "answer %q", answer)
	require.NotNil(t, out.Nodes, "answer %q", answer)
	got := []string{}
	for _, n := range out.Nodes.Items {
		got = append(got, n.Name)
	}
	// Node objects of one name come back as often as they were sent.
	want := []string{}
	for _, n := range args.Nodes.Items {
		if _, fails, _ := fuzzFails(n.Name); !fails {
			want = append(want, n.Name)
		}
	}
	require.Equal(t, want, got, "answer %q", answer)
}

// checkPrioritizeAnswer reads a prioritize answer as kube-scheduler does: it adds each listed
// node's score to the node's total and gives an unlisted node nothing, so what must hold is the
// difference between any two offered nodes' scores.
func checkPrioritizeAnswer(t *testing.T, offered []string, answer []byte) {
	var out extenderv1.HostPriorityList
	require.NoError(t, stdjson.Unmarshal(answer, &out), "answer %q", answer)
	got := map[string]int64{}
	for _, hp := range out {
		_, dup := got[hp.Host]
		require.False(t, dup && hp.Score != got[hp.Host], "node %q scored twice, differently: %q", hp.Host, answer)
		got[hp.Host] = hp.Score
	}
	for _, a := range offered {
		for _, b := range offered {
			require.Equal(t, fuzzScore(a)-fuzzScore(b), got[a]-got[b], "nodes %q and %q in %q", a, b, answer)
		}
	}
}
