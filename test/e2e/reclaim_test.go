package e2e

import (
	"fmt"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/client-go/tools/cache"

	"github.com/lockstep-sched/lockstep/dialect"
	"github.com/lockstep-sched/lockstep/test/lib/builders"
	"github.com/lockstep-sched/lockstep/views"
)

// Reclaim between team queues (issue 20, item 4; docs/queues.md, "Reclaim"), with the suite's
// lockstep running --queue-reclaim: a gang whose queue is below its fair share and whose quorum
// does not fit takes capacity back from queues above theirs, members beyond their gang's
// min-available first (the youngest first), whole gangs only, never a gang below its quorum,
// never a queue below its share, and never from a queue that does not let others reclaim. Ported
// from Volcano v1.10.0 test/e2e/schedulingaction/reclaim.go, where Volcano's reclaim evicts task
// by task; here the victims are gang members and gangs. No kubelet runs: playKubelet finishes
// the pods lockstep evicts, as a kubelet would once their containers stopped.

// memberFloor records, from a watch, how many members of each gang of a namespace are bound and
// not being deleted, after every change: whether a gang ever went below its quorum once it had
// it, including between two looks of the test.
type memberFloor struct {
	mu     sync.Mutex
	live   map[string]bool   // pod -> bound and not being deleted
	gangOf map[string]string // pod -> gang
	counts map[string][]int  // gang -> its live members after each change
}

func watchMemberFloor(s *queueScenario) *memberFloor {
	l := &memberFloor{live: map[string]bool{}, gangOf: map[string]string{}, counts: map[string][]int{}}
	record := func(obj any, gone bool) {
		if tomb, ok := obj.(cache.DeletedFinalStateUnknown); ok {
			obj = tomb.Obj
		}
		p, ok := obj.(*corev1.Pod)
		if !ok {
			return
		}
		g := dialect.Pods{}.Read(p).Gang
		if g == "" {
			return
		}
		live := !gone && p.Spec.NodeName != "" && p.DeletionTimestamp == nil
		l.mu.Lock()
		defer l.mu.Unlock()
		if was, seen := l.live[p.Name]; seen && was == live {
			return
		}
		l.live[p.Name], l.gangOf[p.Name] = live, g
		n := 0
		for pod, isLive := range l.live {
			if isLive && l.gangOf[pod] == g {
				n++
			}
		}
		l.counts[g] = append(l.counts[g], n)
	}
	watchPods(s.t, s.ctx, s.ns, cache.ResourceEventHandlerFuncs{
		AddFunc:    func(o any) { record(o, false) },
		UpdateFunc: func(_, o any) { record(o, false) },
		DeleteFunc: func(o any) { record(o, true) },
	})
	return l
}

// lowestSince is the fewest members of the gang seen bound and not being deleted at once since
// it first had n; ok is false when it never had n.
func (l *memberFloor) lowestSince(gangName string, n int) (lowest int, ok bool) {
	l.mu.Lock()
	defer l.mu.Unlock()
	for _, c := range l.counts[gangName] {
		switch {
		case ok:
			lowest = min(lowest, c)
		case c >= n:
			lowest, ok = c, true
		}
	}
	return lowest, ok
}

// pastCreationSecond returns once the clock has left the second the pod was created in, so that
// the pod created next is younger by its creationTimestamp (whole seconds), which is how lockstep
// tells its victims' ages apart. It polls the clock with a deadline: the clock is what it waits
// for.
func (s *queueScenario) pastCreationSecond(pod string) {
	s.t.Helper()
	created := s.pod(pod).CreationTimestamp.Time
	s.eventually(5*time.Second, "the clock to leave the second "+pod+" was created in", func() bool {
		return time.Now().Truncate(time.Second).After(created)
	})
}

