package fabric

import (
	"testing"

	"github.com/stretchr/testify/require"
)

func TestParse(t *testing.T) {
	cases := []struct {
		flag    string
		want    Tiers
		wantErr string
	}{
		{"", nil, ""},
		{"gke", Presets["gke"], ""},
		{"nvidia.com/gpu.clique, example.com/rack ,example.com/block", Keys("nvidia.com/gpu.clique", "example.com/rack", "example.com/block"), ""},
		{"RackLayer=example.com/rack, BlockLayer = example.com/block", Tiers{{Key: "example.com/rack", Name: "RackLayer"}, {Key: "example.com/block", Name: "BlockLayer"}}, ""},
		{"example.com/rack,example.com/rack", nil, `"example.com/rack" names an earlier tier too`},
		{"rack=example.com/rack,rack=example.com/block", nil, `"rack" names an earlier tier too`},
		{"rack label", nil, `"rack label" is not a label key`},
		{"=example.com/rack", nil, "the name before = must be one word"},
		{"gkee", Keys("gkee"), ""}, // a bare key is a valid label key
	}
	for _, tc := range cases {
		got, err := Parse(tc.flag)
		if tc.wantErr != "" {
			require.ErrorContains(t, err, tc.wantErr, tc.flag)
			continue
		}
		require.NoError(t, err, tc.flag)
		require.Equal(t, tc.want, got, tc.flag)
	}
}

func TestDomains(t *testing.T) {
	tiers := Tiers{{Key: "example.com/rack", Name: "RackLayer"}, {Key: "example.com/block"}}
	require.Equal(t, []string{"b1/r1", "b1"}, tiers.Domains("n-0", map[string]string{"example.com/rack": "r1", "example.com/block": "b1"}))
	require.Equal(t, []string{"node/n-1", "b1"}, tiers.Domains("n-1", map[string]string{"example.com/block": "b1"}), "a node without the label sits alone")
	require.NotEqual(t, tiers.Domains("n-2", map[string]string{"example.com/rack": "r1", "example.com/block": "b2"})[0],
		tiers.Domains("n-0", map[string]string{"example.com/rack": "r1", "example.com/block": "b1"})[0], "racks of one name in two blocks are two racks")
	require.Nil(t, Tiers(nil).Domains("n-2", nil))
	require.Equal(t, "rack", Short("example.com/rack"))
	require.Equal(t, "gpu.clique", Short("nvidia.com/gpu.clique"))
	require.Equal(t, 1, tiers.Find("example.com/block"), "by label key")
	require.Equal(t, 0, tiers.Find("RackLayer"), "by name")
	require.Equal(t, 1, tiers.Find("block"), "by short name")
	require.Equal(t, -1, tiers.Find("spine"))
	require.Equal(t, "RackLayer=example.com/rack,example.com/block", tiers.String())
}
