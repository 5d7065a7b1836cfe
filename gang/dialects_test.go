package gang

import (
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"

	"github.com/lockstep-sched/lockstep/dialect"
	"github.com/lockstep-sched/lockstep/gangspec"
	"github.com/lockstep-sched/lockstep/placement"
	"github.com/lockstep-sched/lockstep/test/lib/builders"
	"github.com/lockstep-sched/lockstep/wellknown"

	"github.com/lockstep-sched/lockstep/views"
)

// volcanoMembers are pods naming Volcano PodGroup default/<group> by annotation, task by task.
func volcanoMembers(group string, gpus int64, tasks ...string) []*corev1.Pod {
	out := make([]*corev1.Pod, len(tasks))
	for i, task := range tasks {
		out[i] = builders.Pod("default", fmt.Sprintf("%s-%d", task, i)).GPU(gpus).CPU("1").Memory("1Gi").
			Annotation(wellknown.AnnotationGroupName, group).Annotation(wellknown.AnnotationVolcanoTask, task).
			Created(t0.Add(timeSecond(i))).Obj()
	}
	return out
}

func volcanoRules(group string, spec *gangspec.Spec, err error) GroupRules {
	if spec != nil {
		spec.Namespace, spec.Name, spec.Source = "default", group, "Volcano PodGroup default/"+group
	}
	return GroupRules{Key: dialect.GroupNameKey("default", group), Namespace: "default", Name: group, Spec: spec, Err: err}
}

// Members whose group object does not exist yet wait with a reason naming it, and never schedule
// as ordinary pods; once it exists they schedule as a gang.
func TestGroupObjectCreatedAfterItsPods(t *testing.T) {
	e := newEnv(t, testConfig(), gpuNodes("n", 2, 2)...)
	pods := volcanoMembers("tf", 2, "worker", "worker")
	e.add(pods...)

	r := e.filter(pods[0])
	require.Empty(t, r.Feasible, "a member must not schedule before its gang's rules are known")
	require.Equal(t, "gang default/tf: waiting for Volcano or kube-batch PodGroup default/tf to exist; its members schedule only together, once it does", r.Failed["n-0"])
	st := e.status("default", "tf")
	require.Equal(t, views.PhaseWaiting, st.Phase)
	require.Equal(t, "waiting for Volcano or kube-batch PodGroup default/tf to exist", st.Members[0].Reason)
	e.waitEvent(corev1.EventTypeWarning, wellknown.ReasonGangWaiting, "PodGroup default/tf to exist")
	require.Error(t, e.bind(pods[0], "n-0"), "no bind before the rules are known")

	e.m.SetGroup(volcanoRules("tf", &gangspec.Spec{MinAvailable: 2}, nil))
	nodes := []string{e.filterOne(pods[0]), e.filterOne(pods[1])}
	held := e.bindAsync(pods[0], nodes[0])
	require.NoError(t, e.bind(pods[1], nodes[1]))
	require.NoError(t, recv(t, held, "held bind"))
	st = e.status("default", "tf")
	require.Equal(t, views.PhaseBound, st.Phase)
	require.Equal(t, "Volcano PodGroup default/tf", st.Source)

	// The object goes: members already bound stay bound; the gang is known by its pods alone.
	e.m.DeleteGroup(volcanoRules("tf", nil, nil).Key, "default", "tf")
	require.Equal(t, 2, e.status("default", "tf").Bound)
}

// A group object lockstep cannot use refuses its members with the object's own error.
func TestGroupObjectInvalid(t *testing.T) {
	e := newEnv(t, testConfig(), gpuNodes("n", 2, 2)...)
	pods := volcanoMembers("tf", 1, "worker")
	e.add(pods...)
	bad := &gangspec.FieldError{Object: "Volcano PodGroup default/tf", Field: "spec.minMember", Value: "0", Reason: "must be at least 1"}
	e.m.SetGroup(volcanoRules("tf", nil, bad))

	r := e.filter(pods[0])
	require.Empty(t, r.Feasible)
	require.Equal(t, bad.Error(), r.Failed["n-0"])
	e.waitEvent(corev1.EventTypeWarning, wellknown.ReasonGangRejected, "spec.minMember")
	require.Equal(t, "Rejected", e.status("default", "tf").Members[0].State)
}

