package quota

import (
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func TestReclaimKeepsBothQueuesOnTheirSideOfTheirShares(t *testing.T) {
	b := world{queues: []Queue{vq("a"), vq("b"), vq("locked", func(q *Queue) { q.Reclaimable = false }), vq("kept", guarantee(3))},
		used: map[string]int64{"a": 7, "locked": 2, "kept": 3}}.book()
	ask := func(n int64) Question {
		return Question{Queue: Key(volcano, "b"), Gang: "ns/b", Request: gpus(n), Capacity: gpus(12)}
	}
	_, why := b.StartReclaim(ask(8))
	assert.Contains(t, why, "Volcano Queue b would end above its fair share of nvidia.com/gpu (deserves 3, holds 0, gang ns/b's quorum asks 8 more)")

	rc, why := b.StartReclaim(ask(3))
	require.NotNil(t, rc, why)
	// Shares of 12 with b asking 3: a 4, b 3, locked 2, kept 3.
	assert.True(t, rc.MayTake(Key(volcano, "a"), gpus(3)), "a holds 7 and deserves 4")
	assert.False(t, rc.MayTake(Key(volcano, "a"), gpus(4)), "a would end below its share")
	rc.Take(Key(volcano, "a"), gpus(2))
	assert.False(t, rc.MayTake(Key(volcano, "a"), gpus(2)), "what the plan took already counts")
	rc.Give(Key(volcano, "a"), gpus(2))
	assert.True(t, rc.MayTake(Key(volcano, "a"), gpus(2)))
	assert.False(t, rc.MayTake(Key(volcano, "locked"), gpus(1)), "reclaimable: false")
	assert.False(t, rc.MayTake(Key(volcano, "kept"), gpus(1)), "never below a guarantee")
	assert.False(t, rc.MayTake(Key(volcano, "nope"), gpus(1)), "a queue no object defines gives nothing back")
}

func TestReclaimKeepsSharesOnlyOfWhatIsScarce(t *testing.T) {
	b := NewBook()
	b.SetQueue(vq("a"))
	b.SetQueue(vq("b"))
	b.Use(Key(volcano, "a"), Resources{GPU: 8, MilliCPU: 8000})
	rc, why := b.StartReclaim(Question{Queue: Key(volcano, "b"), Request: Resources{GPU: 2, MilliCPU: 2000}, Capacity: Resources{GPU: 8, MilliCPU: 64000}})
	require.NotNil(t, rc, why)
	assert.True(t, rc.MayTake(Key(volcano, "a"), Resources{GPU: 2, MilliCPU: 2000}),
		"cpu is plentiful: a's cpu share, all it asks, does not keep its GPUs from going")
}
