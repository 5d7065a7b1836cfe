package dialect

import (
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/lockstep-sched/lockstep/placement"
	"github.com/lockstep-sched/lockstep/quota"
)

// kaiResources builds a KAI Queue's spec.resources: per resource, quota, limit and
// overQuotaWeight.
func kaiRes(gpu, cpu, memory [3]any) map[string]any {
	one := func(v [3]any) map[string]any {
		out := map[string]any{}
		for i, k := range []string{"quota", "limit", "overQuotaWeight"} {
			if v[i] != nil {
				out[k] = v[i]
			}
		}
		return out
	}
	return map[string]any{"gpu": one(gpu), "cpu": one(cpu), "memory": one(memory)}
}

func TestParseKAIQueue(t *testing.T) {
	base := func(q quota.Queue) quota.Queue {
		q.Kind, q.Name, q.Source = KindKAIQueue, "team-a", "KAI Queue team-a (scheduling.run.ai/v2)"
		q.State, q.Reclaimable, q.WeighsOverQuota = quota.Open, true, true
		if q.Weight == 0 {
			q.Weight = 1
		}
		if q.Priority == 0 {
			q.Priority = 100
		}
		return q
	}
	unbounded := [3]any{int64(-1), int64(-1), int64(1)}
	tests := []struct {
		name    string
		spec    map[string]any
		want    quota.Queue
		wantErr string
	}{
		{name: "KAI's quickstart queue: every quota and limit -1", spec: map[string]any{"resources": kaiRes(unbounded, unbounded, unbounded)},
			want: base(quota.Queue{DeservesAll: quota.Counted})},
		{name: "a team's leaf: quotas, limits and weights in KAI's units", spec: map[string]any{
			"parentQueue": "research", "priority": int64(200),
			"resources": kaiRes([3]any{int64(2), int64(8), int64(3)}, [3]any{int64(4000), int64(-1), int64(1)}, [3]any{int64(1024), int64(-1), nil})},
			want: base(quota.Queue{Parent: "research", ParentField: "spec.parentQueue", Priority: 200, Weight: 3,
				Min:        placement.Resources{GPU: 2, MilliCPU: 4000, Memory: 1024e6},
				Capability: quota.Limit{Amount: placement.Resources{GPU: 8}, Named: quota.GPU}})},
		{name: "an absent limit allows none of the resource, as KAI's over-limit check reads it",
			spec: map[string]any{"resources": map[string]any{"gpu": map[string]any{"quota": int64(2), "limit": int64(2)}}},
			want: base(quota.Queue{Min: placement.Resources{GPU: 2},
				Capability: quota.Limit{Amount: placement.Resources{GPU: 2}, Named: quota.Counted}})},
		{name: "no resources: KAI's webhook refuses it", spec: map[string]any{},
			wantErr: `KAI Queue team-a: spec.resources="": must be given: KAI's webhook refuses a queue without it`},
		{name: "a fraction of a GPU", spec: map[string]any{"resources": kaiRes([3]any{0.5, int64(-1), nil}, unbounded, unbounded)},
			wantErr: `KAI Queue team-a: spec.resources.gpu.quota="0.5": must be a whole number of GPUs: lockstep does not share a GPU between pods`},
		{name: "quota above limit", spec: map[string]any{"resources": kaiRes([3]any{int64(8), int64(4), nil}, unbounded, unbounded)},
			wantErr: `KAI Queue team-a: spec.resources.gpu.quota="8": more than spec.resources.gpu.limit, 4: a queue cannot deserve more than its limit`},
		{name: "below -1", spec: map[string]any{"resources": kaiRes(unbounded, [3]any{int64(-2), int64(-1), nil}, unbounded)},
			wantErr: `KAI Queue team-a: spec.resources.cpu.quota="-2": must be -1 (no bound) or more`},
		{name: "its own parent", spec: map[string]any{"parentQueue": "team-a", "resources": kaiRes(unbounded, unbounded, unbounded)},
			wantErr: `KAI Queue team-a: spec.parentQueue="team-a": a queue cannot be its own parent`},
		{name: "a negative weight", spec: map[string]any{"resources": kaiRes([3]any{int64(1), int64(-1), int64(-3)}, unbounded, unbounded)},
			wantErr: `KAI Queue team-a: spec.resources.gpu.overQuotaWeight="-3": must be between 0 and 2147483647`},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			obj := queueObject(KAIQueue, "team-a", tc.spec, nil)
			got := KAIQueue.Parse(obj)
			if tc.wantErr != "" {
				require.EqualError(t, got.Err, tc.wantErr)
				return
			}
			require.NoError(t, got.Err)
			assert.Equal(t, tc.want, got)
		})
	}
}