// volcanoGangsOneByOne creates, in the queue, one Volcano gang of size one-GPU members (all
// needed) per name, each bound before the next is created and a second younger than the last.
func (s *queueScenario) volcanoGangsOneByOne(queue string, size int, names ...string) {
	s.t.Helper()
	for i, g := range names {
		if i > 0 {
			s.pastCreationSecond(fmt.Sprintf("%s-%d", names[i-1], size-1))
		}
		s.volcanoGang(g, queue, size, size)
		s.eventually(90*time.Second, "gang "+g+" bound whole", func() bool { return s.boundInGroup(g) == size })
		s.binds.assertNeverPartial(s.t, g, size)
	}
}

// podsLeft lists the names of the namespace's pods, for checking which are gone.
func (s *queueScenario) podsLeft() []string {
	var out []string
	for _, p := range s.pods() {
		out = append(out, p.Name)
	}
	return out
}

// Ported from Volcano v1.10.0 test/e2e/schedulingaction/reclaim.go, "Reclaim" (skipped there,
// "the case has some problem"): queue 1's job of minAvailable 1 and as many one-slot tasks as
// the cluster has slots fills it; queue 2's job arrives and each queue ends with about half. Here
// the job is an elastic Volcano gang, PodGroup minMember 2 with 6 one-GPU members, in queue A
// (weight 1) beside a gang of 2, on 8 GPUs; queue B (weight 1) asks for a gang of 3. By weighted
// water-filling B deserves the 3 it asks and A the other 5, so 3 GPUs come back: exactly the 3
// youngest members beyond the elastic gang's quorum, not its quorum and not the gang of 2 (the
// youngest unit of all, which a victim order by age alone would take first). The elastic gang
// never has fewer than its minMember bound; B's gang binds whole; the cluster ends split 5:3.
func TestReclaimTakesMembersBeyondQuorumFirst(t *testing.T) {
	s := newQueueScenario(t, 4, 2)
	a := s.createVolcanoQueue(builders.VolcanoQueue(s.queueName("a")).Weight(1))
	b := s.createVolcanoQueue(builders.VolcanoQueue(s.queueName("b")).Weight(1))
	keyA, keyB := volcanoKey(a), volcanoKey(b)
	floor := watchMemberFloor(s)
	deletions := watchDeletions(t, s.ctx, s.ns)

	// The elastic gang: its quorum, then its 4 extras one at a time, each a second younger than
	// the one before, so that "youngest" means one pod.
	s.volcanoGang("elastic", a, 2, 2)
	s.eventually(90*time.Second, "the elastic gang's quorum bound", func() bool { return s.boundInGroup("elastic") == 2 })
	s.binds.assertNeverPartial(t, "elastic", 2)
	for i := 2; i < 6; i++ {
		s.pastCreationSecond(fmt.Sprintf("elastic-%d", i-1))
		s.volcanoMember("elastic", i)
		s.eventually(60*time.Second, fmt.Sprintf("extra member elastic-%d bound", i), func() bool { return s.boundInGroup("elastic") == i+1 })
	}
	s.pastCreationSecond("elastic-5")
	s.volcanoGang("pair", a, 2, 2)
	s.eventually(90*time.Second, "A's gang of 2 bound", func() bool { return s.boundInGroup("pair") == 2 })
	s.binds.assertNeverPartial(t, "pair", 2)
	for i := 2; i < 6; i++ {
		older, younger := s.pod(fmt.Sprintf("elastic-%d", i-1)), s.pod(fmt.Sprintf("elastic-%d", i))
		require.True(t, younger.CreationTimestamp.After(older.CreationTimestamp.Time), "elastic-%d must be younger than elastic-%d", i, i-1)
	}
	require.True(t, s.pod("pair-0").CreationTimestamp.After(s.pod("elastic-5").CreationTimestamp.Time), "the gang of 2 is A's youngest")
	s.eventually(30*time.Second, "/debug/queues: A, alone, holds and deserves the 8 GPUs", func() bool {
		v := s.queue(keyA)
		return gpus(v.Allocated) == "8" && gpus(v.Deserved) == "8"
	})
	require.Empty(t, deletions.deleted())

	// B's gang arrives. Its victims stay Terminating until the kubelet stand-in starts, so what
	// lockstep chose, and B's gang's reason, can be read before it binds.
	s.volcanoGang("trio", b, 3, 3)
	victims := []string{"elastic-3", "elastic-4", "elastic-5"}
	s.eventually(120*time.Second, "3 pods evicted for B's gang", func() bool { return len(deletions.deleted()) >= 3 })
	s.eventually(30*time.Second, "B's gang to say it reclaims for its queue", func() bool {
		return strings.Contains(s.reasonOf("trio"), fmt.Sprintf("gang %s/trio: reclaiming for %s, below its fair share,", s.ns, keyB))
	})
	s.never(5*time.Second, "more than 3 pods evicted for B's 3 GPUs", func() bool { return len(deletions.deleted()) > 3 })
	require.ElementsMatch(t, victims, deletions.deleted(), "exactly the 3 youngest members beyond the elastic gang's quorum go")
	require.Zero(t, s.boundInGroup("trio"), "B's gang binds only once its victims are gone")
	for _, v := range victims {
		s.eventually(30*time.Second, "a Preempted event on "+v+" naming B's gang and queue", func() bool {
			return s.hasEvent(v, "Preempted", fmt.Sprintf("reclaimed for gang %s/trio of %s", s.ns, keyB))
		})
	}

	kubelet := s.playKubelet()
	s.eventually(120*time.Second, "B's gang of 3 bound whole on what was taken back", func() bool { return s.boundInGroup("trio") == 3 })
	s.binds.assertNeverPartial(t, "trio", 3)
	s.never(5*time.Second, "more pods evicted once B's gang is bound", func() bool { return len(deletions.deleted()) > 3 })

	lowest, ok := floor.lowestSince("elastic", 2)
	require.True(t, ok)
	require.GreaterOrEqual(t, lowest, 2, "the elastic gang went below its minMember of 2 bound")
	lowest, ok = floor.lowestSince("pair", 2)
	require.True(t, ok)
	require.Equal(t, 2, lowest, "A's gang of 2 lost a member")
	require.Equal(t, 3, s.boundInGroup("elastic"))
	require.Equal(t, 2, s.boundInGroup("pair"))

	s.eventually(30*time.Second, "/debug/queues: A holds and deserves 5, B 3", func() bool {
		va, vb := s.queue(keyA), s.queue(keyB)
		return gpus(va.Allocated) == "5" && gpus(vb.Allocated) == "3" && gpus(va.Deserved) == "5" && gpus(vb.Deserved) == "3"
	})
	va, vb := s.queue(keyA), s.queue(keyB)
	require.Equal(t, "5", gpus(va.Used), "A: %s", va)
	require.Equal(t, "3", gpus(vb.Used), "B: %s", vb)
	require.Equal(t, "0", gpus(va.Held), "A: %s", va)
	require.Equal(t, "0", gpus(vb.Held), "B: %s", vb)
	require.ElementsMatch(t, victims, kubelet(), "what the stand-in kubelet finished is what lockstep evicted")
}

