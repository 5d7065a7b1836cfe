package quota

import (
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func parent(name string) func(*Queue) {
	return func(q *Queue) { q.Parent, q.ParentField = name, "spec.parent" }
}
func deserved(n int64) func(*Queue) { return func(q *Queue) { q.Min = gpus(n) } }

func key(name string) string { return Key(volcano, name) }

// admit asks whether a gang of queue name asking n is admitted on a cluster of capacity
// , with what the book's queues hold.
func admit(b *Book, name string, n, capacity int64) string {
	return b.Admit(Question{Queue: key(name), Gang: "ns/g", Request: gpus(n), Capacity: gpus(capacity), Fair: true})
}

func TestTreeAdmission(t *testing.T) {
	for _, tc := range []struct {
		name  string
		world world
		queue string
		asks  int64
		// want is a part of the reason, "" for admitted.
		want string
	}{
		// Volcano's capacity plugin, hierarchy on (Test_capacityPlugin_OnSessionOpenWithHierarchy,
		// v1.12), its cpus read as.
		{name: "Volcano case 0: a leaf queue admits", queue: "q11", asks: 1,
			world: world{queues: []Queue{vq("q1", capGPU(4)), vq("q2", capGPU(4)), vq("q11", parent("q1"), capGPU(1)), vq("q12", parent("q1"), capGPU(3))}}},
		{name: "Volcano case 1: a queue with children admits nothing", queue: "q1", asks: 1,
			world: world{queues: []Queue{vq("q1", capGPU(4)), vq("q2", capGPU(4)), vq("q11", parent("q1"), capGPU(1)), vq("q12", parent("q1"), capGPU(3))}},
			want:  "Volcano Queue q1 is a parent queue (of q11, q12): only the queues at the leaves of the tree run work"},
		{name: "Volcano case 4: an ancestor's limit, full with its other children's work, refuses", queue: "q33", asks: 3,
			world: world{queues: []Queue{vq("q3", capGPU(4), deserved(4)), vq("q31", parent("q3"), capGPU(4), deserved(2)),
				vq("q32", parent("q3"), capGPU(4), deserved(2)), vq("q33", parent("q3"), capGPU(4))},
				used: map[string]int64{"q31": 2, "q32": 2}},
			want: "Volcano Queue q3: nvidia.com/gpu would go over its limit of 4: the queues under it hold 4 and gang ns/g's quorum asks 3 more; Volcano Queue q33 is under it"},
		{name: "Volcano case 6: two children without limits of their own share their parent's", queue: "q62", asks: 2,
			world: world{queues: []Queue{vq("q6", capGPU(2)), vq("q61", parent("q6")), vq("q62", parent("q6"))}, used: map[string]int64{"q61": 2}},
			want:  "Volcano Queue q6: nvidia.com/gpu would go over its limit of 2"},
		{name: "a child's own larger limit does not lift its parent's", queue: "a", asks: 10,
			world: world{queues: []Queue{vq("p", capGPU(8)), vq("a", parent("p"), capGPU(16)), vq("b", parent("p"))}},
			want:  "Volcano Queue p: nvidia.com/gpu would go over its limit of 8: the queues under it hold 0"},
		{name: "a grandparent's limit holds too", queue: "leaf", asks: 5,
			world: world{queues: []Queue{vq("top", capGPU(4)), vq("mid", parent("top")), vq("leaf", parent("mid"))}},
			want:  "Volcano Queue top: nvidia.com/gpu would go over its limit of 4"},
		{name: "a closed parent closes its children", queue: "a", asks: 1,
			world: world{queues: []Queue{vq("p", state(Closed)), vq("a", parent("p"))}},
			want:  "Volcano Queue p is Closed: it takes no new work (what already runs in it keeps running); Volcano Queue a is under it"},
		{name: "a parent no object defines: its children wait", queue: "a", asks: 1,
			world: world{queues: []Queue{vq("a", parent("gone"))}},
			want:  "Volcano Queue a cannot be used: Volcano Queue a: spec.parent names parent gone, which does not exist"},
		{name: "a cycle: each queue in it waits, naming the cycle", queue: "b", asks: 1,
			world: world{queues: []Queue{vq("a", parent("b")), vq("b", parent("a"))}},
			want:  "Volcano Queue b: spec.parent: the queues form a cycle, b → a → b"},
		{name: "under a cycle: the queue waits, naming the queue whose parent closes it", queue: "c", asks: 1,
			world: world{queues: []Queue{vq("a", parent("b")), vq("b", parent("a")), vq("c", parent("a"))}},
			want:  "Volcano Queue c is under Volcano Queue b, which cannot be used: Volcano Queue b: spec.parent: the queues form a cycle, a → b → a"},
		{name: "a queue marked a parent with no child runs nothing", queue: "p", asks: 1,
			world: world{queues: []Queue{vq("p", func(q *Queue) { q.IsParent = true })}},
			want:  "Volcano Queue p is marked a parent queue, which runs no work itself, and no queue names it as its parent"},
		{name: "a guarantee of another subtree's parent is kept from this one", queue: "x", asks: 6,
			world: world{queues: []Queue{vq("p", guarantee(8)), vq("a", parent("p")), vq("x")}},
			want:  "of the 12 nvidia.com/gpu the queues have free, 8 are kept for the guarantees of Volcano Queue p"},
		{name: "a parent's guarantee is not kept from its own children", queue: "a", asks: 10,
			world: world{queues: []Queue{vq("p", guarantee(8)), vq("a", parent("p")), vq("x")}}},
		{name: "a sibling's guarantee is kept from a child", queue: "a", asks: 6,
			world: world{queues: []Queue{vq("p"), vq("a", parent("p")), vq("b", parent("p"), guarantee(8))}},
			want:  "8 are kept for the guarantees of Volcano Queue b"},
		{name: "a parent's guarantee and its child's count once, the larger", queue: "x", asks: 5,
			world: world{queues: []Queue{vq("p", guarantee(8)), vq("b", parent("p"), guarantee(6)), vq("x")}, used: map[string]int64{"b": 2}},
			// x asks 5 of the 10 free; p keeps 6 (8 less b's 2), which covers b's 4.
			want: "6 are kept for the guarantees of Volcano Queue p, Volcano Queue b"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got := admit(tc.world.book(), tc.queue, tc.asks, 12)
			if tc.want == "" {
				assert.Empty(t, got)
				return
			}
			assert.Contains(t, got, tc.want)
		})
	}
}

