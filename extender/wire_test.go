package extender

import (
	"bytes"
	stdjson "encoding/json"
	"fmt"
	"math/rand/v2"
	"slices"
	"testing"
	"unsafe"

	json "github.com/goccy/go-json"
	"github.com/stretchr/testify/require"
	extenderv1 "k8s.io/kube-scheduler/extender/v1"

	"github.com/lockstep-sched/lockstep/gang"
	"github.com/lockstep-sched/lockstep/test/lib/builders"
)

func TestNodeNamesDecoding(t *testing.T) {
	cases := []struct {
		name      string
		body      string
		want      []string
		wantPlain bool
		wantNames bool // answered as nodeCacheCapable
	}{
		{name: "names", body: `{"NodeNames":["node-0","node-1", "node-2"]}`, want: []string{"node-0", "node-1", "node-2"}, wantPlain: true, wantNames: true},
		{name: "as the scheduler sends them", body: `{"Pod":{"metadata":{"name":"p"}},"Nodes":null,"NodeNames":["n-0","n-1"]}`, want: []string{"n-0", "n-1"}, wantPlain: true, wantNames: true},
		{name: "spaces and newlines", body: "{\"NodeNames\": [\n \"a\" ,\t\"b\"\r\n] }", want: []string{"a", "b"}, wantPlain: true, wantNames: true},
		{name: "empty array", body: `{"NodeNames":[]}`, want: []string{}, wantPlain: true, wantNames: true},
		{name: "null", body: `{"NodeNames":null}`, want: []string{}, wantPlain: true, wantNames: true},
		{name: "absent", body: `{}`, want: []string{}, wantPlain: true, wantNames: true},
		{name: "full nodes", body: `{"Nodes":{"items":[{"metadata":{"name":"a"}},{"metadata":{"name":"b<"}}]}}`, want: []string{"a", "b<"}},
		{name: "null names beside full nodes", body: `{"NodeNames":null,"Nodes":{"items":[{"metadata":{"name":"a"}}]}}`, want: []string{"a"}, wantPlain: true},
		{name: "escapes fall back to the ordinary decoder", body: `{"NodeNames":["a\"b","c\u0041"]}`, want: []string{`a"b`, "cA"}, wantNames: true},
		{name: "unicode", body: `{"NodeNames":["nœud-1"]}`, want: []string{"nœud-1"}, wantNames: true},
		{name: "characters the encoder escapes", body: `{"NodeNames":["a&b"]}`, want: []string{"a&b"}, wantNames: true},
		{name: "invalid UTF-8 is rewritten as the ordinary decoder does", body: "{\"NodeNames\":[\"\xdc\"]}", want: []string{"\uFFFD"}, wantNames: true},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			call := newExtenderCall()
			defer call.release()
			require.NoError(t, call.decode([]byte(tc.body), new(nameTable)))
			require.Equal(t, tc.want, append([]string{}, call.names...))
			require.Equal(t, tc.wantPlain, call.plainNames, "plain")
			require.Equal(t, tc.wantNames, call.namesSent(), "nodeCacheCapable")
		})
	}
}

// A call's storage is reused by the next one: a short list after a long one must not keep the
// long one's tail, and a name kept from a released call is still that name after the bytes it
// was read from were overwritten.
func TestExtenderCallReuse(t *testing.T) {
	table := new(nameTable)
	decode := func(call *extenderCall, body string) {
		call.body.Reset()
		_, err := call.body.WriteString(body)
		require.NoError(t, err)
		require.NoError(t, call.decode(call.body.Bytes(), table))
	}
	for _, form := range []string{
		`{"Pod":{},"NodeNames":[%s]}`, // the fast path: names are read in place
		`{"NodeNames":[%s]}`,          // the library's: names are read from its copy
	} {
		call := new(extenderCall)
		decode(call, fmt.Sprintf(form, `"node-0","node-1","node-2"`))
		kept := call.names[1]
		decode(call, fmt.Sprintf(form, `"node-0","xxxxxx","node-2"`))
		require.Equal(t, []string{"node-0", "xxxxxx", "node-2"}, call.names, form)
		require.Equal(t, "node-1", kept, form)
		decode(call, fmt.Sprintf(form, `"x"`))
		require.Equal(t, []string{"x"}, call.names, form)
		require.Equal(t, "node-1", kept, form)
	}
}

