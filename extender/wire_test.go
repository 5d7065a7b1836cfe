package extender

import (
	"bytes"
	"testing"

	json "github.com/goccy/go-json"
	"github.com/stretchr/testify/require"
	extenderv1 "k8s.io/kube-scheduler/extender/v1"
)

func TestNodeNameListDecoding(t *testing.T) {
	cases := []struct {
		name    string
		in      string
		want    []string
		wantNil bool
	}{
		{name: "names", in: `["node-0","node-1", "node-2"]`, want: []string{"node-0", "node-1", "node-2"}},
		{name: "spaces and newlines", in: " [\n \"a\" ,\t\"b\"\r\n] ", want: []string{"a", "b"}},
		{name: "empty array", in: `[]`, want: []string{}},
		{name: "null", in: `null`, wantNil: true},
		{name: "escapes fall back to the ordinary decoder", in: `["a\"b","c\u0041"]`, want: []string{`a"b`, "cA"}},
		{name: "unicode", in: `["nœud-1"]`, want: []string{"nœud-1"}},
		{name: "invalid UTF-8 is rewritten as the ordinary decoder does", in: "[\"\xdc\"]", want: []string{"\uFFFD"}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			var args extenderArgs
			require.NoError(t, json.Unmarshal([]byte(`{"NodeNames":`+tc.in+`}`), &args))
			if tc.wantNil {
				require.Nil(t, args.NodeNames)
				return
			}
			require.NotNil(t, args.NodeNames)
			require.Equal(t, tc.want, []string(*args.NodeNames))
		})
	}
}

// The decoder checks a document's syntax before the fast path sees it; the fast path still
// refuses malformed arrays on its own, with a message saying where.
func TestNodeNameListRefusesMalformedArrays(t *testing.T) {
	cases := map[string]string{
		`"node-0"`:   "want a JSON array of strings",
		`["a", 5]`:   "want a string at byte 6",
		`["a`:        "unterminated string",
		`["a" "b"]`:  "want ',' or ']'",
		`["a",]`:     "want a string",
		"[\"a\tb\"]": "control character",
		`["a"] x`:    "unexpected data after the array",
	}
	for in, want := range cases {
		var l nodeNameList
		require.ErrorContains(t, l.UnmarshalJSON([]byte(in)), want, "input %q", in)
	}
}

// The fast path must agree with the ordinary decoder on everything it accepts.
func FuzzNodeNameList(f *testing.F) {
	for _, seed := range []string{`["a","b"]`, `[]`, `[ "x" ]`, `["a\"b"]`, `["a",]`, `[1]`} {
		f.Add(seed)
	}
	f.Fuzz(func(t *testing.T, in string) {
		var fast nodeNameList
		fastErr := fast.UnmarshalJSON([]byte(in))
		var plain []string
		plainErr := json.Unmarshal([]byte(in), &plain)
		if fastErr == nil {
			require.NoError(t, plainErr, "fast path accepted %q, the ordinary decoder did not", in)
			require.Equal(t, plain, []string(fast), "input %q", in)
		}
	})
}

// The hand-written prioritize answer must be exactly what the encoder writes for the same list.
func FuzzHostPriorities(f *testing.F) {
	f.Add("node-0", int64(10), "node-1", int64(0))
	f.Add("a<b>&\"c\\", int64(-3), "n\u00f6d\xff", int64(1<<40))
	f.Fuzz(func(t *testing.T, a string, sa int64, b string, sb int64) {
		names, scores := []string{a, b}, []int64{sa, sb}
		var got bytes.Buffer
		appendHostPriorities(&got, names, scores)
		list := extenderv1.HostPriorityList{{Host: a, Score: sa}, {Host: b, Score: sb}}
		var want bytes.Buffer
		require.NoError(t, json.NewEncoder(&want).Encode(list))
		require.Equal(t, want.String(), got.String())
	})
}
