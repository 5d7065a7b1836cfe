package quota

import (
	"errors"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

const volcano = "Volcano Queue"

func gpus(n int64) Resources { return Resources{GPU: n} }

// vq is a Volcano-style queue; change it with the options.
func vq(name string, opts ...func(*Queue)) Queue {
	q := Queue{Kind: volcano, Name: name, Weight: 1, State: Open, Reclaimable: true}
	for _, o := range opts {
		o(&q)
	}
	return q
}

func capGPU(n int64) func(*Queue) {
	return func(q *Queue) { q.Capability = Limit{Amount: gpus(n), Named: GPU} }
}
func guarantee(n int64) func(*Queue) { return func(q *Queue) { q.Guarantee = gpus(n) } }
func weight(w int64) func(*Queue)    { return func(q *Queue) { q.Weight = w } }
func state(s State) func(*Queue)     { return func(q *Queue) { q.State = s } }
func priority(p int32) func(*Queue)  { return func(q *Queue) { q.Priority = p } }

// world is a book's state: queues, what each queue's bound pods use, and waiting gangs.
type world struct {
	queues  []Queue
	used    map[string]int64 // queue name -> GPUs bound
	waiting map[string]int64 // queue name -> GPUs a gang of it waits for ("gang-<name>")
}

func (w world) book() *Book {
	b := NewBook()
	for _, q := range w.queues {
		b.SetQueue(q)
	}
	for name, n := range w.used {
		b.Use(Key(volcano, name), gpus(n))
	}
	for name, n := range w.waiting {
		b.Want("ns/waiting-"+name, Key(volcano, name), gpus(n))
	}
	return b
}

func TestAdmitGangWhole(t *testing.T) {
	for _, tc := range []struct {
		name  string
		world world
		queue string
		asks  int64
		held  map[string]Resources
		// want is a part of the reason, "" for admitted.
		want string
	}{
		{name: "within capability", world: world{queues: []Queue{vq("a", capGPU(4))}}, queue: "a", asks: 4},
		{
			name: "the whole quorum over capability waits", world: world{queues: []Queue{vq("a", capGPU(4))}}, queue: "a", asks: 5,
			want: "Volcano Queue a: nvidia.com/gpu would go over its limit of 4: it holds 0 and gang ns/g's quorum asks 5 more",
		},
		{
			name: "bound pods count", world: world{queues: []Queue{vq("a", capGPU(4))}, used: map[string]int64{"a": 3}}, queue: "a", asks: 2,
			want: "it holds 3 and gang ns/g's quorum asks 2 more",
		},
		{
			name: "reservations count", world: world{queues: []Queue{vq("a", capGPU(4))}}, queue: "a", asks: 2,
			held: map[string]Resources{Key(volcano, "a"): gpus(3)}, want: "it holds 3",
		},
		{
			name:  "a resource the capability does not name is unlimited",
			world: world{queues: []Queue{vq("a", func(q *Queue) { q.Capability = Limit{Amount: Resources{MilliCPU: 1000}, Named: CPU} })}},
			queue: "a", asks: 100,
		},
		{name: "closed", world: world{queues: []Queue{vq("a", state(Closed))}}, queue: "a", asks: 1, want: "Volcano Queue a is Closed: it takes no new work"},
		{name: "closing", world: world{queues: []Queue{vq("a", state(Closing))}}, queue: "a", asks: 1, want: "is Closing"},
		{
			name: "unusable object", world: world{queues: []Queue{vq("a", func(q *Queue) { q.Err = errors.New("spec.weight: bad") })}},
			queue: "a", asks: 1, want: "Volcano Queue a cannot be used: spec.weight: bad",
		},
		{name: "missing queue", world: world{queues: []Queue{vq("a")}}, queue: "nope", asks: 1, want: "Volcano Queue nope does not exist"},
		{name: "the default queue needs no object", world: world{queues: []Queue{vq("a")}}, queue: DefaultName, asks: 1},
		{
			name:  "an idle queue's guarantee is kept",
			world: world{queues: []Queue{vq("a"), vq("b", guarantee(4))}}, queue: "a", asks: 6,
			want: "of the 8 nvidia.com/gpu the queues have free, 4 are kept for the guarantees of Volcano Queue b; gang ns/g's quorum asks 6",
		},
		{name: "the rest of the cluster is free beside a guarantee", world: world{queues: []Queue{vq("a"), vq("b", guarantee(4))}}, queue: "a", asks: 4},
		{
			name:  "a used guarantee keeps nothing more",
			world: world{queues: []Queue{vq("a"), vq("b", guarantee(4))}, used: map[string]int64{"b": 4}}, queue: "a", asks: 4,
		},
		{name: "the queue's own guarantee is its own", world: world{queues: []Queue{vq("a", guarantee(8))}}, queue: "a", asks: 8},
		{name: "alone, a queue may fill the idle cluster", world: world{queues: []Queue{vq("a", weight(1)), vq("b", weight(3))}}, queue: "a", asks: 8},
		{
			name:  "over its share, a queue may not take what a waiting queue is owed",
			world: world{queues: []Queue{vq("a", weight(3)), vq("b", weight(1))}, used: map[string]int64{"a": 6}, waiting: map[string]int64{"b": 2}},
			queue: "a", asks: 1,
			want: "Volcano Queue a is at its fair share of nvidia.com/gpu (deserves 6, holds 6) and gang ns/g's quorum asks 1 more; the 2 left free are owed to the waiting gangs of Volcano Queue b",
		},
		{
			name:  "below its share, a queue takes what frees",
			world: world{queues: []Queue{vq("a", weight(3)), vq("b", weight(1))}, used: map[string]int64{"a": 6}, waiting: map[string]int64{"b": 2}},
			queue: "b", asks: 2,
		},
		{
			name:  "beyond what others are owed, a queue over its share still fills idle capacity",
			world: world{queues: []Queue{vq("a", weight(3)), vq("b", weight(1))}, used: map[string]int64{"a": 4}, waiting: map[string]int64{"b": 1}},
			queue: "a", asks: 3,
		},
		{
			name: "a higher-priority queue is owed all it waits for",
			world: world{queues: []Queue{vq("a", weight(3)), vq("b", weight(1), priority(10))}, used: map[string]int64{"a": 6},
				waiting: map[string]int64{"b": 6}},
			queue: "a", asks: 1, want: "owed to the waiting gangs of Volcano Queue b",
		},
		{
			name:  "a closed queue is owed nothing",
			world: world{queues: []Queue{vq("a", weight(1)), vq("b", weight(3), state(Closed))}, used: map[string]int64{"a": 6}, waiting: map[string]int64{"b": 2}},
			queue: "a", asks: 2,
		},
	} {
		t.Run(tc.name, func(t *testing.T) {
			b := tc.world.book()
			got := b.Admit(Question{Queue: Key(volcano, tc.queue), Gang: "ns/g", Request: gpus(tc.asks), Held: tc.held, Capacity: gpus(8), Fair: true})
			if tc.want == "" {
				assert.Empty(t, got)
			} else {
				assert.Contains(t, got, tc.want)
			}
		})
	}
}

func TestNoQueueOfAKindMeansNothingIsEnforced(t *testing.T) {
	b := NewBook()
	assert.False(t, b.Enforcing())
	assert.Empty(t, b.Admit(Question{Queue: Key(volcano, "team-a"), Request: gpus(100), Capacity: gpus(8), Fair: true}),
		"a cluster with Volcano's CRDs and no Queue schedules Volcano's gangs as before")
	b.SetQueue(Queue{Kind: "ElasticQuota", Name: "ns/q", Namespace: "ns"})
	assert.Empty(t, b.Admit(Question{Queue: Key(volcano, "team-a"), Request: gpus(1), Capacity: gpus(8)}), "another kind's queues do not make this kind's enforced")
}

// YuniKorn makes the queues work names that its file does not define: such a queue is open and
// unlimited once some queue of the kind is defined, and missing again once the last one that says
// so is forgotten.
func TestQueuesMadeOnDemand(t *testing.T) {
	const kind = "YuniKorn queue"
	b := NewBook()
	b.SetQueue(Queue{Kind: kind, Name: "root.research", Weight: 1, State: Open, Capability: Limit{Amount: gpus(4), Named: GPU}, KindMadeOnDemand: true})
	made := Question{Queue: Key(kind, "root.team-b"), Request: gpus(6), Capacity: gpus(8), Fair: true}
	assert.Empty(t, b.Admit(made), "an undefined queue of a kind made on demand takes work, unlimited")
	assert.Contains(t, b.Admit(Question{Queue: Key(kind, "root.research"), Request: gpus(6), Capacity: gpus(8)}), "limit of 4")

	b.SetQueue(Queue{Kind: kind, Name: "root.research", Weight: 1, State: Open})
	assert.Contains(t, b.Admit(made), "does not exist", "redefined without the flag: the file's rules make no queue")
	b.SetQueue(Queue{Kind: kind, Name: "root.research", Weight: 1, State: Open, KindMadeOnDemand: true})
	b.DeleteQueue(Key(kind, "root.research"))
	assert.Empty(t, b.Admit(made), "no queue of the kind is left, so none is enforced")
}

func TestMinPoolBorrowsOnlyOthersUnusedMin(t *testing.T) {
	// scheduler-plugins capacity scheduling: the quotas together stay within the sum of mins.
	eq := func(ns string, min, max int64) Queue {
		return Queue{Kind: "ElasticQuota", Name: ns + "/quota", Namespace: ns, Weight: 1, State: Open, Min: gpus(min),
			Capability: Limit{Amount: gpus(max), Named: GPU}, BorrowsOnlyMin: true}
	}
	b := NewBook()
	b.SetQueue(eq("a", 2, 6))
	b.SetQueue(eq("b", 2, 6))
	a, bq := Key("ElasticQuota", "a/quota"), Key("ElasticQuota", "b/quota")
	assert.Equal(t, a, b.Resolve("a", Ref{}), "an ElasticQuota applies to its namespace's pods")
	ask := func(key string, n int64) string {
		return b.Admit(Question{Queue: key, Request: gpus(n), Capacity: gpus(16)})
	}
	assert.Empty(t, ask(a, 4), "a borrows b's unused min")
	b.Use(a, gpus(4))
	assert.Contains(t, ask(a, 1), "the ElasticQuotas together would go over the sum of their mins, 4: they hold 4 and the pod asks 1 more")
	assert.Contains(t, ask(bq, 1), "sum of their mins", "b's min is lent out until a gives it back")
	b.Unuse(a, gpus(2))
	assert.Empty(t, ask(bq, 2))
}

func TestResolveFollowsRefThenNamespaceDefaultThenFallback(t *testing.T) {
	b := NewBook()
	ref := Ref{Kind: volcano, Fallback: DefaultName}
	assert.Equal(t, "Volcano Queue default", b.Resolve("ns", ref))
	assert.True(t, b.SetNamespaceDefault("ns", volcano, "team-a"))
	assert.False(t, b.SetNamespaceDefault("ns", volcano, "team-a"), "no change")
	assert.Equal(t, "Volcano Queue team-a", b.Resolve("ns", ref))
	assert.Equal(t, "Volcano Queue default", b.Resolve("other", ref))
	ref.Name = "team-b"
	assert.Equal(t, "Volcano Queue team-b", b.Resolve("ns", ref), "the group's own spec.queue comes first")
	assert.True(t, b.SetNamespaceDefault("ns", volcano, ""))
	assert.Equal(t, "Volcano Queue default", b.Resolve("ns", Ref{Kind: volcano, Fallback: DefaultName}))
	assert.Equal(t, "", b.Resolve("ns", Ref{}), "no ref and no namespace quota: no queue")
}

func TestWantsShapeSharesAndAreForgotten(t *testing.T) {
	b := world{queues: []Queue{vq("a", weight(3)), vq("b", weight(1))}, used: map[string]int64{"a": 8}}.book()
	capacity := gpus(8)
	shares := b.Shares(capacity, nil, "", Resources{})
	assert.Equal(t, int64(8), shares[Key(volcano, "a")].GPU, "b waits for nothing: a deserves all it holds")
	b.Want("ns/g1", Key(volcano, "b"), gpus(4))
	b.Want("ns/g1", Key(volcano, "b"), gpus(4)) // told twice: counted once
	shares = b.Shares(capacity, nil, "", Resources{})
	assert.Equal(t, int64(6), shares[Key(volcano, "a")].GPU)
	assert.Equal(t, int64(2), shares[Key(volcano, "b")].GPU)
	st, ok := b.Status(Key(volcano, "b"), capacity, nil)
	require.True(t, ok)
	assert.Equal(t, 1, st.Waiting)
	assert.Equal(t, gpus(4), st.Wanted)
	b.Unwant("ns/g1")
	st, _ = b.Status(Key(volcano, "b"), capacity, nil)
	assert.Equal(t, 0, st.Waiting)
	assert.True(t, st.Wanted.IsZero())
}

func TestRankPutsTheQueueFurthestBelowItsShareFirst(t *testing.T) {
	b := world{queues: []Queue{vq("a", weight(1)), vq("b", weight(1)), vq("c", priority(5))},
		used: map[string]int64{"a": 4, "b": 1}, waiting: map[string]int64{"a": 2, "b": 2, "c": 1}}.book()
	held := map[string]Resources{}
	shares := b.Shares(gpus(10), held, "", Resources{})
	ra, rb, rc := b.Rank(Key(volcano, "a"), shares, held), b.Rank(Key(volcano, "b"), shares, held), b.Rank(Key(volcano, "c"), shares, held)
	assert.True(t, rb.Before(ra), "b holds less of its share than a: %+v %+v", rb, ra)
	assert.True(t, rc.Before(rb), "a higher queue priority goes first")
}

func TestDeletedQueueKeepsItsUseUntilPodsGo(t *testing.T) {
	b := world{queues: []Queue{vq("a", capGPU(4)), vq("b")}, used: map[string]int64{"a": 3}}.book()
	b.DeleteQueue(Key(volcano, "a"))
	assert.Contains(t, b.Admit(Question{Queue: Key(volcano, "a"), Request: gpus(1), Capacity: gpus(8)}), "does not exist")
	b.SetQueue(vq("a", capGPU(4)))
	assert.Contains(t, b.Admit(Question{Queue: Key(volcano, "a"), Request: gpus(2), Capacity: gpus(8)}), "it holds 3", "recreated, it finds its pods' use")
}

// Capacity owed to a queue whose waiting gangs could not take it anyway would sit idle: a queue
// is owed only what one of its waiting quorums fits in.
func TestNothingIsOwedToAGangThatCannotUseIt(t *testing.T) {
	b := world{queues: []Queue{vq("a", weight(3)), vq("b", weight(1))}, used: map[string]int64{"a": 6}}.book()
	b.Want("ns/huge", Key(volcano, "b"), gpus(100))
	ask := Question{Queue: Key(volcano, "a"), Gang: "ns/g", Request: gpus(2), Capacity: gpus(8), Fair: true}
	assert.Empty(t, b.Admit(ask), "b's only waiting gang needs 100 GPUs: the 2 it is due would stay idle")
	b.Want("ns/small", Key(volcano, "b"), gpus(2))
	assert.Contains(t, b.Admit(ask), "owed to the waiting gangs of Volcano Queue b", "a gang of b that fits in its due is owed it")
}

func TestQuotaCoversItsNamespacesAndTheDefaultTheRest(t *testing.T) {
	const koord = "Koordinator ElasticQuota"
	b := NewBook()
	team := Queue{Kind: koord, Name: "team", Namespaces: []string{"a", "b"}, Weight: 1, State: Open}
	assert.Equal(t, []string{"a", "b"}, b.SetQueue(team), "its pods are resolved again")
	assert.Equal(t, Key(koord, "team"), b.Resolve("a", Ref{}))
	assert.Equal(t, Key(koord, "team"), b.Resolve("b", Ref{}))
	assert.Equal(t, "", b.Resolve("c", Ref{}), "no default quota: no queue")
	assert.Equal(t, Key(koord, "other"), b.Resolve("a", Ref{Kind: koord, Name: "other"}), "a pod's label names its quota")

	def := Queue{Kind: koord, Name: "koordinator-default-quota", Namespaces: []string{AllNamespaces}, Weight: 1, State: Open}
	assert.Equal(t, []string{AllNamespaces}, b.SetQueue(def))
	assert.Equal(t, Key(koord, "koordinator-default-quota"), b.Resolve("c", Ref{}))
	assert.Equal(t, Key(koord, "team"), b.Resolve("a", Ref{}), "a namespace's own quota comes first")

	team.Namespaces = []string{"b", "d"}
	assert.Equal(t, []string{"a", "b", "d"}, b.SetQueue(team), "both the namespace it left and the one it took")
	assert.Equal(t, Key(koord, "koordinator-default-quota"), b.Resolve("a", Ref{}))
	assert.Equal(t, Key(koord, "team"), b.Resolve("d", Ref{}))

	assert.Equal(t, []string{"b", "d"}, b.DeleteQueue(Key(koord, "team")))
	assert.Equal(t, Key(koord, "koordinator-default-quota"), b.Resolve("b", Ref{}))
	assert.Equal(t, []string{AllNamespaces}, b.DeleteQueue(Key(koord, "koordinator-default-quota")))
	assert.Equal(t, "", b.Resolve("b", Ref{}))
	assert.Nil(t, b.DeleteQueue(Key(koord, "team")), "deleting twice changes nothing")

	ns := Queue{Kind: "ElasticQuota", Name: "e/q", Namespace: "e"}
	assert.Equal(t, []string{"e"}, b.SetQueue(ns), "a scheduler-plugins quota covers the namespace it lives in")
	assert.Equal(t, ns.Key(), b.Resolve("e", Ref{}))
}

// A queue whose gangs could not be admitted (missing, closed, unusable) is owed nothing.
func TestQueuesThatTakeNoGangAreOwedNothing(t *testing.T) {
	for _, tc := range []struct {
		name  string
		queue string
		defs  []Queue
	}{
		{"missing", "nope", nil},
		{"closed", "shut", []Queue{vq("shut", state(Closed))}},
		{"unusable", "bad", []Queue{vq("bad", func(q *Queue) { q.Err = errors.New("bad weight") })}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			b := world{queues: append([]Queue{vq("a")}, tc.defs...), used: map[string]int64{"a": 6}}.book()
			b.Want("ns/w", Key(volcano, tc.queue), gpus(1))
			assert.Empty(t, b.Admit(Question{Queue: Key(volcano, "a"), Gang: "ns/g", Request: gpus(2), Capacity: gpus(8), Fair: true}))
		})
	}
}

