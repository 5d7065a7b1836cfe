package decide

import (
	"strconv"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/lockstep-sched/lockstep/gangspec"
	"github.com/lockstep-sched/lockstep/placement"
	"github.com/lockstep-sched/lockstep/quota"
)

// wantAdmission is what a case expects of an Admission; zero fields expect nothing (no wait, no
// reservation, no eviction).
type wantAdmission struct {
	// wait are parts of the reason the gang waits; none when the member passes.
	wait         []string
	lacksMembers bool
	want         placement.Resources
	// node is the node the member passes; with reserve, "" expects the first slot's.
	node string
	join bool
	// reserve are the members a new reservation is for, the one at filter first; on the nodes of
	// its slots, when given.
	reserve  []string
	on       []string
	reserved string
	yield    []string
	victims  []victim
	cause    Cause
	// preempting is a part of the reason while it evicts.
	preempting string
}

// victim is a Victim as cases name it.
type victim struct {
	gang  string
	extra bool
	pods  []string
}

func assertAdmission(t *testing.T, a Admission, want wantAdmission) {
	t.Helper()
	if len(want.wait) == 0 {
		assert.Empty(t, a.Wait)
	}
	for _, part := range want.wait {
		assert.Contains(t, a.Wait, part)
	}
	assert.Equal(t, want.lacksMembers, a.LacksMembers, "LacksMembers")
	assert.Equal(t, want.want, a.Want, "Want")
	assert.Equal(t, want.join, a.Join, "Join")
	assertReserve(t, a, want)
	var yield []string
	for _, r := range a.Yield {
		yield = append(yield, r.Gang)
	}
	assert.Equal(t, want.yield, yield, "Yield")
	var victims []victim
	for _, u := range a.Evict {
		victims = append(victims, victim{u.Gang, u.Extra, sorted(names(u.Pods))})
		assert.NotEmpty(t, u.Why, "every victim is told why it goes")
	}
	assert.ElementsMatch(t, want.victims, victims, "Evict")
	assert.Equal(t, want.cause, a.Cause, "Cause")
	if want.preempting == "" {
		assert.Empty(t, a.Preempting)
	} else {
		assert.Contains(t, a.Preempting, want.preempting)
	}
}

func assertReserve(t *testing.T, a Admission, want wantAdmission) {
	t.Helper()
	if want.reserve == nil {
		assert.Nil(t, a.Reserve, "Reserve")
		assert.Equal(t, want.node, a.Node, "Node")
		return
	}
	require.NotNil(t, a.Reserve, "Reserve; waits with %q", a.Wait)
	r := a.Reserve
	require.Len(t, r.Slots, len(want.reserve))
	var nodes []string
	for i, name := range want.reserve {
		sl := r.Slots[i]
		assert.Equal(t, uid(name), sl.PlannedFor, "slot %d is planned for %s", i, name)
		if i == 0 {
			assert.Equal(t, SlotReserved, sl.State, "the member at filter holds the first slot")
			assert.Equal(t, uid(name), sl.Pod)
		} else {
			assert.Equal(t, SlotPlanned, sl.State, "slot %d", i)
			assert.Empty(t, sl.Pod, "slot %d", i)
		}
		nodes = append(nodes, sl.Node)
	}
	if want.on != nil {
		assert.Equal(t, want.on, nodes, "slot nodes")
	}
	node := want.node
	if node == "" {
		node = r.Slots[0].Node
	}
	assert.Equal(t, node, a.Node, "the member passes its slot's node")
	assert.Equal(t, now, r.Created)
	assert.Equal(t, now.Add(time.Minute), r.Expires, "DefaultWaitingTime")
	assert.Equal(t, Reserving, r.State)
	assert.Contains(t, a.Reserved, want.reserved)
}

// admitCase asks Admit for member, offered the nodes named (nil: the scheduler's preemption,
// which rules no node out).
type admitCase struct {
	name    string
	snap    *snapshotWrapper
	member  string
	offered []string
	want    wantAdmission
	// slot is the member's place in its gang's live reservation, -1 for none.
	slot int
}

