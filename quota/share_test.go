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