// A copy answers what the book answered when it was made, whatever the book does after; and the
// book's version tells its owner the copy is stale.
func TestCloneSharesNothingItsOwnerChanges(t *testing.T) {
	b := world{queues: []Queue{vq("a", capGPU(4)), vq("b")}, used: map[string]int64{"a": 2}, waiting: map[string]int64{"b": 3}}.book()
	b.SetNamespaceDefault("team", volcano, "a")
	ask := Question{Queue: Key(volcano, "a"), Gang: "team/g", Request: gpus(2), Capacity: gpus(16), Fair: true}
	c := b.Clone()
	require.Equal(t, b.Version(), c.Version())
	require.Equal(t, "", c.Admit(ask), "a holds 2 of its 4")

	before := b.Version()
	b.Use(Key(volcano, "a"), gpus(2))
	b.SetQueue(vq("a", capGPU(3)))
	b.Want("team/other", Key(volcano, "b"), gpus(1))
	b.SetNamespaceDefault("team", volcano, "b")
	assert.NotEqual(t, before, b.Version())
	assert.Contains(t, b.Admit(ask), "over its limit", "the book sees its own changes")

	assert.Equal(t, "", c.Admit(ask), "the copy does not")
	assert.Equal(t, Key(volcano, "a"), c.Resolve("team", Ref{Kind: volcano}))
	_, _, waits := c.Wants("team/other")
	assert.False(t, waits)
	assert.Equal(t, before, c.Version())
}