func runAdmit(t *testing.T, cases []admitCase) {
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			s := tc.snap.Obj()
			a := s.Admit(pod(s, tc.member), tc.offered)
			assertAdmission(t, a, tc.want)
			assert.Equal(t, tc.slot, a.Slot, "Slot")
		})
	}
}

// Scenes shared by the cases.

// gangA is gang a of count members asking 4 GPUs each, a quorum of minAvailable, at priority.
func gangA(count, minAvailable int, priority int32) []*podWrapper {
	out := members("a", count, 4, makeSpec(minAvailable))
	for _, p := range out {
		p.Priority(priority)
	}
	return out
}

// elasticB fills two 8-GPU nodes with gang b at priority, of queue ("" for none): four members
// of 4 GPUs, a quorum of two, so that its two youngest (b-2, b-3, both on n-1) are extras.
func elasticB(priority int32, queue string) *snapshotWrapper {
	b := members("b", 4, 4, makeSpec(2))
	for i, p := range b {
		p.On("n-" + strconv.Itoa(i/2)).Priority(priority).Queue(queue)
	}
	return makeSnapshot().GPUNodes("n", 2, 8).Pods(b...)
}

// rigidC is gang c at priority 0 with no member to spare: c-0, c-1 on n-0 and c-2 on n-1, each of
// 4 GPUs, a quorum of three. n-1 has 4 GPUs free.
func rigidC() *snapshotWrapper {
	return makeSnapshot().GPUNodes("n", 2, 8).Pods(onNodes(members("c", 3, 4, makeSpec(3)), "n-0", "n-0", "n-1")...)
}

// lowReservation holds all of n-0 for gang low at priority, in state.
func lowReservation(priority int32, state ReservationState) *snapshotWrapper {
	return makeSnapshot().GPUNodes("n", 1, 8).
		Pods(members("low", 1, 8, makeSpec(1))...).
		Reservations(makeReservation("low", priority).Planned("low-0", "n-0", 8).State(state))
}

const (
	teamA = "Volcano Queue team-a"
	teamB = "Volcano Queue team-b"
)

func volcanoQueue(name string, edit func(*quota.Queue)) quota.Queue {
	q := quota.Queue{Kind: "Volcano Queue", Name: name, Weight: 1, Reclaimable: true}
	if edit != nil {
		edit(&q)
	}
	return q
}

func inQueue(queue string, pods ...*podWrapper) []*podWrapper {
	for _, p := range pods {
		p.Queue(queue)
	}
	return pods
}