// Names are the table's own strings, the same one for a name every time, and a full table starts
// over without spoiling the strings it handed out.
func TestNameTable(t *testing.T) {
	table := new(nameTable)
	text := []byte("node-0node-1")
	names := []string{string(text[:6]), string(text[6:])}
	table.own(names)
	again := []string{"node-1", "node-0"}
	table.own(again)
	require.Same(t, unsafe.StringData(names[0]), unsafe.StringData(again[1]))
	require.Same(t, unsafe.StringData(names[1]), unsafe.StringData(again[0]))

	repeated := []string{"node-2", "node-3", "node-2", "node-0"}
	table.own(repeated)
	require.Equal(t, []string{"node-2", "node-3", "node-2", "node-0"}, repeated)
	require.Same(t, unsafe.StringData(repeated[0]), unsafe.StringData(repeated[2]), "a name twice in one call is one string")

	flood := make([]string, maxKnownNames)
	for i := range flood {
		flood[i] = fmt.Sprintf("n-%d", i)
	}
	table.own(flood)
	require.Len(t, table.order, maxKnownNames)
	table.own([]string{"node-0"})
	require.Len(t, table.order, 1, "a table over its bound starts over")
	require.Equal(t, []string{"node-0", "node-1"}, names)
}

// The fast path must decode exactly what the library decodes, whenever it takes a body at all.
func FuzzExtenderArgs(f *testing.F) {
	pod, err := stdjson.Marshal(builders.Pod("default", "w-0").Gang("g", 2).GPU(2).CPU("1").Label("a", "{\"}").Obj())
	require.NoError(f, err)
	for _, seed := range []string{
		`{"Pod":%s,"Nodes":null,"NodeNames":["n-0","n-1"]}`,
		`{"NodeNames":["n-0"],"Pod":%s}`,
		` { "Pod" : %s , "NodeNames" : [ "a" ] } `,
		`{"Pod":%s,"NodeNames":["a"],"NodeNames":["b"]}`,
		`{"pod":%s,"nodenames":["a"]}`,
		`{"Pod":%s,"NodeNames":["a\u0041"]}`,
		`{"Pod":%s,"NodeNames":null}`,
		`{"Pod":%s,"Nodes":{"items":[]},"NodeNames":["a"]}`,
		`{"Pod":%s,"NodeNames":["a"]}x`,
	} {
		f.Add(fmt.Sprintf(seed, pod))
	}
	f.Fuzz(func(t *testing.T, body string) {
		fast := new(extenderCall)
		if !fast.decodeFast([]byte(body)) {
			return
		}
		library := &extenderCall{}
		library.args.NodeNames = &library.rawNames
		require.NoError(t, json.Unmarshal([]byte(body), &library.args), "the fast path took %q", body)
		require.NoError(t, library.decodeNames(), "the fast path took %q", body)
		require.Equal(t, library.args.Pod, fast.args.Pod)
		require.Equal(t, append([]string{}, library.names...), append([]string{}, fast.names...))
		require.Equal(t, library.plainNames, fast.plainNames)
		require.Equal(t, library.namesSent(), fast.namesSent())
	})
}

// The decoder checks a document's syntax before the fast path sees it; the fast path still
// refuses malformed arrays on its own, with a message saying where.
func TestSplitNodeNamesRefusesMalformedArrays(t *testing.T) {
	cases := map[string]string{
		`"node-0"`:   "want a JSON array of strings",
		`["a", 5]`:   "want a string at byte 6",
		`["a`:        "unterminated string",
		`["a" "b"]`:  "want ',' or ']'",
		`["a",]`:     "want a string",
		"[\"a\tb\"]": "control character in string at byte 3",
		`["a"] x`:    "unexpected data after the array",
	}
	for in, want := range cases {
		_, _, err := splitNodeNames([]byte(in), nil)
		require.ErrorContains(t, err, want, "input %q", in)
	}
}

