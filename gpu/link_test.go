package gpu

import (
	"encoding/json"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func TestLinkOrderFollowsBandwidth(t *testing.T) {
	ordered := []Link{LinkSelf, LinkSYS, LinkNODE, LinkPHB, LinkPXB, LinkPIX, NVLink(1), NVLink(2), NVLink(4), NVLink(12), NVLink(18)}
	for i := 1; i < len(ordered); i++ {
		lo, hi := ordered[i-1], ordered[i]
		assert.Less(t, lo, hi, "%v < %v", lo, hi)
		assert.Less(t, lo.Bandwidth(), hi.Bandwidth(), "bandwidth of %v < %v", lo, hi)
	}
}

func TestParseLink(t *testing.T) {
	tests := []struct {
		in   string
		want Link
		out  string // String() of the result
	}{
		{"X", LinkSelf, "X"},
		{"SYS", LinkSYS, "SYS"},
		{"SOC", LinkSYS, "SYS"},
		{"NODE", LinkNODE, "NODE"},
		{"PHB", LinkPHB, "PHB"},
		{"PXB", LinkPXB, "PXB"},
		{"PIX", LinkPIX, "PIX"},
		{"NV1", NVLink(1), "NV1"},
		{"NV12", NVLink(12), "NV12"},
		{"NV18", NVLink(18), "NV18"},
		{"NV1024", NVLink(MaxNVLinks), "NV1024"},
	}
	for _, tt := range tests {
		t.Run(tt.in, func(t *testing.T) {
			got, err := ParseLink(tt.in)
			require.NoError(t, err)
			assert.Equal(t, tt.want, got)
			assert.Equal(t, tt.out, got.String())
		})
	}
}

func TestParseLinkRejects(t *testing.T) {
	for _, in := range []string{"", "x", "sys", "nv2", "NV", "NV0", "NV01", "NV+1", "NV-1", "NV1x", "NV1025", "NV99999999999999999999", "PCI", " X", "NVLINK"} {
		t.Run(in, func(t *testing.T) {
			_, err := ParseLink(in)
			assert.Error(t, err)
		})
	}
}

func TestNVLinks(t *testing.T) {
	assert.Equal(t, 12, NVLink(12).NVLinks())
	assert.True(t, NVLink(1).IsNVLink())
	for _, l := range []Link{LinkSelf, LinkSYS, LinkPIX} {
		assert.Zero(t, l.NVLinks(), l)
		assert.False(t, l.IsNVLink(), l)
	}
	assert.Panics(t, func() { NVLink(0) })
}

func TestLinkJSON(t *testing.T) {
	in := []Link{LinkSYS, NVLink(18), LinkSelf}
	b, err := json.Marshal(in)
	require.NoError(t, err)
	assert.JSONEq(t, `["SYS","NV18","X"]`, string(b))

	var out []Link
	require.NoError(t, json.Unmarshal([]byte(`["SOC","NV18","X"]`), &out))
	assert.Equal(t, in, out)
	assert.Error(t, json.Unmarshal([]byte(`["NV0"]`), &out))

	_, err = json.Marshal(linkNV0)
	assert.Error(t, err, "linkNV0 is not a link")
}