func TestTreeOrderOfArrival(t *testing.T) {
	b := NewBook()
	b.SetQueue(vq("a", parent("p")))
	require.Contains(t, admit(b, "a", 1, 8), "names parent p, which does not exist", "a child made before its parent waits")
	b.SetQueue(vq("p", capGPU(4)))
	require.Empty(t, admit(b, "a", 1, 8), "its parent made, it admits")
	require.Contains(t, admit(b, "a", 5, 8), "Volcano Queue p: nvidia.com/gpu would go over its limit of 4", "and its parent's limit holds")
	b.DeleteQueue(key("p"))
	require.Contains(t, admit(b, "a", 1, 8), "names parent p, which does not exist", "its parent gone, it waits again")
	require.True(t, b.Nested(key("a"), key("p")), "a change to the parent it names concerns it even once that parent is gone")
	require.False(t, b.Nested(key("p"), key("a")))
}

func TestTreeShares(t *testing.T) {
	for _, tc := range []struct {
		name     string
		world    world
		capacity int64
		want     map[string]int64
	}{
		{name: "each level shares what its parent deserves, by weight", capacity: 16,
			world: world{queues: []Queue{vq("p"), vq("a", parent("p")), vq("b", parent("p"), weight(3)), vq("x")},
				waiting: map[string]int64{"a": 16, "b": 16, "x": 16}},
			want: map[string]int64{"p": 8, "a": 2, "b": 6, "x": 8}},
		{name: "what a child cannot use goes to its siblings before the parent's peers", capacity: 16,
			world: world{queues: []Queue{vq("p"), vq("a", parent("p")), vq("b", parent("p")), vq("x")},
				waiting: map[string]int64{"a": 1, "b": 16, "x": 16}},
			want: map[string]int64{"p": 8, "a": 1, "b": 7, "x": 8}},
		{name: "a parent's limit caps its subtree's share", capacity: 16,
			world: world{queues: []Queue{vq("p", capGPU(4)), vq("a", parent("p")), vq("b", parent("p")), vq("x")},
				waiting: map[string]int64{"a": 16, "b": 16, "x": 16}},
			want: map[string]int64{"p": 4, "a": 2, "b": 2, "x": 12}},
		{name: "children's guarantees floor their parent's share", capacity: 12,
			world: world{queues: []Queue{vq("p"), vq("a", parent("p"), guarantee(5)), vq("b", parent("p"), guarantee(5)), vq("x")},
				waiting: map[string]int64{"a": 12, "b": 12, "x": 12}},
			want: map[string]int64{"p": 10, "a": 5, "b": 5, "x": 2}},
		{name: "KAI: a department of quota -1 deserves what there is; its teams split what is over their quotas by weight", capacity: 8,
			world: world{queues: []Queue{vq("dept", func(q *Queue) { q.DeservesAll, q.WeighsOverQuota = GPU, true }),
				vq("a", parent("dept"), deserved(2), func(q *Queue) { q.WeighsOverQuota = true }),
				vq("b", parent("dept"), deserved(2), weight(3), func(q *Queue) { q.WeighsOverQuota = true })},
				used: map[string]int64{"a": 3, "b": 5}, waiting: map[string]int64{"a": 2, "b": 2}},
			want: map[string]int64{"dept": 8, "a": 3, "b": 5}},
		{name: "a parent that holds work of its own, sorted after its child, shares once", capacity: 16,
			world: world{queues: []Queue{vq("z"), vq("a", parent("z")), vq("x")},
				used: map[string]int64{"z": 2}, waiting: map[string]int64{"a": 16, "x": 16}},
			want: map[string]int64{"z": 8, "a": 8, "x": 8}},
		{name: "a parent alone working takes what its subtree asks", capacity: 12,
			world: world{queues: []Queue{vq("p"), vq("a", parent("p")), vq("x")}, used: map[string]int64{"a": 3}},
			want:  map[string]int64{"p": 3, "a": 3}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			shares := tc.world.book().Shares(gpus(tc.capacity), nil, "", Resources{})
			got := map[string]int64{}
			for k, r := range shares {
				got[k[len(volcano)+1:]] = r.GPU
			}
			assert.Equal(t, tc.want, got)
		})
	}
}