// The fast path must agree with the ordinary decoder on everything it accepts, and call a list
// plain only when every name encodes as itself.
func FuzzNodeNameList(f *testing.F) {
	for _, seed := range []string{`["a","b"]`, `[]`, `[ "x" ]`, `["a\"b"]`, `["a",]`, `[1]`, `["<"]`, "[\"\u2028\"]"} {
		f.Add(seed)
	}
	f.Fuzz(func(t *testing.T, in string) {
		fast, plain, fastErr := splitNodeNames([]byte(in), nil)
		var ordinary []string
		ordinaryErr := stdjson.Unmarshal([]byte(in), &ordinary)
		if fastErr != nil {
			return
		}
		require.NoError(t, ordinaryErr, "fast path accepted %q, the ordinary decoder did not", in)
		require.Equal(t, append([]string{}, ordinary...), append([]string{}, fast...), "input %q", in)
		if plain {
			for _, name := range fast {
				encoded, err := stdjson.Marshal(name)
				require.NoError(t, err)
				require.Equal(t, `"`+name+`"`, string(encoded), "called plain")
			}
		}
	})
}

// The hand-written prioritize answer must be exactly what the encoder writes for the same list.
func FuzzHostPriorities(f *testing.F) {
	f.Add("node-0", int64(10), "node-1", int64(0))
	f.Add("a<b>&\"c\\", int64(-3), "n\u00f6d\xff", int64(1<<40))
	f.Fuzz(func(t *testing.T, a string, sa int64, b string, sb int64) {
		names, scores := []string{a, b}, []int64{sa, sb}
		var want bytes.Buffer
		list := extenderv1.HostPriorityList{{Host: a, Score: sa}, {Host: b, Score: sb}}
		require.NoError(t, stdjson.NewEncoder(&want).Encode(list))
		require.Equal(t, want.String(), string(appendHostPriorities(nil, names, scores, false)))
		if allPlain(names) {
			require.Equal(t, want.String(), string(appendHostPriorities(nil, names, scores, true)))
		}
	})
}

// The hand-written filter answer must be exactly what the encoder writes for the same result,
// its failures split into those preemption might cure and the others. resolvable's bits mark the
// two failed nodes resolvable.
func FuzzFilterResult(f *testing.F) {
	f.Add("node-0", "node-1", "", false, uint8(0))
	f.Add("a<b", "n\u00f6d\xff", "insufficient \"gpu\" & <more>", true, uint8(0))
	f.Add("node-0", "node-1", "insufficient nvidia.com/gpu: needs 2, 1 free", true, uint8(1))
	f.Add("node-0", "node-<1>", "insufficient cpu", true, uint8(3))
	f.Fuzz(func(t *testing.T, pass, fail, reason string, failing bool, resolvable uint8) {
		feasible := []string{pass}
		var result gang.FilterResult
		if failing {
			result.Failed = map[string]string{fail: reason, fail + "-2": reason + "!"}
			for i, node := range []string{fail, fail + "-2"} {
				if resolvable&(1<<i) != 0 {
					if result.Resolvable == nil {
						result.Resolvable = map[string]bool{}
					}
					result.Resolvable[node] = true
				}
			}
		}
		cure, noCure := splitFailures(result)
		require.Len(t, cure, len(result.Resolvable))
		for node, why := range result.Failed {
			if result.Resolvable[node] {
				require.Equal(t, why, cure[node])
			} else {
				require.Equal(t, why, noCure[node])
			}
		}
		var want bytes.Buffer
		require.NoError(t, stdjson.NewEncoder(&want).Encode(extenderv1.ExtenderFilterResult{
			NodeNames: &feasible, FailedNodes: cure, FailedAndUnresolvableNodes: noCure}))
		require.Equal(t, want.String(), string(appendFilterResult(nil, feasible, false, "", cure, noCure)))
		if allPlain(feasible) {
			require.Equal(t, want.String(), string(appendFilterResult(nil, feasible, true, "", cure, noCure)))
		}
		// Every offered node passing, the array is copied from the request when it can be. (A name
		// that is not valid UTF-8 comes back from the round trip as another name, with another
		// answer.)
		names, err := stdjson.Marshal(feasible)
		require.NoError(t, err)
		call := newExtenderCall()
		defer call.release()
		if call.decode([]byte(`{"Pod":{},"NodeNames":`+string(names)+`}`), new(nameTable)) == nil && slices.Equal(call.names, feasible) {
			asSent := call.namesAsSent()
			require.Equal(t, want.String(), string(appendFilterResult(nil, call.names, call.plainNames, asSent, cure, noCure)), "as sent %q", asSent)
		}
	})
}

