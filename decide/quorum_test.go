package decide

import (
	"strconv"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"

	"github.com/lockstep-sched/lockstep/gangspec"
)

// tasked are members of gang asking a GPU each, gang-i of tasks[i], created i seconds after t0.
func tasked(gang string, spec *specWrapper, tasks ...string) []*podWrapper {
	out := make([]*podWrapper, len(tasks))
	for i, task := range tasks {
		out[i] = makeMember(gang, gang+"-"+strconv.Itoa(i), spec).GPU(1).Task(task).Age(i)
	}
	return out
}

// allOn binds every pod to node.
func allOn(node string, pods []*podWrapper) []*podWrapper {
	for _, p := range pods {
		p.On(node)
	}
	return pods
}

// boundA are count members of gang a on n-0 under spec, a-0 the oldest.
func boundA(count int, spec *specWrapper, edit func(i int, p *podWrapper)) []*podWrapper {
	out := allOn("n-0", members("a", count, 1, spec))
	for i, p := range out {
		if edit != nil {
			edit(i, p)
		}
	}
	return out
}

func TestGangExtras(t *testing.T) {
	cases := []struct {
		name string
		snap *snapshotWrapper
		// want are the extras, the youngest first.
		want []string
	}{
		{
			name: "the youngest bound members beyond min-available",
			snap: makeSnapshot().Pods(boundA(4, makeSpec(2), nil)...),
			want: []string{"a-3", "a-2"},
		},
		{
			name: "none at the quorum",
			snap: makeSnapshot().Pods(boundA(2, makeSpec(2), nil)...),
		},
		{
			name: "members not bound neither count nor are extras",
			snap: makeSnapshot().Pods(boundA(4, makeSpec(2), func(i int, p *podWrapper) {
				if i == 3 {
					p.On("")
				}
			})...),
			want: []string{"a-2"},
		},
		{
			name: "task minimums hold: the youngest of a task at its minimum stay",
			snap: makeSnapshot().Pods(allOn("n-0", tasked("a", makeSpec(2).Task("ps", 2), "worker", "worker", "ps", "ps"))...),
			want: []string{"a-1", "a-0"},
		},
		{
			name: "a task above its minimum gives up members down to it, no further",
			snap: makeSnapshot().Pods(allOn("n-0", tasked("a", makeSpec(2).Task("ps", 1), "worker", "worker", "ps", "ps"))...),
			want: []string{"a-3", "a-1"},
		},
		{
			name: "keep-extras members stay but count toward the quorum",
			snap: makeSnapshot().Pods(boundA(3, makeSpec(1), func(i int, p *podWrapper) {
				if i == 2 {
					p.KeepExtras()
				}
			})...),
			want: []string{"a-1", "a-0"},
		},
		{
			name: "only-waiting gangs have none",
			snap: makeSnapshot().Pods(boundA(4, makeSpec(2).Policy(gangspec.OnlyWaiting), nil)...),
		},
		{
			name: "a gang whose members go only together (disruptionMode all) has none",
			snap: makeSnapshot().Pods(boundA(4, makeSpec(2).DisruptAll(), nil)...),
		},
		{
			name: "once-satisfied gangs have them",
			snap: makeSnapshot().Pods(boundA(3, makeSpec(2).Policy(gangspec.OnceSatisfied), nil)...),
			want: []string{"a-2"},
		},
		{
			name: "a member whose eviction was refused lately stays and counts",
			snap: makeSnapshot().Pods(boundA(4, makeSpec(2), nil)...).Refused("a-3", now.Add(-10*time.Second)),
			want: []string{"a-2", "a-1"},
		},
		{
			name: "a refusal past EvictRefusedFor is forgotten",
			snap: makeSnapshot().Pods(boundA(4, makeSpec(2), nil)...).Refused("a-3", now.Add(-EvictRefusedFor)),
			want: []string{"a-3", "a-2"},
		},
		{
			name: "going members neither count nor are extras",
			snap: makeSnapshot().Pods(boundA(4, makeSpec(1), func(i int, p *podWrapper) {
				switch i {
				case 2:
					p.Deleting()
				case 3:
					p.Evicting()
				}
			})...),
			want: []string{"a-1"},
		},
		{
			name: "terminal members neither count nor are extras",
			snap: makeSnapshot().Pods(boundA(3, makeSpec(1), func(i int, p *podWrapper) {
				if i == 2 {
					p.Terminal()
				}
			})...),
			want: []string{"a-1"},
		},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			s := tc.snap.Obj()
			got := s.Gangs[gangKey("a")].Extras(s.evictRefusedLately)
			if len(tc.want) == 0 {
				assert.Empty(t, got)
				return
			}
			assert.Equal(t, tc.want, names(got))
		})
	}
}

func TestGangSatisfied(t *testing.T) {
	cases := []struct {
		name    string
		snap    *snapshotWrapper
		history History
		want    bool
	}{
		{"quorum bound", makeSnapshot().Pods(boundA(2, makeSpec(2), nil)...), History{}, true},
		{"a member going does not count", makeSnapshot().Pods(boundA(2, makeSpec(2), func(i int, p *podWrapper) {
			if i == 1 {
				p.Evicting()
			}
		})...), History{}, false},
		{"only-waiting is never satisfied", makeSnapshot().Pods(boundA(2, makeSpec(2).Policy(gangspec.OnlyWaiting), nil)...), History{}, false},
		{"once-satisfied with one member left", makeSnapshot().Pods(boundA(1, makeSpec(2).Policy(gangspec.OnceSatisfied), nil)...), History{SatisfiedOnce: true}, true},
		{"once-satisfied with every member going starts over", makeSnapshot().Pods(boundA(1, makeSpec(2).Policy(gangspec.OnceSatisfied), func(_ int, p *podWrapper) {
			p.Deleting()
		})...), History{SatisfiedOnce: true}, false},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			s := tc.snap.History("a", tc.history).Obj()
			g := s.Gangs[gangKey("a")]
			spec, _ := g.Reference()
			assert.Equal(t, tc.want, g.Satisfied(spec))
		})
	}
}

// A Kubernetes 1.37 PodGroup's priority is every member's, as kube-scheduler requires: a member
// at another priority is refused by name, whatever its gang mates say.
func TestMemberOfAGroupWithPriority(t *testing.T) {
	cases := []struct {
		name     string
		priority int32
		wantErr  string
	}{
		{name: "at the group's priority", priority: 100},
		{name: "at another priority", priority: 0,
			wantErr: "pod ns/a-0: priority 0: Kubernetes PodGroup ns/a (scheduling.k8s.io/v1beta1) has priority 100, and every pod of the group must have it"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			s := makeSnapshot().GPUNodes("n", 1, 8).Pods(members("a", 1, 1, makeSpec(1).Priority(100))[0].Priority(tc.priority)).Obj()
			err := s.MemberError(pod(s, "a-0"))
			if tc.wantErr == "" {
				assert.NoError(t, err)
				return
			}
			assert.ErrorContains(t, err, tc.wantErr)
		})
	}
}
