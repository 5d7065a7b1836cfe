package fabric

import (
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
	"k8s.io/apimachinery/pkg/util/validation"
)

// FuzzParse reads any --topology-tiers flag. The flag is the operator's, not the cluster's, but
// a mistake in it should stop lockstep at start with a message, not steer every gang to tiers the
// operator never wrote. Accepted tiers are label keys, with one-word names, no word naming two
// tiers (a gang's request resolves to exactly one, by key before name), and they print as a
// flag that reads back as the same tiers.
func FuzzParse(f *testing.F) {
	for _, seed := range []string{
		"",
		"  ",
		"gke",
		"zone",
		" aws ",
		"nvidia.com/gpu.clique, example.com/rack ,example.com/block",
		"RackLayer=example.com/rack, BlockLayer = example.com/block",
		"example.com/rack,example.com/rack",
		"rack=example.com/rack,rack=example.com/block",
		"example.com/rack,rack=example.com/block",
		"rack=example.com/block,example.com/rack",
		"=example.com/rack",
		"my rack=example.com/rack",
		"a/b=example.com/rack",
		"rack=",
		"rack=a=b",
		"example.com/Rack_1,UPPER",
		"-bad",
		"example.com/",
		"a,,b",
		strings.Repeat("x", 64),
		strings.Repeat("a.", 127) + "a/x",
	} {
		f.Add(seed)
	}
	f.Fuzz(func(t *testing.T, flag string) {
		tiers, err := Parse(flag)
		if err != nil {
			require.Nil(t, tiers)
			require.True(t, strings.HasPrefix(err.Error(), "topology tier "), "error %q names no tier", err)
			return
		}
		if strings.TrimSpace(flag) == "" {
			require.Nil(t, tiers)
			return
		}
		if preset, ok := Presets[strings.TrimSpace(flag)]; ok {
			require.Equal(t, preset, tiers)
			tiers[0].Key = "changed"
			require.NotEqual(t, "changed", Presets[strings.TrimSpace(flag)][0].Key, "a preset handed out is a copy")
			return
		}
		require.Len(t, tiers, strings.Count(flag, ",")+1, "one tier per entry of %q", flag)
		for i, tier := range tiers {
			require.Empty(t, validation.IsQualifiedName(tier.Key), "tier %d key %q", i, tier.Key)
			require.False(t, strings.ContainsAny(tier.Name, " /="), "tier %d name %q is not one word", i, tier.Name)
			require.Equal(t, strings.TrimSpace(tier.Name), tier.Name)
			require.Equal(t, i, tiers.Find(tier.Key), "tier %d by key %q", i, tier.Key)
			if tier.Name != "" {
				require.Equal(t, i, tiers.Find(tier.Name), "tier %d by name %q", i, tier.Name)
			}
		}
		again, err := Parse(tiers.String())
		require.NoError(t, err, "printed as %q", tiers.String())
		require.Equal(t, tiers, again, "printed as %q", tiers.String())
	})
}
