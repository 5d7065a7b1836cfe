package quota

import (
	"testing"

	"github.com/stretchr/testify/assert"
)

func TestShareIsWeightedWaterFilling(t *testing.T) {
	for _, tc := range []struct {
		name   string
		total  int64
		claims []Claim
		want   []int64
	}{
		{
			// Volcano proportion's own worked example: B's weighted 8 is more than it asks.
			name: "what a queue cannot use goes to the others", total: 12,
			claims: []Claim{{Weight: 1, Ceiling: 10}, {Weight: 2, Ceiling: 3}},
			want:   []int64{9, 3},
		},
		{
			name: "weights 3:1, both asking everything", total: 8,
			claims: []Claim{{Weight: 3, Ceiling: 8}, {Weight: 1, Ceiling: 8}},
			want:   []int64{6, 2},
		},
		{
			name: "a queue alone gets all it asks", total: 8,
			claims: []Claim{{Weight: 1, Ceiling: 8}},
			want:   []int64{8},
		},
		{
			name: "everyone fits: each gets what it asks", total: 100,
			claims: []Claim{{Weight: 1, Ceiling: 10}, {Weight: 5, Ceiling: 20}},
			want:   []int64{10, 20},
		},
		{
			name: "a guarantee floors the share above the weight's", total: 8,
			claims: []Claim{{Weight: 1, Floor: 4, Ceiling: 8}, {Weight: 3, Ceiling: 8}},
			want:   []int64{4, 4},
		},
		{
			name: "a guarantee is deserved while the queue asks less", total: 8,
			claims: []Claim{{Weight: 1, Floor: 4, Ceiling: 0}, {Weight: 1, Ceiling: 8}},
			want:   []int64{4, 4},
		},
		{
			name: "floors beyond the total are each kept", total: 4,
			claims: []Claim{{Weight: 1, Floor: 3, Ceiling: 8}, {Weight: 1, Floor: 3, Ceiling: 8}},
			want:   []int64{3, 3},
		},
		{
			name: "rounding leftovers go to the heavier queue first", total: 3,
			claims: []Claim{{Weight: 1, Ceiling: 3}, {Weight: 2, Ceiling: 3}},
			want:   []int64{1, 2},
		},
		{
			name: "equal weights, odd total: nothing is lost", total: 3,
			claims: []Claim{{Weight: 1, Ceiling: 3}, {Weight: 1, Ceiling: 3}},
			want:   []int64{2, 1},
		},
		{
			name: "weight 0 counts as 1", total: 4,
			claims: []Claim{{Weight: 0, Ceiling: 4}, {Weight: 1, Ceiling: 4}},
			want:   []int64{2, 2},
		},
		{
			name: "millicores divide finely", total: 10_000,
			claims: []Claim{{Weight: 1, Ceiling: 10_000}, {Weight: 2, Ceiling: 10_000}, {Weight: 1, Ceiling: 1_000}},
			want:   []int64{3000, 6000, 1000},
		},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got := Share(tc.total, tc.claims)
			assert.Equal(t, tc.want, got)
		})
	}
}

func TestShareNeverHandsOutMoreThanTotalBeyondFloors(t *testing.T) {
	claims := []Claim{{Weight: 7, Ceiling: 1000}, {Weight: 3, Ceiling: 5}, {Weight: 11, Floor: 20, Ceiling: 900}, {Weight: 1, Ceiling: 1}}
	for total := int64(21); total < 2000; total += 37 {
		sum := int64(0)
		for i, v := range Share(total, claims) {
			lo, hi := claims[i].bounds()
			assert.GreaterOrEqual(t, v, lo)
			assert.LessOrEqual(t, v, hi)
			sum += v
		}
		assert.LessOrEqual(t, sum, total, "total %d", total)
		if total < 1906 {
			assert.Equal(t, total, sum, "total %d: capacity left undivided while queues ask more", total)
		}
	}
}

// KAI Scheduler's own cases for dividing GPUs between two queues (plugins/proportion/
// resource_division, "two queues", v0.17.0, d5bc503a): each deserves 2 (its quota),
// has an overQuotaWeight of 2 and asks 6, unless the case says otherwise.
func TestShareOverQuotaAsKAIDoes(t *testing.T) {
	kai := func(weight, ceiling int64, priority int32) Claim {
		return Claim{Weight: weight, Floor: 2, Ceiling: ceiling, OverFloor: true, Priority: priority}
	}
	for _, tc := range []struct {
		name   string
		total  int64
		claims []Claim
		want   []int64
	}{
		{"allocates many available gpus", 15, []Claim{kai(2, 6, 0), kai(2, 6, 0)}, []int64{6, 6}},
		{"allocates exact requested amount gpus", 12, []Claim{kai(2, 6, 0), kai(2, 6, 0)}, []int64{6, 6}},
		{"allocates GPUs proportionally: 2 deserved and 1 or 3 over quota", 8, []Claim{kai(1, 6, 0), kai(3, 6, 0)}, []int64{3, 5}},
		{"doesn't allocate more than allowed (a limit of 5)", 12, []Claim{kai(2, 5, 0), kai(2, 6, 0)}, []int64{5, 6}},
		{"distributes the remainder to the largest part left", 11, []Claim{kai(1, 10, 0), kai(4, 10, 0)}, []int64{3, 8}},
		{"distributes the remainder to the first in order", 11, []Claim{kai(2, 6, 0), kai(2, 6, 0)}, []int64{6, 5}},
		{"priority doesn't affect deserved", 4, []Claim{kai(2, 6, 1), kai(2, 6, 2)}, []int64{2, 2}},
		{"priority does affect over-quota", 6, []Claim{kai(2, 6, 1), kai(2, 6, 2)}, []int64{2, 4}},
		{"priority does affect over-quota, even when overQuotaWeight is set", 6, []Claim{kai(100, 6, 1), kai(1, 6, 2)}, []int64{2, 4}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			assert.Equal(t, tc.want, Share(tc.total, tc.claims))
		})
	}
}

func TestShareByWeightOfTheWholeIsNotKAIs(t *testing.T) {
	// The same queues shared as Volcano's proportion does: the weight divides the whole 8 and
	// the quota only lifts a queue that would get less.
	volcano := []Claim{{Weight: 1, Floor: 2, Ceiling: 6}, {Weight: 3, Floor: 2, Ceiling: 6}}
	assert.Equal(t, []int64{2, 6}, Share(8, volcano))
}