// Volcano's minTaskMember: the reservation takes members of short tasks first, and the commit
// waits for every task's minimum as well as the total.
func TestTaskQuorums(t *testing.T) {
	cfg := testConfig()
	cfg.BindWait = 30 * time.Second
	e := newEnv(t, cfg, gpuNodes("n", 4, 2)...)
	spec := &gangspec.Spec{MinAvailable: 3, MinPerTask: map[string]int{"ps": 1, "worker": 2}}
	e.m.SetGroup(volcanoRules("tf", spec, nil))
	workers := volcanoMembers("tf", 1, "worker", "worker", "worker")
	e.add(workers...)

	r := e.filter(workers[0])
	require.Equal(t, "gang default/tf: waiting for members: 3 of min-available 3 exist (task ps: 0 of 1)", r.Failed["n-0"],
		"three workers make the total but not the ps task's quorum")

	ps := builders.Pod("default", "ps-0").CPU("1").Memory("1Gi").Annotation(wellknown.AnnotationGroupName, "tf").
		Annotation(wellknown.AnnotationVolcanoTask, "ps").Created(t0.Add(timeSecond(9))).Obj()
	e.add(ps)
	e.filterOne(workers[0])
	require.Equal(t, map[string]string{"default/worker-0": "Reserved", "default/ps-0": "Planned", "default/worker-1": "Planned", "default/worker-2": "Pending"},
		e.memberStates("default", "tf"), "the youngest member is planned because its task is short")

	nodes := map[*corev1.Pod]string{workers[1]: e.filterOne(workers[1]), ps: e.filterOne(ps)}
	held := []<-chan error{e.bindAsync(workers[0], e.status("default", "tf").Members[0].Node), e.bindAsync(workers[1], nodes[workers[1]])}
	e.waitStates("default", "tf", map[string]string{"default/worker-0": "WaitingForQuorum", "default/worker-1": "WaitingForQuorum"})
	require.Contains(t, e.status("default", "tf").Reason, "2 of 3 members ready to bind (task ps: 0 of 1)")
	require.Zero(t, e.binder.Count())
	require.NoError(t, e.bind(ps, nodes[ps]))
	for _, ch := range held {
		require.NoError(t, recv(t, ch, "held worker"))
	}
	require.Equal(t, 3, e.binder.Count())
}

// Koordinator's gang group: a gang whose quorum is ready holds its binds until every gang of its
// group is ready too; then all commit together.
func TestGangGroupBindsOnlyTogether(t *testing.T) {
	cfg := testConfig()
	cfg.BindWait = 30 * time.Second
	e := newEnv(t, cfg, gpuNodes("n", 4, 2)...)
	group := func(b *builders.PodBuilder) {
		b.Annotation(wellknown.AnnotationGangGroups, `["default/a","default/b"]`)
	}
	a := members("default", "a", "a", 2, 2, 1, group)
	b := members("default", "b", "b", 2, 2, 1, group)
	e.add(a...)
	e.add(b...)

	var held []<-chan error
	for _, p := range a {
		held = append(held, e.bindAsync(p, e.filterOne(p)))
	}
	e.waitStates("default", "a", map[string]string{"default/a-0": "WaitingForQuorum", "default/a-1": "WaitingForQuorum"})
	st := e.status("default", "a")
	require.Contains(t, st.Reason, "binds held until every gang of its group [default/a default/b] is ready: gang default/b has no reservation")
	require.Equal(t, []string{"default/a", "default/b"}, st.Group)
	require.Zero(t, e.binder.Count(), "gang a's quorum alone binds nothing")

	held = append(held, e.bindAsync(b[0], e.filterOne(b[0])))
	e.waitStates("default", "b", map[string]string{"default/b-0": "WaitingForQuorum"})
	require.Zero(t, e.binder.Count())
	require.NoError(t, e.bind(b[1], e.filterOne(b[1])))
	for _, ch := range held {
		require.NoError(t, recv(t, ch, "held bind"))
	}
	require.Equal(t, 4, e.binder.Count())
}