// The offered array is reused as the answer only when it is byte for byte what the encoder
// would write for the feasible list.
func TestNamesAsSent(t *testing.T) {
	decode := func(body string) *extenderCall {
		call := newExtenderCall()
		t.Cleanup(call.release)
		require.NoError(t, call.decode([]byte(body), new(nameTable)))
		return call
	}
	call := decode(`{"Pod":{},"NodeNames":["a","b"]}`)
	require.Equal(t, `["a","b"]`, call.namesAsSent())
	call = decode(`{"Pod":{},"NodeNames":[ "a", "b" ]}`)
	require.Empty(t, call.namesAsSent(), "whitespace the encoder would not write")
	call = decode(`{"Pod":{},"NodeNames":["a<b"]}`)
	require.Empty(t, call.namesAsSent(), "a name the encoder escapes")
	call = decode(`{"NodeNames":["a"]}`)
	require.Empty(t, call.namesAsSent(), "read by the library, not the fast path")
	call = decode(`{"Pod":{},"NodeNames":[]}`)
	require.Equal(t, `[]`, call.namesAsSent())
}

func BenchmarkSplitNodeNames5000(b *testing.B) {
	names := make([]string, 5000)
	for i := range names {
		names[i] = fmt.Sprintf("node-%05d", i)
	}
	raw, err := stdjson.Marshal(names)
	require.NoError(b, err)
	var dst []string
	b.SetBytes(int64(len(raw)))
	for b.Loop() {
		dst, _, err = splitNodeNames(raw, dst[:0])
		if err != nil || len(dst) != len(names) {
			b.Fatal(err)
		}
	}
}

// What kube-scheduler sends a nodeCacheCapable extender must take the fast path: falling off it
// would still decode right, only slower, and nothing else would notice.
func TestSchedulerArgsTakeTheFastPath(t *testing.T) {
	names := []string{"node-0", "node-1"}
	body, err := stdjson.Marshal(extenderv1.ExtenderArgs{Pod: builders.Pod("default", "w-0").GPU(1).Obj(), NodeNames: &names})
	require.NoError(t, err)
	call := newExtenderCall()
	defer call.release()
	require.True(t, call.decodeFast(body), "%s", body)
	require.Equal(t, names, call.names)
	require.Equal(t, "w-0", call.args.Pod.Name)
}

// kube-scheduler adds an extender's score to each node's total and gives a node missing from the
// answer nothing: an answer keeps the scheduler's choice exactly when, for every pair of nodes,
// the difference of their scores is what lockstep computed.
func TestPrioritizeAnswerKeepsDifferences(t *testing.T) {
	rng := rand.New(rand.NewPCG(7, 11))
	for round := range 500 {
		n := rng.IntN(40)
		names, scores := make([]string, n), make([]int64, n)
		for i := range names {
			names[i], scores[i] = fmt.Sprintf("n-%d", i), int64(rng.IntN(4)+rng.IntN(2)*6)
		}
		wantNames, wantScores := slices.Clone(names), slices.Clone(scores)
		keptNames, keptScores := aboveLowest(names, scores)

		got := map[string]int64{}
		for i, name := range keptNames {
			require.Positive(t, keptScores[i], "round %d: an entry of score 0 is one the scheduler need not decode", round)
			got[name] = keptScores[i]
		}
		for i := range wantNames {
			for j := range wantNames {
				require.Equal(t, wantScores[i]-wantScores[j], got[wantNames[i]]-got[wantNames[j]],
					"round %d: nodes %s and %s", round, wantNames[i], wantNames[j])
			}
		}
		if n > 0 && slices.Min(wantScores) == slices.Max(wantScores) {
			require.Empty(t, keptNames, "round %d: nodes all alike need no answer at all", round)
		}
	}
}
