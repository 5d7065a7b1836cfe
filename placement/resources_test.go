package placement

import (
	"testing"

	"github.com/stretchr/testify/require"
)

func TestWhyNot(t *testing.T) {
	node := func(gpus int64) Resources { return Resources{GPU: gpus, MilliCPU: 8000, Memory: 32 << 30, Pods: 110} }
	req := Resources{GPU: 2, MilliCPU: 1000, Memory: 1 << 30, Pods: 1}
	holders := func(node string) string { return "ns/a, ns/b on " + node }
	cases := []struct {
		name        string
		n           NodeState
		want        string
		wantRefusal Refusal
	}{
		{name: "fits", n: NodeState{Seen: true, Free: node(2)}},
		{name: "not seen", n: NodeState{Free: node(8)}, want: "lockstep has not seen this node yet", wantRefusal: NotSeen},
		{name: "bound pods leave too little", n: NodeState{Seen: true, Free: node(1)},
			want: "insufficient nvidia.com/gpu: needs 2, 1 free", wantRefusal: ShortBesideBound},
		{name: "overcommitted node shows none free, not a negative", n: NodeState{Seen: true, Free: node(-1)},
			want: "insufficient nvidia.com/gpu: needs 2, 0 free", wantRefusal: ShortBesideBound},
		{name: "cpu short", n: NodeState{Seen: true, Free: Resources{GPU: 8, MilliCPU: 500, Memory: 32 << 30, Pods: 110}},
			want: "insufficient cpu: needs 1, 500m free", wantRefusal: ShortBesideBound},
		{name: "reservations leave too little", n: NodeState{Seen: true, Free: node(8), Held: Resources{GPU: 7, Pods: 7}},
			want: "7 nvidia.com/gpu reserved for gang ns/a, ns/b on n1: needs 2, 1 free outside reservations", wantRefusal: ReservedForOthers},
		{name: "short beside bound pods speaks before reservations", n: NodeState{Seen: true, Free: node(1), Held: Resources{GPU: 1, Pods: 1}},
			want: "insufficient nvidia.com/gpu: needs 2, 1 free", wantRefusal: ShortBesideBound},
		{name: "fits beside reservations", n: NodeState{Seen: true, Free: node(8), Held: Resources{GPU: 6, Pods: 6}}},
		// The scheduler offered the node, so it has seen the deletion lockstep's informer has not.
		{name: "fits once the pods being deleted are gone", n: NodeState{Seen: true, Free: node(0), Leaving: Resources{GPU: 2, Pods: 1}}},
		{name: "pods being deleted leave too little", n: NodeState{Seen: true, Free: node(0), Leaving: Resources{GPU: 1, Pods: 1}},
			want: "insufficient nvidia.com/gpu: needs 2, 0 free", wantRefusal: ShortBesideBound},
		{name: "what pods being deleted free is still held for others", n: NodeState{Seen: true, Free: node(0), Leaving: Resources{GPU: 2, Pods: 1}, Held: Resources{GPU: 1, Pods: 1}},
			want: "1 nvidia.com/gpu reserved for gang ns/a, ns/b on n1: needs 2, 1 free outside reservations", wantRefusal: ReservedForOthers},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			reason, refusal := WhyNot(req, "n1", &tc.n, holders)
			require.Equal(t, tc.want, reason)
			require.Equal(t, tc.wantRefusal, refusal)
		})
	}
}

// Only a shortfall beside bound pods is one evicting pods might cure.
func TestRefusalPreemptible(t *testing.T) {
	for refusal, want := range map[Refusal]bool{Fits: false, NotSeen: false, ShortBesideBound: true, ReservedForOthers: false} {
		require.Equal(t, want, refusal.Preemptible(), "refusal %d", refusal)
	}
}