// The gang counterpart of the same "Reclaim" case, where Volcano's task-by-task reclaim cuts
// running gangs below minMember (volcano #4607, #4950), and of "Reclaim Case 10: Multi reclaimed
// queue": queue A holds two gangs of 4 (minMember 4, no member beyond its quorum) on 8 GPUs;
// queue B's gang of 4 arrives, and with equal weights deserves 4. One of A's gangs goes whole,
// all 4 of its members, the younger one; the other keeps all 4 throughout; B's gang binds whole.
func TestReclaimNeverCutsAGang(t *testing.T) {
	s := newQueueScenario(t, 4, 2)
	a := s.createVolcanoQueue(builders.VolcanoQueue(s.queueName("a")).Weight(1))
	b := s.createVolcanoQueue(builders.VolcanoQueue(s.queueName("b")).Weight(1))
	keyA, keyB := volcanoKey(a), volcanoKey(b)
	floor := watchMemberFloor(s)
	deletions := watchDeletions(t, s.ctx, s.ns)

	s.volcanoGangsOneByOne(a, 4, "older", "younger")
	s.eventually(30*time.Second, "/debug/queues: A holds the 8 GPUs", func() bool { return gpus(s.queue(keyA).Allocated) == "8" })
	require.Empty(t, deletions.deleted())

	// As in the test above, the victims stay Terminating until the kubelet stand-in starts.
	s.volcanoGang("quad", b, 4, 4)
	victims := []string{"younger-0", "younger-1", "younger-2", "younger-3"}
	s.eventually(120*time.Second, "4 pods evicted for B's gang", func() bool { return len(deletions.deleted()) >= 4 })
	s.eventually(30*time.Second, "B's gang to say it reclaims for its queue", func() bool {
		return strings.Contains(s.reasonOf("quad"), fmt.Sprintf("gang %s/quad: reclaiming for %s, below its fair share,", s.ns, keyB))
	})
	s.never(5*time.Second, "more than 4 pods evicted for B's 4 GPUs", func() bool { return len(deletions.deleted()) > 4 })
	require.ElementsMatch(t, victims, deletions.deleted(), "one of A's gangs goes, all of it, and only it: the younger")

	kubelet := s.playKubelet()
	s.eventually(120*time.Second, "B's gang of 4 bound whole", func() bool { return s.boundInGroup("quad") == 4 })
	s.binds.assertNeverPartial(t, "quad", 4)
	s.never(5*time.Second, "more pods evicted once B's gang is bound", func() bool { return len(deletions.deleted()) > 4 })
	for _, v := range victims {
		s.eventually(30*time.Second, "a Preempted event on "+v+" saying its gang goes whole", func() bool {
			return s.hasEvent(v, "Preempted", fmt.Sprintf("reclaimed for gang %s/quad of %s", s.ns, keyB)) &&
				s.hasEvent(v, "Preempted", fmt.Sprintf("lockstep evicts gang %s/younger whole (4 members)", s.ns))
		})
	}
	lowest, ok := floor.lowestSince("older", 4)
	require.True(t, ok)
	require.Equal(t, 4, lowest, "A's other gang lost a member")
	require.Equal(t, 4, s.boundInGroup("older"))
	s.eventually(30*time.Second, "no member of the evicted gang left", func() bool {
		return !slices.ContainsFunc(s.podsLeft(), func(name string) bool { return slices.Contains(victims, name) })
	})

	s.eventually(30*time.Second, "/debug/queues: A and B hold and deserve 4 each", func() bool {
		va, vb := s.queue(keyA), s.queue(keyB)
		return gpus(va.Allocated) == "4" && gpus(vb.Allocated) == "4" && gpus(va.Deserved) == "4" && gpus(vb.Deserved) == "4"
	})
	require.ElementsMatch(t, victims, kubelet())
}

