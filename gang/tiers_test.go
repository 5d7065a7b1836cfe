package gang

import (
	"fmt"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"

	"github.com/lockstep-sched/lockstep/fabric"
	"github.com/lockstep-sched/lockstep/gangspec"
	"github.com/lockstep-sched/lockstep/test/lib/builders"
	"github.com/lockstep-sched/lockstep/wellknown"

	"github.com/lockstep-sched/lockstep/views"
)

const (
	rackKey  = "example.com/rack"
	blockKey = "example.com/block"
)

// rackNodes makes 4-GPU nodes named after their rack, "<block>-<rack>-<i>", labelled with both.
func rackNodes(block, rack string, count int) []*corev1.Node {
	out := make([]*corev1.Node, count)
	for i := range out {
		out[i] = builders.Node(fmt.Sprintf("%s-%s-%d", block, rack, i)).GPU(4).CPU("64").Memory("256Gi").Pods(110).
			Label(rackKey, rack).Label(blockKey, block).Obj()
	}
	return out
}

func tierEnv(t *testing.T, nodes ...[]*corev1.Node) *env {
	cfg := testConfig()
	cfg.Tiers = fabric.Tiers{{Key: rackKey, Name: "RackLayer"}, {Key: blockKey}}
	var all []*corev1.Node
	for _, n := range nodes {
		all = append(all, n...)
	}
	return newEnv(t, cfg, all...)
}

// rackOf is the rack a gang's members are reserved in, failing when they span more than one.
func (e *env) racksOf(gang string) []string {
	for _, td := range e.status("default", gang).Domains {
		if td.Tier == rackKey {
			return td.Domains
		}
	}
	return nil
}

func TestQuorumGoesToTheNarrowestTightestDomain(t *testing.T) {
	cases := []struct {
		name      string
		nodes     [][]*corev1.Node
		members   int
		wantRacks []string
	}{
		{"the rack that fits exactly, not the roomier one", [][]*corev1.Node{rackNodes("b1", "roomy", 3), rackNodes("b1", "tight", 2)}, 2, []string{"b1/tight"}},
		{"one block when no rack holds it", [][]*corev1.Node{rackNodes("b1", "r1", 2), rackNodes("b1", "r2", 2), rackNodes("a0", "r3", 1)}, 4, []string{"b1/r1", "b1/r2"}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			e := tierEnv(t, tc.nodes...)
			g := members("default", "g", "g", tc.members, tc.members, 4)
			e.add(g...)
			e.filterOne(g[0])
			require.Equal(t, tc.wantRacks, e.racksOf("g"))
		})
	}
}

func TestRequiredTierThatNothingHoldsWaits(t *testing.T) {
	e := tierEnv(t, rackNodes("b1", "r1", 2), rackNodes("b1", "r2", 2))
	g := members("default", "g", "g", 3, 3, 4, func(b *builders.PodBuilder) { b.Annotation(wellknown.AnnotationRequiredTopology, rackKey) })
	e.add(g...)
	r := e.filter(g[0])
	require.Empty(t, r.Feasible, "12 GPUs fit the cluster, but no rack has more than 8")
	require.Equal(t, "gang default/g: 3 members x 4 nvidia.com/gpu need one rack (example.com/rack); the largest rack has 8 free (b1/r1)", r.Failed["b1-r1-0"])
	st := e.status("default", "g")
	require.Equal(t, "required example.com/rack", st.Topology)
	require.Equal(t, views.PhaseWaiting, st.Phase)

	// However long it waits, it holds no capacity: no rack could ever hold its quorum.
	e.m.cfg.StarvationThreshold = time.Minute
	e.m.now = newTestClock(t0.Add(time.Hour)).now
	require.Empty(t, e.filter(g[0]).Feasible)
	require.Equal(t, views.PhaseWaiting, e.status("default", "g").Phase)

	// Preferred instead: the rack is tried first, then the whole cluster.
	e2 := tierEnv(t, rackNodes("b1", "r1", 2), rackNodes("b1", "r2", 2))
	p := members("default", "p", "p", 3, 3, 4, func(b *builders.PodBuilder) { b.Annotation(wellknown.AnnotationKueuePreferredTopology, rackKey) })
	e2.add(p...)
	e2.filterOne(p[0])
	require.Len(t, e2.racksOf("p"), 2)
}

