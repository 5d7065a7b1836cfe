package e2e

import (
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	"github.com/lockstep-sched/lockstep/test/lib/builders"
)

// Volcano's hierarchical queues (spec.parent, as its capacity plugin reads them with hierarchy
// on), made in the order a platform team writes them: the teams' queues first, naming a parent
// that does not exist yet.
//
//  1. Children before their parent: a gang of team a waits, naming the missing parent, and the
//     queue carries a QueueInvalid Event; once the parent exists, the gang binds.
//  2. The parent's limit of 4 GPUs holds across its two children, which have none of their own:
//     with a's 3 bound, b's gang of 2 waits, naming the parent; b's gang of 1 fits and binds.
//  3. A gang naming the parent itself waits: only leaves run work.
//  4. /debug/queues shows the tree, and the parent's status.allocated is its subtree's.
func TestParentQueueLimitHoldsAcrossChildren(t *testing.T) {
	s := newQueueScenario(t, 4, 2)
	parentName := s.queueName("research")
	a := s.createVolcanoQueue(builders.VolcanoQueue(s.queueName("a")).Parent(parentName))
	b := s.createVolcanoQueue(builders.VolcanoQueue(s.queueName("b")).Parent(parentName))
	keyP, keyA, keyB := volcanoKey(parentName), volcanoKey(a), volcanoKey(b)

	s.volcanoGang("trio", a, 3, 3)
	missing := fmt.Sprintf("%s: spec.parent names parent %s, which does not exist", keyA, parentName)
	s.eventually(60*time.Second, "gang trio to wait, naming the missing parent", func() bool { return s.waitsFor("trio", missing) })
	s.eventually(30*time.Second, "a QueueInvalid Event on queue a naming its missing parent", func() bool {
		return queueEvent(s.ctx, "Queue", a, "Warning", "QueueInvalid", missing)
	})
	require.Zero(t, s.boundInGroup("trio"))

	s.createVolcanoQueue(builders.VolcanoQueue(parentName).Capability(gpuRes, "4"))
	s.eventually(90*time.Second, "gang trio bound whole once its parent exists", func() bool { return s.boundInGroup("trio") == 3 })
	s.binds.assertNeverPartial(t, "trio", 3)

	s.volcanoGang("pair", b, 2, 2)
	overParent := fmt.Sprintf("%s: nvidia.com/gpu would go over its limit of 4: the queues under it hold 3 and gang %s/pair's quorum asks 2 more; %s is under it",
		keyP, s.ns, keyB)
	s.eventually(60*time.Second, "gang pair to wait for the parent's limit, though b has none and 5 GPUs are free", func() bool {
		return s.waitsFor("pair", overParent)
	})
	s.volcanoGang("solo", b, 1, 1)
	s.eventually(90*time.Second, "gang solo, within the parent's limit, bound", func() bool { return s.boundInGroup("solo") == 1 })
	s.never(5*time.Second, "gang pair to bind any member past the parent's limit", func() bool { return s.boundInGroup("pair") > 0 })

	s.volcanoGang("onparent", parentName, 1, 1)
	s.eventually(60*time.Second, "a gang naming the parent to wait: only leaves run work", func() bool {
		return s.waitsFor("onparent", fmt.Sprintf("%s is a parent queue (of %s, %s): only the queues at the leaves of the tree run work", keyP, a, b))
	})

	s.eventually(30*time.Second, "/debug/queues to show the tree, the parent holding its subtree's 4", func() bool {
		p, qa := s.queue(keyP), s.queue(keyA)
		return gpus(p.Allocated) == "4" && slices.Equal(p.Children, []string{keyA, keyB}) && qa.Parent == keyP && gpus(qa.Allocated) == "3"
	})
	s.eventually(30*time.Second, "the parent Queue's status.allocated to say its subtree's 4 GPUs", func() bool {
		v, _, _ := unstructured.NestedString(s.volcanoQueueObject(parentName).Object, "status", "allocated", gpuRes)
		return v == "4"
	})
	require.Zero(t, s.boundInGroup("pair"))
}