func TestAdmitPlansANewReservation(t *testing.T) {
	cases := []admitCase{
		{
			name:   "quorum fits free capacity: a slot per member, the member at filter first",
			snap:   makeSnapshot().GPUNodes("n", 2, 8).Pods(gangA(2, 2, 0)...),
			member: "a-1",
			want:   wantAdmission{reserve: []string{"a-1", "a-0"}, reserved: "gang ns/a: 2 members reserved until 13:01:00; waiting for them to reach bind"},
		},
		{
			name:    "the member at filter is kept to the offered nodes",
			snap:    makeSnapshot().GPUNodes("n", 2, 8).Pods(gangA(2, 2, 0)...),
			member:  "a-0",
			offered: []string{"n-1"},
			want:    wantAdmission{reserve: []string{"a-0", "a-1"}, on: []string{"n-1", "n-1"}, reserved: "2 members reserved"},
		},
		{
			name:   "an unschedulable node is not planned on",
			snap:   makeSnapshot().Nodes(makeNode("n-0", 8).Unschedulable(), makeNode("n-1", 8)).Pods(gangA(2, 2, 0)...),
			member: "a-0",
			want:   wantAdmission{reserve: []string{"a-0", "a-1"}, on: []string{"n-1", "n-1"}, reserved: "2 members reserved"},
		},
		{
			name:   "task minimums choose the members before age does",
			snap:   makeSnapshot().GPUNodes("n", 2, 8).Pods(tasked("a", makeSpec(2).Task("ps", 1), "worker", "worker", "ps")...),
			member: "a-0",
			want:   wantAdmission{reserve: []string{"a-0", "a-2"}, reserved: "2 members reserved"},
		},
		{
			name:   "bound members count: only the missing ones are reserved",
			snap:   makeSnapshot().GPUNodes("n", 2, 8).Pods(onNodes(gangA(4, 3, 0), "n-0")...),
			member: "a-2",
			want:   wantAdmission{reserve: []string{"a-2", "a-1"}, reserved: "gang ns/a: 2 members reserved"},
		},
		{
			name:   "only-waiting: bound members do not count",
			snap:   makeSnapshot().GPUNodes("n", 2, 8).Pods(onNodes(members("a", 3, 4, makeSpec(2).Policy(gangspec.OnlyWaiting)), "n-0")...),
			member: "a-2",
			want:   wantAdmission{reserve: []string{"a-2", "a-1"}, reserved: "gang ns/a: 2 members reserved"},
		},
		{
			name:   "a member of another priority is not counted on",
			snap:   makeSnapshot().GPUNodes("n", 2, 8).Pods(gangA(1, 2, 0)...).Pods(makeMember("a", "a-1", makeSpec(2)).GPU(4).Age(1).Priority(5)),
			member: "a-0",
			want:   wantAdmission{wait: []string{"waiting for members: 1 of min-available 2 exist"}, lacksMembers: true},
		},
		{
			name:   "too few members: waits for members",
			snap:   makeSnapshot().GPUNodes("n", 2, 8).Pods(gangA(2, 3, 0)...),
			member: "a-0",
			want:   wantAdmission{wait: []string{"gang ns/a: waiting for members: 2 of min-available 3 exist"}, lacksMembers: true},
		},
		{
			name:   "gated members count in the words, not in the quorum",
			snap:   makeSnapshot().GPUNodes("n", 2, 8).Pods(append(gangA(2, 3, 0), makeMember("a", "a-2", makeSpec(3)).GPU(4).Age(2).Gated())...),
			member: "a-0",
			want:   wantAdmission{wait: []string{"3 of min-available 3 exist, 1 of them held by scheduling gates"}, lacksMembers: true},
		},
		{
			name:   "a task short of its minimum waits, named",
			snap:   makeSnapshot().GPUNodes("n", 2, 8).Pods(tasked("a", makeSpec(2).Task("ps", 1), "worker", "worker")...),
			member: "a-0",
			want:   wantAdmission{wait: []string{"2 of min-available 2 exist (task ps: 0 of 1)"}, lacksMembers: true},
		},
		{
			name: "timed out within its cool-down: waits",
			snap: makeSnapshot().GPUNodes("n", 2, 8).Pods(gangA(2, 2, 0)...).
				History("a", History{TimedOut: true, TimedOutAt: now.Add(-20 * time.Second)}),
			member: "a-0",
			want:   wantAdmission{wait: []string{"gang ns/a: its reservation timed out; it plans again in 41s"}},
		},
		{
			name: "timed out past its cool-down: reserves again",
			snap: makeSnapshot().GPUNodes("n", 2, 8).Pods(gangA(2, 2, 0)...).
				History("a", History{TimedOut: true, TimedOutAt: now.Add(-2 * time.Minute)}),
			member: "a-0",
			want:   wantAdmission{reserve: []string{"a-0", "a-1"}, reserved: "2 members reserved"},
		},
		{
			name: "its queue's capability would be exceeded: waits for its queue, owed the quorum",
			snap: makeSnapshot().GPUNodes("n", 2, 8).
				Queue(volcanoQueue("team-a", func(q *quota.Queue) {
					q.Capability = quota.Limit{Amount: placement.Resources{GPU: 4}, Named: quota.GPU}
				})).
				Pods(inQueue(teamA, makePod("q-0").GPU(4).On("n-0"))...).
				Pods(inQueue(teamA, gangA(2, 2, 0)...)...),
			member: "a-0",
			want: wantAdmission{wait: []string{"gang ns/a waits for its queue", "would go over its limit"},
				want: times(2, gpus(4))},
		},
		{
			name:   "a lower-priority reservation in the way is taken over",
			snap:   lowReservation(0, Reserving).Pods(gangA(2, 2, 10)...),
			member: "a-0",
			want: wantAdmission{reserve: []string{"a-0", "a-1"}, yield: []string{"ns/low"},
				reserved: "took over the reservations of lower-priority gang ns/low (priority 0)"},
		},
		{
			name: "takeover puts back what the plan does without",
			snap: makeSnapshot().GPUNodes("n", 2, 8).Pods(makePod("bound").GPU(4).On("n-0")).Pods(gangA(2, 2, 10)...).
				Reservations(makeReservation("low0", 0).Planned("low0-0", "n-0", 4), makeReservation("low5", 5).Planned("low5-0", "n-1", 8)),
			member: "a-0",
			want: wantAdmission{reserve: []string{"a-0", "a-1"}, on: []string{"n-1", "n-1"}, yield: []string{"ns/low5"},
				reserved: "took over the reservations of lower-priority gang ns/low5 (priority 5)"},
		},
		{
			name:   "equal priority never takes over",
			snap:   lowReservation(10, Reserving).MayEvict().Pods(gangA(2, 2, 10)...),
			member: "a-0",
			want:   wantAdmission{wait: []string{"0 free; gang ns/low holds 8 in reservations"}, want: times(2, gpus(4))},
		},
		{
			name:   "a committing reservation is never taken over",
			snap:   lowReservation(0, Committing).MayEvict().Pods(gangA(2, 2, 10)...),
			member: "a-0",
			want:   wantAdmission{wait: []string{"gang ns/low holds 8"}, want: times(2, gpus(4))},
		},
	}
	for i := range cases {
		cases[i].slot = -1
	}
	runAdmit(t, cases)
}