func TestTopologyRequestsRefusedByName(t *testing.T) {
	e := tierEnv(t, rackNodes("b1", "r1", 2))
	unknown := members("default", "u", "u", 2, 2, 1, func(b *builders.PodBuilder) { b.Annotation(wellknown.AnnotationRequiredTopology, "example.com/rck") })
	e.add(unknown...)
	require.Equal(t, `pod default/u-0: annotation lockstep.dev/required-topology requires "example.com/rck": not one of lockstep's --topology-tiers (RackLayer=example.com/rack,example.com/block); name one of those (by label key, short name, or the name a tier is given as name=key), or prefer the tier instead of requiring it`,
		e.filter(unknown[0]).Failed["b1-r1-0"])

	split := members("default", "s", "s", 2, 2, 1)
	split[1].Annotations[wellknown.AnnotationRequiredTopology] = rackKey
	e.add(split...)
	require.Contains(t, e.filter(split[1]).Failed["b1-r1-0"], `network topology "required example.com/rack": gang default/s already asks ""`)

	both := members("default", "b", "b", 1, 1, 1, func(b *builders.PodBuilder) {
		b.Annotation(wellknown.AnnotationRequiredTopology, rackKey).Annotation(wellknown.AnnotationKueuePreferredTopology, blockKey)
	})
	e.add(both...)
	require.Contains(t, e.filter(both[0]).Failed["b1-r1-0"], "disagrees with annotation lockstep.dev/required-topology")
}

// After quorum, further members prefer the nodes of the racks their gang is in.
func TestMembersAfterQuorumPreferTheirGangsRack(t *testing.T) {
	e := tierEnv(t, rackNodes("b1", "r1", 2), rackNodes("b1", "r2", 2))
	g := members("default", "g", "g", 3, 1, 1, func(b *builders.PodBuilder) { b.TotalNumber(3) })
	g[0].Spec.NodeName = "b1-r2-0"
	e.add(g...)
	scores := e.m.Prioritize(g[1], []string{"b1-r1-0", "b1-r1-1", "b1-r2-0", "b1-r2-1"}, nil)
	require.Equal(t, int64(wellknown.MaxScore), scores[2], "the mate's own node")
	require.Equal(t, int64(wellknown.MaxScore-1), scores[3], "the mate's rack")
	require.Less(t, scores[0], scores[3])
	require.Less(t, scores[1], scores[3])
}

// Volcano's spec.networkTopology on the PodGroup: highestTierAllowed counts lockstep's tiers from
// the narrowest, so tier 1 hard means one rack here, and soft falls back to the cluster.
func TestGroupObjectAsksForATier(t *testing.T) {
	for _, required := range []bool{true, false} {
		e := tierEnv(t, rackNodes("b1", "r1", 2), rackNodes("b1", "r2", 2))
		pods := volcanoMembers("vc", 4, "worker", "worker", "worker")
		e.add(pods...)
		e.m.SetGroup(volcanoRules("vc", &gangspec.Spec{MinAvailable: 3,
			Topology: gangspec.Topology{Tier: 1, Required: required, Source: "spec.networkTopology of Volcano PodGroup default/vc"}}, nil))
		r := e.filter(pods[0])
		if required {
			require.Empty(t, r.Feasible)
			require.Equal(t, "gang default/vc: 3 members x 4 nvidia.com/gpu need one rack (example.com/rack); the largest rack has 8 free (b1/r1)", r.Failed["b1-r1-0"])
			require.Equal(t, "required tier 1", e.status("default", "vc").Topology)
			continue
		}
		require.Len(t, r.Feasible, 1, "soft: the whole cluster once no rack holds it")
	}
}

// Koordinator's network-topology-spec names tiers as layers: the tier's name in
// --topology-tiers (RackLayer here), or its short name. MustGather takes the narrowest layer it
// names, PreferGather the widest; a required layer lockstep does not have refuses the member.
func TestKoordinatorGatherRulesNameTiers(t *testing.T) {
	spec := func(rules string) func(*builders.PodBuilder) {
		return func(b *builders.PodBuilder) {
			b.Annotation(wellknown.AnnotationGangNetworkTopologySpec, `{"gatherStrategy":[`+rules+`]}`)
		}
	}
	e := tierEnv(t, rackNodes("b1", "r1", 2), rackNodes("b1", "r2", 2))
	must := members("default", "must", "must", 3, 3, 4, spec(`{"layer":"block","strategy":"MustGather"},{"layer":"RackLayer","strategy":"MustGather"}`))
	e.add(must...)
	require.Equal(t, "gang default/must: 3 members x 4 nvidia.com/gpu need one rack (example.com/rack); the largest rack has 8 free (b1/r1)",
		e.filter(must[0]).Failed["b1-r1-0"], "MustGather on rack and block: the rack")
	require.Equal(t, "required block or RackLayer", e.status("default", "must").Topology)

	prefer := members("default", "prefer", "prefer", 3, 3, 4, spec(`{"layer":"RackLayer","strategy":"PreferGather"},{"layer":"block","strategy":"PreferGather"}`))
	e.add(prefer...)
	e.filterOne(prefer[0])
	require.Len(t, e.racksOf("prefer"), 2, "PreferGather: the block holds it where no rack does")

	spine := members("default", "spine", "spine", 2, 2, 1, spec(`{"layer":"SpineLayer","strategy":"MustGather"}`))
	e.add(spine...)
	require.Contains(t, e.filter(spine[0]).Failed["b1-r1-0"], "requires SpineLayer: not one of lockstep's --topology-tiers")
}