func TestTreeReclaim(t *testing.T) {
	// Volcano's case 3 (hierarchy on): 8 all held, q31 over its deserved and q4 at its
	// share; q32, below its deserved, takes back from its sibling q31 and not from q4.
	b := world{queues: []Queue{vq("q3", capGPU(8), deserved(4)), vq("q31", parent("q3"), capGPU(4), deserved(2)),
		vq("q32", parent("q3"), capGPU(4), deserved(2)), vq("q4", capGPU(4), deserved(2))},
		used: map[string]int64{"q31": 4, "q4": 4}}.book()
	q := Question{Queue: key("q32"), Gang: "ns/pg6", Request: gpus(2), Capacity: gpus(8), Fair: true}
	rc, why := b.StartReclaim(q)
	require.Empty(t, why)
	assert.True(t, rc.MayTake(key("q31"), gpus(2)), "a sibling above its share gives back to it")
	assert.False(t, rc.MayTake(key("q31"), gpus(3)), "but not below its own share")
	assert.False(t, rc.MayTake(key("q4"), gpus(2)), "a queue of another subtree at its share keeps it")

	// From another subtree, each parent on the victim's side keeps its share.
	b = world{queues: []Queue{vq("p"), vq("a", parent("p")), vq("b", parent("p")), vq("x")},
		used: map[string]int64{"a": 4, "b": 4}, waiting: map[string]int64{"x": 4}}.book()
	rc, why = b.StartReclaim(Question{Queue: key("x"), Gang: "ns/x", Request: gpus(4), Capacity: gpus(8), Fair: true})
	require.Empty(t, why)
	assert.True(t, rc.MayTake(key("a"), gpus(2)), "a leaves 2 of its share 2; p keeps 6 of 4")
	rc.Take(key("a"), gpus(2))
	assert.True(t, rc.MayTake(key("b"), gpus(2)), "b likewise; p then keeps 4 of its share 4")
	rc.Take(key("b"), gpus(2))
	assert.False(t, rc.MayTake(key("b"), gpus(1)), "p would end below its share: no ping-pong back")
}

func TestTreeProblems(t *testing.T) {
	problems := TreeProblems([]Queue{vq("a", parent("b")), vq("b", parent("a")), vq("c", parent("nowhere")), vq("ok")})
	require.Len(t, problems, 3)
	assert.EqualError(t, problems[key("c")], "Volcano Queue c: spec.parent names parent nowhere, which does not exist")
	assert.Contains(t, problems[key("a")].Error(), "the queues form a cycle, a → b → a")
}

func TestTreeStatusesAddUpSubtrees(t *testing.T) {
	b := world{queues: []Queue{vq("p"), vq("a", parent("p")), vq("b", parent("p"))}, used: map[string]int64{"a": 3, "b": 2},
		waiting: map[string]int64{"b": 4}}.book()
	statuses := map[string]Status{}
	for _, s := range b.Statuses(gpus(16), nil) {
		statuses[s.Key] = s
	}
	p := statuses[key("p")]
	assert.Equal(t, int64(5), p.Allocated.GPU)
	assert.Equal(t, 1, p.Waiting)
	assert.Equal(t, []string{key("a"), key("b")}, p.Children)
	assert.Equal(t, key("p"), statuses[key("a")].Parent)
	assert.Equal(t, int64(3), statuses[key("a")].Allocated.GPU)
}

func TestDeservesAllIsNeverBelowItsShare(t *testing.T) {
	all := func(q *Queue) { q.DeservesAll = GPU }
	b := world{queues: []Queue{vq("kai", all), vq("other")}, used: map[string]int64{"kai": 6, "other": 2},
		waiting: map[string]int64{"other": 4}}.book()
	shares := b.Shares(gpus(8), nil, "", Resources{})
	assert.Equal(t, int64(6), shares[key("kai")].GPU, "it deserves what it asks, 6")
	_, why := b.StartReclaim(Question{Queue: key("other"), Gang: "ns/o", Request: gpus(2), Capacity: gpus(8), Fair: true})
	assert.Contains(t, why, "would end above its fair share", "the other queue's share is what is left, 2: it takes nothing back")
	rc := &Reclaim{book: b, shares: shares, taken: map[string]Resources{}, scarce: GPU, queue: key("other")}
	assert.False(t, rc.MayTake(key("kai"), gpus(1)), "nothing it holds is taken back")
}