func TestAdmitEvicts(t *testing.T) {
	preempting := func() wantAdmission {
		return wantAdmission{reserve: []string{"a-0", "a-1"},
			victims: []victim{{"ns/c", false, []string{"c-0", "c-1", "c-2"}}}, cause: Cause{Kind: ByPriority},
			preempting: "gang ns/a: preempting gang ns/c (priority 0) for its quorum"}
	}
	waits := wantAdmission{wait: []string{"gang ns/a: 2 members"}, want: times(2, gpus(4))}
	cases := []admitCase{
		{
			name:   "extras of another gang of equal priority are taken back",
			snap:   elasticB(0, "").MayEvict().Pods(gangA(2, 2, 0)...),
			member: "a-0",
			want: wantAdmission{reserve: []string{"a-0", "a-1"}, on: []string{"n-1", "n-1"},
				victims: []victim{{"ns/b", true, []string{"b-2"}}, {"ns/b", true, []string{"b-3"}}},
				cause:   Cause{Kind: ForQuorum}, preempting: "gang ns/a: taking back pod ns/b-"},
		},
		{
			name:   "only the extras the quorum needs, the youngest first",
			snap:   elasticB(0, "").MayEvict().Pods(gangA(1, 1, 0)...),
			member: "a-0",
			want: wantAdmission{reserve: []string{"a-0"}, on: []string{"n-1"},
				victims: []victim{{"ns/b", true, []string{"b-3"}}},
				cause:   Cause{Kind: ForQuorum}, preempting: "gang ns/a: taking back pod ns/b-3 beyond gang ns/b's quorum (priority 0) for its quorum; 1 members reserved"},
		},
		{
			name: "extras of another queue are not taken back: that is reclaim's to do",
			snap: elasticB(0, teamB).MayEvict().Queue(volcanoQueue("team-a", nil)).Queue(volcanoQueue("team-b", nil)).
				Pods(inQueue(teamA, gangA(2, 2, 0)...)...),
			member: "a-0",
			want:   waits,
		},
		{
			name:   "extras stay when lockstep may not evict",
			snap:   elasticB(0, "").Pods(gangA(2, 2, 0)...),
			member: "a-0",
			want:   waits,
		},
		{
			name:   "extras stay with --take-back-extras=false at equal priority",
			snap:   elasticB(0, "").MayEvict().Rules(func(r *Rules) { r.NoExtrasTakeBack = true }).Pods(gangA(2, 2, 0)...),
			member: "a-0",
			want:   waits,
		},
		{
			name:   "extras of a higher-priority gang stay",
			snap:   elasticB(10, "").MayEvict().Pods(gangA(2, 2, 0)...),
			member: "a-0",
			want:   waits,
		},
		{
			name:   "extras stay when the taker's members say preemptionPolicy Never",
			snap:   elasticB(0, "").MayEvict().Pods(neverPreempt(gangA(2, 2, 0))...),
			member: "a-0",
			want:   waits,
		},
		{
			name:   "priority preemption evicts the lower-priority gang whole",
			snap:   rigidC().MayEvict().Pods(gangA(2, 2, 10)...),
			member: "a-0",
			want:   preempting(),
		},
		{
			name: "the cheapest unit goes: an ordinary pod before a gang",
			snap: makeSnapshot().GPUNodes("n", 2, 8).MayEvict().Pods(onNodes(members("c", 2, 2, makeSpec(2)), "n-0", "n-0")...).
				Pods(makePod("o").GPU(4).On("n-0"), makePod("p").GPU(4).On("n-1").Priority(20)).Pods(gangA(2, 2, 10)...),
			member: "a-0",
			want: wantAdmission{reserve: []string{"a-0", "a-1"}, on: []string{"n-0", "n-1"},
				victims: []victim{{"", false, []string{"o"}}}, cause: Cause{Kind: ByPriority}, preempting: "preempting pod ns/o (priority 0)"},
		},
		{
			name:   "no priority preemption at equal priority",
			snap:   rigidC().MayEvict().Pods(gangA(2, 2, 0)...),
			member: "a-0",
			want:   waits,
		},
		{
			name:   "nothing is evicted when lockstep may not evict",
			snap:   rigidC().Pods(gangA(2, 2, 10)...),
			member: "a-0",
			want:   waits,
		},
		{
			name:   "nothing is evicted with priority preemption off",
			snap:   rigidC().MayEvict().Rules(func(r *Rules) { r.NoPriorityPreemption = true }).Pods(gangA(2, 2, 10)...),
			member: "a-0",
			want:   waits,
		},
		{
			name:   "preemptionPolicy Never on the members blocks evicting",
			snap:   rigidC().MayEvict().Pods(neverPreempt(gangA(2, 2, 10))...),
			member: "a-0",
			want:   waits,
		},
		{
			name: "preemptionPolicy Never on the group object blocks evicting",
			snap: rigidC().MayEvict().Pods(func() []*podWrapper {
				a := members("a", 2, 4, makeSpec(2).PreemptNever())
				for _, p := range a {
					p.Priority(10)
				}
				return a
			}()...),
			member: "a-0",
			want:   waits,
		},
		{
			name:   "a gang with a member whose eviction was refused lately is not preempted",
			snap:   rigidC().MayEvict().Refused("c-2", now.Add(-10*time.Second)).Pods(gangA(2, 2, 10)...),
			member: "a-0",
			want:   waits,
		},
		{
			name:   "a refusal older than a minute no longer protects",
			snap:   rigidC().MayEvict().Refused("c-2", now.Add(-2*time.Minute)).Pods(gangA(2, 2, 10)...),
			member: "a-0",
			want:   preempting(),
		},
		{
			name:   "reclaim takes an extra back from a queue above its share",
			snap:   reclaimScene(),
			member: "a-0",
			want: wantAdmission{reserve: []string{"a-0", "a-1"}, on: []string{"n-1", "n-1"},
				victims: []victim{{"ns/b", true, []string{"b-1"}}},
				cause:   Cause{Kind: ForQueue, Queue: teamA}, preempting: "reclaiming for " + teamA},
		},
	}
	for i := range cases {
		cases[i].slot = -1
	}
	runAdmit(t, cases)
}