// Among equally good nodes, a quorum that opens an idle node opens it in the rack with the fewest
// idle GPUs, so that whole racks stay free for multi-node gangs.
func TestIdleNodesOpenInTheFullerRack(t *testing.T) {
	e := tierEnv(t, rackNodes("b1", "a", 2), rackNodes("b1", "b", 2))
	// Rack b has a node in use: of the idle nodes, b1-b-1 is the one in the fuller rack,
	// though b1-a-0 comes first by name.
	e.add(bound("busy", "b1-b-0", 1, 0, t0))
	solo := members("default", "solo", "solo", 1, 1, 4)
	e.add(solo...)
	require.Equal(t, []string{"b1-b-1"}, e.filter(solo[0]).Feasible)
}

// Before that, a pod opens no idle node beside an idle bigger one: a gang with one big member needs
// the big node and an idle node in the same rack, and opening the small nodes around it strands it.
func TestIdleNodesOpenAwayFromIdleBigNodes(t *testing.T) {
	big := builders.Node("b1-a-big").GPU(4).CPU("128").Memory("768Gi").Pods(110).Label(rackKey, "a").Label(blockKey, "b1").Obj()
	e := tierEnv(t, rackNodes("b1", "a", 1), []*corev1.Node{big}, rackNodes("b1", "b", 3))
	// Rack a has fewer idle GPUs (8 against 12), but its small node is the big node's partner.
	solo := members("default", "solo", "solo", 1, 1, 4)
	e.add(solo...)
	e.filterOne(solo[0])
	require.Equal(t, []string{"b1/b"}, e.racksOf("solo"))

	// Then a gang of one big and one small member still finds both in rack a.
	pair := []*corev1.Pod{
		builders.Pod("default", "pair-0").GPU(4).CPU("100").Memory("1Gi").Gang("pair", 2).Created(t0).Obj(),
		builders.Pod("default", "pair-1").GPU(4).CPU("1").Memory("1Gi").Gang("pair", 2).Created(t0.Add(time.Second)).Obj(),
	}
	e.add(pair...)
	e.filterOne(pair[0])
	require.Equal(t, []string{"b1/a"}, e.racksOf("pair"))
}

// A gang whose whole request one node could hold keeps the planner's own plan, even when that
// plan spans racks: re-placed in the tightest rack, such gangs took that rack's last idle nodes,
// the big ones (docs/packing-network.md).
func TestSmallGangKeepsThePlannersPlan(t *testing.T) {
	small := func(block, rack string) []*corev1.Node {
		return []*corev1.Node{builders.Node(block+"-"+rack+"-small").GPU(4).CPU("8").Memory("256Gi").Pods(110).
			Label(rackKey, rack).Label(blockKey, block).Obj()}
	}
	big := builders.Node("b1-z-big").GPU(4).CPU("64").Memory("256Gi").Pods(110).Label(rackKey, "z").Label(blockKey, "b1").Obj()
	e := tierEnv(t, small("b1", "x"), small("b1", "y"), []*corev1.Node{big})
	// 2 x 1 GPU x 6 cpu: the big node holds both, the small ones one each. The planner keeps
	// the big node for pods that need it and splits the pair across racks x and y.
	pair := members("default", "pair", "pair", 2, 2, 1, func(b *builders.PodBuilder) { b.CPU("6") })
	e.add(pair...)
	e.filterOne(pair[0])
	require.Equal(t, []string{"b1/x", "b1/y"}, e.racksOf("pair"))

	// A gang that asks for a rack gets one.
	asks := members("default", "asks", "asks", 2, 2, 1, func(b *builders.PodBuilder) {
		b.CPU("6").Annotation(wellknown.AnnotationPreferredTopology, rackKey)
	})
	e.add(asks...)
	e.filterOne(asks[0])
	require.Equal(t, []string{"b1/z"}, e.racksOf("asks"))
}

// Nodes without any tier's label each sit alone in their domain; a quorum that needs every one of
// them is planned across them all, as without tiers.
func TestQuorumAcrossUnlabelledNodesNeedingEveryNode(t *testing.T) {
	e := tierEnv(t, gpuNodes("n", 4, 2))
	pods := members("default", "phoenix", "p", 4, 4, 2)
	e.add(pods...)
	for _, p := range pods {
		e.filterOne(p)
	}
	require.Equal(t, views.PhaseReserving, e.status("default", "phoenix").Phase)
}

// The scheduler may offer the member at filter fewer nodes than there are (its own filters rule
// the rest out for it); the plan puts that member on an offered node and the others around it.
func TestQuorumAcrossUnlabelledNodesWithOneNodeOffered(t *testing.T) {
	e := tierEnv(t, gpuNodes("n", 4, 2))
	pods := members("default", "phoenix", "p", 4, 4, 2)
	e.add(pods...)
	r := e.filterNodes(pods[0], []string{e.nodes[2]})
	require.Equal(t, []string{e.nodes[2]}, r.Feasible, "failed: %v", r.Failed)
}
