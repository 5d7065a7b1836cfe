package inspect

import (
	"bytes"
	"strings"
	"testing"
	"time"

	"github.com/lockstep-sched/lockstep/views"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func TestGangsTable(t *testing.T) {
	gangs := []views.GangStatus{
		aGang("ml", "big", 3).total(4).queue("Volcano Queue team-a").priority(10).
			reason("3 members need 6 nvidia.com/gpu, 2 free; gang ml/small holds 4 in reservations").
			line(2, 2, "priority 10; behind 0 gangs").
			member("big-0", "Pending", "").member("big-1", "Pending", "").build(),
		aGang("ml", "small", 2).phase(views.PhaseBound).source("Volcano PodGroup ml/small-with-a-very-long-name (scheduling.volcano.sh/v1beta1)").
			reason("quorum reached, 2 members bound in 12ms").
			member("small-0", "Bound", "gpu-0").member("small-1", "Bound", "gpu-1").build(),
	}
	created := Created{"ml/big-0": now.Add(-3 * time.Minute), "ml/big-1": now.Add(-5 * time.Minute), "ml/small-0": now.Add(-90 * time.Second)}
	for _, tc := range []struct {
		name string
		view View
		want string
	}{{
		name: "one namespace, no terminal",
		view: View{Now: now},
		want: `
GANG    SOURCE                         PHASE     BOUND/MIN/TOTAL   QUEUE                  AGE   REASON
big     Koordinator annotations        Waiting   0/3/4             Volcano Queue team-a   5m    3 members need 6 nvidia.com/gpu, 2 free; gang ml/small ho...
small   Volcano PodGroup ml/small...   Bound     2/2/2             -                      90s   quorum reached, 2 members bound in 12ms
`,
	}, {
		name: "all namespaces in a narrow terminal",
		view: View{Now: now, AllNamespaces: true, Width: 140},
		want: `
NAMESPACE   GANG    SOURCE                         PHASE     BOUND/MIN/TOTAL   QUEUE                  AGE   REASON
ml          big     Koordinator annotations        Waiting   0/3/4             Volcano Queue team-a   5m    3 members need 6 nvidia.com/g...
ml          small   Volcano PodGroup ml/small...   Bound     2/2/2             -                      90s   quorum reached, 2 members bou...
`,
	}, {
		name: "wide keeps every word",
		view: View{Now: now, Wide: true, Width: 80},
		want: `
GANG    SOURCE                                                                            PHASE     BOUND/MIN/TOTAL   QUEUE                  AGE   PRIORITY   LINE   REASON
big     Koordinator annotations                                                           Waiting   0/3/4             Volcano Queue team-a   5m    10         2/2    3 members need 6 nvidia.com/gpu, 2 free; gang ml/small holds 4 in reservations
small   Volcano PodGroup ml/small-with-a-very-long-name (scheduling.volcano.sh/v1beta1)   Bound     2/2/2             -                      90s   0          -      quorum reached, 2 members bound in 12ms
`,
	}} {
		t.Run(tc.name, func(t *testing.T) {
			var out bytes.Buffer
			require.NoError(t, GangsTable(&out, gangs, created, tc.view))
			assert.Equal(t, strings.TrimPrefix(tc.want, "\n"), out.String())
		})
	}
}

func TestGangsTableAgeUnknown(t *testing.T) {
	var out bytes.Buffer
	require.NoError(t, GangsTable(&out, []views.GangStatus{aGang("ml", "big", 1).member("big-0", "Pending", "").build()}, Created{}, View{Now: now}))
	assert.Contains(t, out.String(), "<unknown>")
	assert.Contains(t, out.String(), "   -\n", "no reason is a dash")
}

func TestQueuesTable(t *testing.T) {
	queues := []views.QueueStatus{{
		Key: "Volcano Queue team-a", State: "Open", Weight: 3,
		Allocated:  views.Quantities{"nvidia.com/gpu": "4", "cpu": "8", "memory": "12Gi"},
		Deserved:   views.Quantities{"nvidia.com/gpu": "6"},
		Capability: views.Quantities{"nvidia.com/gpu": "4"},
		Waiting:    []views.WaitingGang{{Gang: "ml/big", Reason: "gang ml/big waits for its queue: Volcano Queue team-a: over its limit"}},
	}, {
		Key: "ElasticQuota ml/broken", Error: "spec.max: cpu: quantities must match the regular expression",
	}}
	var out bytes.Buffer
	require.NoError(t, QueuesTable(&out, queues, View{}))
	assert.Equal(t, `QUEUE                    STATE   WEIGHT   ALLOCATED                 DESERVED   CAPABILITY   WAITING
Volcano Queue team-a     Open    3        gpu=4,cpu=8,memory=12Gi   gpu=6      gpu=4        1: waits for its queue: Volcano Queue team-a: over its limit
ElasticQuota ml/broken   Error   0        -                         -          -            spec.max: cpu: quantities must match the regular expression
`, out.String())
}

func TestNodesTable(t *testing.T) {
	nodes := []views.NodeStatus{
		{Name: "gpu-0", GPUs: 8, GPUsFree: 6, TopologySource: "annotation"},
		{Name: "gpu-1", GPUs: 8, GPUsFree: 0, TopologySource: "uniform", Unschedulable: true,
			TopologyError: `annotation lockstep.dev/gpu-topology: version 3 is unknown`},
		{Name: "gpu-2", GPUs: 4, GPUsFree: 3, TopologySource: "dra",
			DRA: []views.DRAPool{{Driver: "gpu.nvidia.com", Pool: "gpu-2", Classes: []string{"gpu.nvidia.com"}, GPUs: 4, Free: 3}}},
	}
	var out bytes.Buffer
	require.NoError(t, NodesTable(&out, nodes, View{}))
	assert.Equal(t, `NODE    GPUS FREE/TOTAL   SCHEDULABLE     TOPOLOGY     DRA                        PROBLEMS
gpu-0   6/8               yes             annotation   -                          -
gpu-1   0/8               no (cordoned)   uniform      -                          annotation lockstep.dev/gpu-topology: version 3 is unknown
gpu-2   3/4               yes             dra          gpu.nvidia.com/gpu-2 3/4   -
`, out.String())
}

func TestShorten(t *testing.T) {
	for _, tc := range []struct {
		in   string
		n    int
		want string
	}{{"abcdef", 0, "abcdef"}, {"abcdef", 6, "abcdef"}, {"abcdef", 5, "ab..."}, {"ünïcödé", 5, "ün..."}} {
		assert.Equal(t, tc.want, shorten(tc.in, tc.n), "%q to %d", tc.in, tc.n)
	}
}
