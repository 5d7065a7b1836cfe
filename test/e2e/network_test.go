package e2e

import (
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/lockstep-sched/lockstep/test/lib/cluster"
	"github.com/lockstep-sched/lockstep/views"
	"github.com/lockstep-sched/lockstep/wellknown"
)

// The suite's network tiers (lockstep's --topology-tiers): racks inside blocks. Nodes of other
// tests carry neither label, so each sits alone at both tiers.
const (
	rackLabel  = "lockstep.e2e/rack"
	blockLabel = "lockstep.e2e/block"
)

// The tiers carry Koordinator-style layer names too, for gangs that ask by name. The narrowest is
// NVIDIA's multi-node NVLink domain (GPU Feature Discovery's clique label), which gangs of
// ComputeDomain channels require (dra_test.go); nodes without it sit alone there too.
var suiteTiers = cliqueLabel + ",RackLayer=" + rackLabel + ",BlockLayer=" + blockLabel

const cliqueLabel = "nvidia.com/gpu.clique"

// twoRacks is 5 nodes x 4 GPUs in one block: rack "a" of 2 and rack "b" of 3, named so that a
// plan by node names alone would alternate between the racks.
func twoRacks() []cluster.NodeSpec {
	racks := []string{"b", "a", "b", "a", "b"}
	specs := make([]cluster.NodeSpec, len(racks))
	for i, rack := range racks {
		specs[i] = cluster.NodeSpec{Name: fmt.Sprintf("n-%d", i), GPUs: 4,
			Labels: map[string]string{rackLabel: rack, blockLabel: "block-1"}}
	}
	return specs
}

// rackOf is the rack of the node a pod is bound to, "" while unbound.
func (s *scenario) rackOf(pod string) string {
	p := s.pod(pod)
	if p.Spec.NodeName == "" {
		return ""
	}
	for i, node := range s.nodes {
		if node == p.Spec.NodeName {
			return twoRacks()[i].Labels[rackLabel]
		}
	}
	return "?"
}

// A gang of 2 x 4 GPUs fits in either rack; it lands whole in rack a, the one it fills exactly,
// though rack b has free nodes too (and comes first by name).
func TestGangLandsInOneRack(t *testing.T) {
	s := newScenarioWithNodes(t, twoRacks()...)
	for i := range 2 {
		s.create(podSpec{name: fmt.Sprintf("pair-%d", i), gpus: 4, gang: "pair", minAvailable: 2}.pod())
	}
	s.eventually(60*time.Second, "the pair bound", func() bool { return s.boundIn("pair-") == 2 })
	s.binds.assertNeverPartial(t, "pair", 2)
	require.Equal(t, "a", s.rackOf("pair-0"))
	require.Equal(t, "a", s.rackOf("pair-1"))
	g := s.gangs()["pair"]
	require.Len(t, g.Domains, 3, "the NVLink clique, the rack and the block")
	require.Equal(t, cliqueLabel, g.Domains[0].Tier)
	require.Len(t, g.Domains[0].Domains, 2, "a node of no clique is a domain of its own")
	require.Equal(t, rackLabel, g.Domains[1].Tier)
	require.Equal(t, []string{"block-1/a"}, g.Domains[1].Domains, "/debug/gangs names the gang's rack")
	require.Equal(t, []string{"block-1"}, g.Domains[2].Domains)
}

// A gang that requires one rack and fits in none waits, saying which tier and the largest free
// rack, and binds nothing; the cluster as a whole has room for it. It asks in lockstep's own
// annotation, or in Koordinator's network-topology-spec by the layer name the suite's
// --topology-tiers gives the rack tier.
func TestRequiredRackThatNothingHoldsWaits(t *testing.T) {
	cases := []struct {
		name, key, value, topology string
	}{
		{"lockstep annotation", wellknown.AnnotationRequiredTopology, rackLabel, "required " + rackLabel},
		{"Koordinator MustGather", wellknown.AnnotationGangNetworkTopologySpec,
			`{"gatherStrategy":[{"layer":"RackLayer","strategy":"MustGather"},{"layer":"BlockLayer","strategy":"PreferGather"}]}`, "required RackLayer"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			s := newScenarioWithNodes(t, twoRacks()...)
			for i := range 4 {
				p := podSpec{name: fmt.Sprintf("big-%d", i), gpus: 4, gang: "big", minAvailable: 4}.pod()
				p.Annotations[tc.key] = tc.value
				s.create(p)
			}
			want := fmt.Sprintf("gang %s/big: 4 members x 4 nvidia.com/gpu need one rack (%s); the largest rack has 12 free (block-1/b)", s.ns, rackLabel)
			s.eventually(60*time.Second, "the wait's reason", func() bool { return strings.Contains(s.gangs()["big"].Reason, want) })
			// A member the scheduler tried before the others existed keeps that older reason until
			// the scheduler retries it; the ones tried after say the rack.
			s.eventually(30*time.Second, "the reason in a member's FailedScheduling event", func() bool {
				for i := range 4 {
					if strings.Contains(s.schedulingMessage(fmt.Sprintf("big-%d", i)), "need one rack") {
						return true
					}
				}
				return false
			})
			require.Equal(t, tc.topology, s.gangs()["big"].Topology)
			// Past the starvation threshold too, it holds nothing: no rack could ever hold its quorum.
			require.Never(t, func() bool { return s.gangs()["big"].Phase != views.PhaseWaiting }, starvationThreshold+2*time.Second, 250*time.Millisecond)
			require.Zero(t, s.boundIn("big-"))
		})
	}
}