// Which bound members count toward min-available, per Koordinator's match-policy.
func TestMatchPolicies(t *testing.T) {
	// Two members bound, the first of them then finished; does a third schedule on its own?
	scenario := func(t *testing.T, policy string) (*env, *corev1.Pod) {
		e := newEnv(t, testConfig(), gpuNodes("n", 4, 2)...)
		opt := func(b *builders.PodBuilder) {
			b.TotalNumber(3)
			if policy != "" {
				b.Annotation(wellknown.AnnotationGangMatchPolicy, policy)
			}
		}
		pods := members("default", "mpi", "w", 3, 2, 1, opt)
		e.add(pods...)
		held := e.bindAsync(pods[0], e.filterOne(pods[0]))
		require.NoError(t, e.bind(pods[1], e.filterOne(pods[1])))
		require.NoError(t, recv(t, held, "held bind"))
		done := pods[0].DeepCopy()
		done.Spec.NodeName, done.Status.Phase = e.binder.Bindings()[keyOf(done)], corev1.PodSucceeded
		e.add(done)
		return e, pods[2]
	}
	t.Run("once-satisfied (Koordinator's default): the gang had its quorum", func(t *testing.T) {
		e, third := scenario(t, "")
		require.Len(t, e.filter(third).Feasible, 4)
	})
	t.Run("waiting-and-running: one bound member is below min-available", func(t *testing.T) {
		e, third := scenario(t, "waiting-and-running")
		e.filterOne(third) // reserved: with the bound one it makes the quorum again
		require.Equal(t, views.PhaseReserving, e.status("default", "mpi").Phase)
	})
	t.Run("only-waiting: bound members never count", func(t *testing.T) {
		e, third := scenario(t, "only-waiting")
		r := e.filter(third)
		require.Equal(t, "gang default/mpi: waiting for members: 1 of min-available 2 exist; min-available is annotation gang.scheduling.koordinator.sh/min-available of the members", r.Failed["n-0"])
	})
}

// A pod whose gang's other members read their rules from another source is refused, naming both.
func TestMembersOfOneGangFromTwoSources(t *testing.T) {
	e := newEnv(t, testConfig(), gpuNodes("n", 2, 2)...)
	koord := members("default", "tf", "w", 1, 1, 1)[0]
	sp := builders.Pod("default", "sp").GPU(1).Label(wellknown.LabelCoschedulingPodGroup, "tf").Created(t0.Add(time.Minute)).Obj()
	e.m.SetGroup(GroupRules{Key: dialect.CoschedulingKey("default", "tf"), Namespace: "default", Name: "tf",
		Spec: &gangspec.Spec{Namespace: "default", Name: "tf", MinAvailable: 1, Source: "scheduler-plugins PodGroup default/tf"}})
	e.add(koord, sp)
	r := e.filter(sp)
	require.Empty(t, r.Feasible)
	var fe *gangspec.FieldError
	require.True(t, errors.As(memberErrorOf(e, sp), &fe))
	require.Equal(t, "source", fe.Field)
	require.Contains(t, r.Failed["n-0"], `"scheduler-plugins PodGroup default/tf"`)
	require.Contains(t, r.Failed["n-0"], `"Koordinator annotations" (from pod default/w-0)`)
}

func memberErrorOf(e *env, pod *corev1.Pod) (err error) {
	e.m.locked(func() {
		s := e.m.snapshots.current()
		err = s.MemberError(s.Pods[pod.UID])
	})
	return err
}

// Standing and FitsInTotal are what package podgroup writes into group objects' status.
func TestStandingAndFitsInTotal(t *testing.T) {
	e := newEnv(t, testConfig(), gpuNodes("n", 2, 2)...)
	_, ok := e.m.Standing("default/mpi")
	require.False(t, ok)

	fits, why := e.m.FitsInTotal(placement.Resources{GPU: 4})
	require.True(t, fits, why)
	fits, why = e.m.FitsInTotal(placement.Resources{GPU: 5})
	require.False(t, fits)
	require.Equal(t, "needs 5 nvidia.com/gpu in all; the cluster has 4 free", why)

	pods := members("default", "mpi", "w", 3, 2, 2)
	e.add(pods...)
	st, ok := e.m.Standing("default/mpi")
	require.True(t, ok)
	require.Equal(t, Standing{Phase: views.PhaseWaiting, Members: 3, Reason: "no member has reached lockstep's filter yet", Since: t0,
		QuorumRequests: placement.Resources{GPU: 4, MilliCPU: 2000, Memory: 2 << 30, Pods: 2}}, st)

	e.filterOne(pods[0]) // reserves the quorum: all 4 GPUs
	fits, _ = e.m.FitsInTotal(placement.Resources{GPU: 1})
	require.False(t, fits, "reserved GPUs are not free")
}