// onNodes binds pods[i] to nodes[i], the first len(nodes) of them.
func onNodes(pods []*podWrapper, nodes ...string) []*podWrapper {
	for i, node := range nodes {
		pods[i].On(node)
	}
	return pods
}

// reclaimScene is gang b of team-b on both nodes, one member beyond its quorum, and gang a of
// team-a waiting, with reclaim on.
func reclaimScene() *snapshotWrapper {
	return makeSnapshot().GPUNodes("n", 2, 8).MayEvict().Rules(func(r *Rules) { r.QueueReclaim = true }).
		Queue(volcanoQueue("team-a", nil)).Queue(volcanoQueue("team-b", nil)).
		Pods(inQueue(teamB, onNodes(members("b", 2, 8, makeSpec(1)), "n-0", "n-1")...)...).
		Pods(inQueue(teamA, gangA(2, 2, 0)...)...)
}

func neverPreempt(pods []*podWrapper) []*podWrapper {
	for _, p := range pods {
		p.PreemptNever()
	}
	return pods
}

func TestAdmitToReservation(t *testing.T) {
	// a-0 holds its slot on n-0; a-1's is planned on n-1.
	reserved := func(state SlotState) *reservationWrapper {
		return makeReservation("a", 0).Held("a-0", "n-0", 4, state).Planned("a-1", "n-1", 4)
	}
	// a-0 and a-1 hold both slots on n-0; a-2 is beyond the plan.
	full := func() *reservationWrapper {
		return makeReservation("a", 0).Held("a-0", "n-0", 4, SlotReserved).Held("a-1", "n-0", 4, SlotReserved)
	}
	scene := func(r *reservationWrapper) *snapshotWrapper {
		return makeSnapshot().GPUNodes("n", 2, 8).Nodes(makeNode("small", 2)).Pods(gangA(3, 2, 0)...).Reservations(r)
	}
	both := []string{"n-0", "n-1"}
	taken := wantAdmission{wait: []string{"its 2 reserved places are taken by other members"}}
	// Rows: name, snapshot, member, offered, what it decides, the member's slot.
	cases := []admitCase{
		{"the member passes its slot's node", scene(reserved(SlotReserved)), "a-0", both, wantAdmission{node: "n-0"}, 0},
		// Admit's contract: nil rules no node out of a new plan only; with a live reservation it
		// is the offered nodes, and nil passes none.
		{"offered nil with a live reservation passes no node", scene(reserved(SlotReserved)), "a-0", nil,
			wantAdmission{wait: []string{"ruled out by the scheduler's other filters"}}, 0},
		{"the member a slot was planned for takes it", scene(reserved(SlotReserved)), "a-1", both, wantAdmission{node: "n-1"}, 1},
		{"its slot's node not offered: the slot moves to an offered node with room", scene(reserved(SlotReserved)), "a-1",
			[]string{"n-0"}, wantAdmission{node: "n-0"}, 1},
		{"its slot's node not offered and no offered node has room: waits", scene(reserved(SlotReserved)), "a-1", []string{"small"},
			wantAdmission{wait: []string{"member ns/a-1's reserved node n-1 is ruled out by the scheduler's other filters"}}, 1},
		{"a member waiting for quorum does not move", scene(reserved(SlotWaiting)), "a-0", []string{"n-1"},
			wantAdmission{wait: []string{"member ns/a-0 is waiting for quorum on node n-0, which the scheduler no longer offers"}}, 0},
		{"a member beyond the plan joins where free capacity holds it", scene(full()), "a-2", both,
			wantAdmission{node: "n-1", join: true}, -1},
		{"a member beyond the plan waits without free capacity", scene(full()).Pods(makePod("big").GPU(8).On("n-1")), "a-2", both,
			taken, -1},
		{"a member beyond the plan leaves room for a waiting gang's quorum", scene(full()).Pods(members("w", 2, 4, makeSpec(2))...), "a-2", both,
			taken, -1},
		{"a member beyond the plan does not join a committing reservation", scene(full().State(Committing)), "a-2", both,
			taken, -1},
	}
	runAdmit(t, cases)
}
