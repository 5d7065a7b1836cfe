package placement

import (
	"testing"

	"github.com/stretchr/testify/require"
)

func TestExplainNoFit(t *testing.T) {
	gpus := func(n int64) Resources { return Resources{GPU: n, MilliCPU: 64000, Memory: 1 << 40, Pods: 110} }
	member := func(name string, n int64) Member {
		return Member{Name: name, Requests: Resources{GPU: n, MilliCPU: 1000, Memory: 1 << 30, Pods: 1}}
	}
	cases := []struct {
		name string
		free map[string]Resources
		want string
	}{
		{
			name: "not enough in total",
			free: map[string]Resources{"a": gpus(1), "b": gpus(1)},
			want: "gang ns/g: 2 members need 4 nvidia.com/gpu, 2 free",
		},
		{
			name: "enough in total, never on one node",
			free: map[string]Resources{"a": gpus(1), "b": gpus(1), "c": gpus(1), "d": gpus(1)},
			want: "gang ns/g: 2 members fit in total, but member ns/w-0 needs 2 nvidia.com/gpu on one node after placing the others: at most 1 free on one node (a)",
		},
		{
			name: "the node with room went to the other member",
			free: map[string]Resources{"a": gpus(3), "b": gpus(1)},
			want: "gang ns/g: 2 members fit in total, but member ns/w-1 needs 2 nvidia.com/gpu on one node after placing the others: the nodes with room (up to 3 free, on a) went to the gang's other members",
		},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			in := Input{Free: tc.free, Members: []Member{member("ns/w-0", 2), member("ns/w-1", 2)}}
			plan := Place(in)
			require.False(t, plan.OK)
			require.Equal(t, tc.want, Explain("ns/g", in, plan.Failed, nil))
		})
	}
}

// Prefer only breaks ties: the tighter node wins whatever it says, and among equal nodes the
// preferred one beats the first by name.
func TestPreferBreaksOnlyTies(t *testing.T) {
	node := func(gpus int64) Resources { return Resources{GPU: gpus, MilliCPU: 8000, Memory: 32 << 30, Pods: 110} }
	member := []Member{{Name: "ns/p", Requests: Resources{GPU: 1, MilliCPU: 1000, Memory: 1 << 30, Pods: 1}}}
	prefer := func(want string) func(string) int {
		return func(n string) int {
			if n == want {
				return 1
			}
			return 0
		}
	}
	tighter := Place(Input{Members: member, Free: map[string]Resources{"a": node(2), "b": node(4)}, Prefer: prefer("b")})
	require.Equal(t, []string{"a"}, tighter.Nodes)
	tie := Place(Input{Members: member, Free: map[string]Resources{"a": node(4), "b": node(4)}, Prefer: prefer("b")})
	require.Equal(t, []string{"b"}, tie.Nodes)
}