// Ported from Volcano v1.10.0 test/e2e/schedulingaction/reclaim.go, "Reclaim Case 9: New queue
// with job created, all queues.spec.reclaimable is false, no reclaim" and "Reclaim Case 6: New
// queue with job created no reclaim when overused". There the cluster still had room for the new
// job; here queue A fills the 8 GPUs with four gangs of 2, so that only reclaim could place B's.
//
//  1. A says reclaimable: false: B's gang of 2, within its fair share of 2, waits; nothing is
//     evicted. Once A lets others reclaim, the same gang takes A's youngest gang back, whole.
//  2. B, holding 2, asks for a gang of 4 that would take it to 6, above the share of 4 it now
//     deserves: it waits, and nothing is evicted, although A holds 6, above its own share of 4,
//     and lets others reclaim. (Why reclaim refuses is not a reason users see: the gang says what
//     it lacks.)
func TestReclaimLeavesUnreclaimableQueuesAndSharesAlone(t *testing.T) {
	s := newQueueScenario(t, 4, 2)
	a := s.createVolcanoQueue(builders.VolcanoQueue(s.queueName("a")).Weight(1).Reclaimable(false))
	b := s.createVolcanoQueue(builders.VolcanoQueue(s.queueName("b")).Weight(1))
	keyA, keyB := volcanoKey(a), volcanoKey(b)
	deletions := watchDeletions(t, s.ctx, s.ns)
	kubelet := s.playKubelet()

	s.volcanoGangsOneByOne(a, 2, "a0", "a1", "a2", "a3")
	s.eventually(30*time.Second, "/debug/queues: A holds the 8 GPUs and does not let others reclaim", func() bool {
		v := s.queue(keyA)
		return gpus(v.Allocated) == "8" && !v.Reclaimable
	})

	// 1. Not reclaimable.
	s.volcanoGang("within", b, 2, 2)
	s.eventually(60*time.Second, "lockstep to know B's gang waiting, B deserving 2 and A 6", func() bool {
		g := s.gangs()["within"]
		return len(g.Members) == 2 && (g.Phase == views.PhaseWaiting || g.Phase == views.PhaseHolding) &&
			gpus(s.queue(keyB).Deserved) == "2" && gpus(s.queue(keyA).Deserved) == "6"
	})
	deletions.assertNoneFor(t, s.ctx, 10*time.Second)
	require.Zero(t, s.boundInGroup("within"), "no GPU is free, and A does not let others reclaim")
	t.Logf("B's gang waits on an unreclaimable queue: %s", s.reasonOf("within"))

	s.patchQueue(a, `{"spec":{"reclaimable":true}}`)
	s.eventually(30*time.Second, "lockstep to read A as reclaimable", func() bool { return s.queue(keyA).Reclaimable })
	s.eventually(120*time.Second, "B's gang bound on what A gave back once it lets others reclaim", func() bool { return s.boundInGroup("within") == 2 })
	s.binds.assertNeverPartial(t, "within", 2)
	s.eventually(30*time.Second, "2 pods evicted", func() bool { return len(deletions.deleted()) >= 2 })
	require.ElementsMatch(t, []string{"a3-0", "a3-1"}, deletions.deleted(), "A's youngest gang goes, whole")
	s.eventually(30*time.Second, "/debug/queues: A holds 6, B 2", func() bool {
		return gpus(s.queue(keyA).Allocated) == "6" && gpus(s.queue(keyB).Allocated) == "2"
	})

	// 2. Above its share.
	s.volcanoGang("beyond", b, 4, 4)
	s.eventually(60*time.Second, "lockstep to know B's gang of 4 waiting, B and A deserving 4 each", func() bool {
		g := s.gangs()["beyond"]
		return len(g.Members) == 4 && (g.Phase == views.PhaseWaiting || g.Phase == views.PhaseHolding) &&
			gpus(s.queue(keyB).Deserved) == "4" && gpus(s.queue(keyA).Deserved) == "4"
	})
	va := s.queue(keyA)
	require.True(t, va.Reclaimable)
	require.Equal(t, "6", gpus(va.Allocated), "A is above its share of 4: only B's own share keeps reclaim off it: %s", va)
	s.never(10*time.Second, "pods evicted for a gang that would take B above its fair share", func() bool { return len(deletions.deleted()) > 2 })
	require.Zero(t, s.boundInGroup("beyond"))
	require.Equal(t, 2, s.boundInGroup("within"))
	require.Equal(t, 6, s.boundInGroups([]string{"a0", "a1", "a2"}))
	t.Logf("B's gang of 4 waits above B's share: %s", s.reasonOf("beyond"))
	require.ElementsMatch(t, []string{"a3-0", "a3-1"}, kubelet())
}