// Two teams under one parent, with the suite's --queue-reclaim. Team a, alone, borrows its idle
// sibling's share: two gangs of 4 fill the 8 GPUs. Team b's gang of 4 arrives: b is below its
// share of the parent's (4 of 8), so one of a's gangs is taken back whole, the younger, and b's
// binds whole. a's other gang keeps all its members throughout, and nothing more is evicted: each
// sibling now holds its share, and neither can take from the other again.
func TestChildBorrowsSiblingShareAndGivesItBack(t *testing.T) {
	s := newQueueScenario(t, 4, 2)
	parentName := s.createVolcanoQueue(builders.VolcanoQueue(s.queueName("lab")))
	a := s.createVolcanoQueue(builders.VolcanoQueue(s.queueName("a")).Parent(parentName))
	b := s.createVolcanoQueue(builders.VolcanoQueue(s.queueName("b")).Parent(parentName))
	keyP, keyA, keyB := volcanoKey(parentName), volcanoKey(a), volcanoKey(b)
	floor := watchMemberFloor(s)
	deletions := watchDeletions(t, s.ctx, s.ns)

	s.volcanoGangsOneByOne(a, 4, "older", "younger")
	s.eventually(30*time.Second, "/debug/queues: a holds the 8 GPUs, its sibling's idle share too", func() bool {
		return gpus(s.queue(keyA).Allocated) == "8" && gpus(s.queue(keyP).Allocated) == "8"
	})
	require.Empty(t, deletions.deleted())

	s.volcanoGang("quad", b, 4, 4)
	victims := []string{"younger-0", "younger-1", "younger-2", "younger-3"}
	s.eventually(120*time.Second, "4 pods evicted for b's gang", func() bool { return len(deletions.deleted()) >= 4 })
	s.eventually(30*time.Second, "b's gang to say it reclaims for its queue", func() bool {
		return strings.Contains(s.reasonOf("quad"), fmt.Sprintf("gang %s/quad: reclaiming for %s, below its fair share,", s.ns, keyB))
	})
	s.never(5*time.Second, "more than 4 pods evicted for b's 4 GPUs", func() bool { return len(deletions.deleted()) > 4 })
	require.ElementsMatch(t, victims, deletions.deleted(), "a's younger gang goes, all of it, and only it")

	kubelet := s.playKubelet()
	s.eventually(120*time.Second, "b's gang of 4 bound whole", func() bool { return s.boundInGroup("quad") == 4 })
	s.binds.assertNeverPartial(t, "quad", 4)
	s.never(5*time.Second, "more pods evicted once b's gang is bound: no ping-pong", func() bool { return len(deletions.deleted()) > 4 })
	lowest, ok := floor.lowestSince("older", 4)
	require.True(t, ok)
	require.Equal(t, 4, lowest, "a's other gang lost a member")

	s.eventually(30*time.Second, "/debug/queues: the parent deserves 8, each child 4, and holds it", func() bool {
		p, qa, qb := s.queue(keyP), s.queue(keyA), s.queue(keyB)
		return gpus(p.Deserved) == "8" && gpus(qa.Deserved) == "4" && gpus(qb.Deserved) == "4" &&
			gpus(qa.Allocated) == "4" && gpus(qb.Allocated) == "4"
	})
	require.ElementsMatch(t, victims, kubelet())
}

// A cycle of parents is refused on both queues with an Event naming the cycle, and their gangs
// wait with the same words; a queue outside the cycle keeps scheduling.
func TestQueueCycleIsRefusedAndOthersKeepWorking(t *testing.T) {
	s := newQueueScenario(t, 4, 2)
	x, y := s.queueName("x"), s.queueName("y")
	s.createVolcanoQueue(builders.VolcanoQueue(x).Parent(y))
	s.createVolcanoQueue(builders.VolcanoQueue(y).Parent(x))
	ok := s.createVolcanoQueue(builders.VolcanoQueue(s.queueName("ok")))

	cycle := fmt.Sprintf("%s: spec.parent: the queues form a cycle, %s → %s → %s", volcanoKey(x), x, y, x)
	s.eventually(30*time.Second, "a QueueInvalid Event on queue x naming the cycle", func() bool {
		return queueEvent(s.ctx, "Queue", x, "Warning", "QueueInvalid", cycle)
	})
	s.volcanoGang("stuck", x, 1, 1)
	s.volcanoGang("runs", ok, 2, 2)
	s.eventually(90*time.Second, "the gang of the queue outside the cycle bound", func() bool { return s.boundInGroup("runs") == 2 })
	s.eventually(60*time.Second, "the cycle's gang to wait, naming the cycle", func() bool { return s.waitsFor("stuck", cycle) })
	require.Zero(t, s.boundInGroup("stuck"))
	s.eventually(30*time.Second, "/debug/queues to show the cycle as the queue's error", func() bool {
		return strings.Contains(s.queue(volcanoKey(y)).Error, "the queues form a cycle")
	})
}
