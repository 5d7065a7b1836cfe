package gpu

import (
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func TestAnnotationFormat(t *testing.T) {
	topo, err := New([]GPU{{Index: 1, NUMA: NUMAUnknown}, {Index: 0, NUMA: 0}}, [][]Link{{LinkSelf, NVLink(12)}, {NVLink(12), LinkSelf}})
	require.NoError(t, err)
	assert.Equal(t,
		`{"version":"v1","source":"nvidia-smi","gpus":[{"index":0,"numa":0},{"index":1,"numa":-1}],"links":[["X","NV12"],["NV12","X"]]}`,
		topo.Annotation(AnnotationSourceNvidiaSMI))
	assert.Equal(t,
		`{"version":"v1","gpus":[{"index":0,"numa":0},{"index":1,"numa":-1}],"links":[["X","NV12"],["NV12","X"]]}`,
		topo.Annotation(""), "an empty source is left out")
}

func TestAnnotationRoundTrip(t *testing.T) {
	for _, name := range fixtures {
		t.Run(name, func(t *testing.T) {
			topo := loadFixture(t, name)
			value := topo.Annotation("test")
			back, source, err := ParseAnnotation(value)
			require.NoError(t, err)
			assert.True(t, topo.Equal(back), "round trip changed the topology:\n%s\n%s", value, back.Annotation("test"))
			assert.Equal(t, "test", source)
			assert.Equal(t, value, back.Annotation("test"), "rendering is canonical")
		})
	}
}

func TestParseAnnotationAcceptsHandWritten(t *testing.T) {
	// Whitespace, GPUs out of order, NUMA left out, the old SOC token, no source.
	value := `{
	  "version": "v1",
	  "gpus": [{"index": 1}, {"index": 0, "numa": 1}],
	  "links": [
	    ["X",   "SOC"],
	    ["SYS", "X"]
	  ]
	}`
	topo, source, err := ParseAnnotation(value)
	require.NoError(t, err)
	assert.Empty(t, source)
	assert.Equal(t, []GPU{{Index: 0, NUMA: 1}, {Index: 1, NUMA: NUMAUnknown}}, topo.GPUs())
	l, _ := topo.Link(0, 1)
	assert.Equal(t, LinkSYS, l)
}

func TestParseAnnotationRejects(t *testing.T) {
	const gpus2 = `"gpus":[{"index":0},{"index":1}]`
	tests := []struct {
		name, value, want string
	}{
		{"empty", ``, "empty value"},
		{"not JSON", `NV12`, "invalid JSON at byte 1"},
		{"truncated", `{"version":"v1",`, "unexpected EOF"},
		{"trailing data", `{"version":"v1",` + gpus2 + `,"links":[["X","NV1"],["NV1","X"]]} {}`, "unexpected data after the JSON object"},
		{"missing version", `{` + gpus2 + `,"links":[["X","NV1"],["NV1","X"]]}`, `missing "version"`},
		{"wrong version", `{"version":"v2",` + gpus2 + `,"links":[["X","NV1"],["NV1","X"]]}`, `unsupported version "v2"`},
		{"unknown field", `{"version":"v1","bandwidth":1,` + gpus2 + `,"links":[["X","NV1"],["NV1","X"]]}`, `unknown field "bandwidth"`},
		{"unknown GPU field", `{"version":"v1","gpus":[{"index":0,"uuid":"GPU-1"}],"links":[["X"]]}`, `unknown field "uuid"`},
		{"wrong type", `{"version":"v1","gpus":[{"index":"0"}],"links":[["X"]]}`, `field "gpus.index" at byte`},
		{"missing gpus", `{"version":"v1","links":[["X"]]}`, `missing "gpus"`},
		{"missing links", `{"version":"v1",` + gpus2 + `}`, `missing "links"`},
		{"missing index", `{"version":"v1","gpus":[{"numa":0}],"links":[["X"]]}`, `gpus[0]: missing "index"`},
		{"no GPUs", `{"version":"v1","gpus":[],"links":[]}`, "no GPUs"},
		{"too few rows", `{"version":"v1",` + gpus2 + `,"links":[["X","NV1"]]}`, "links has 1 rows for 2 gpus"},
		{"not square", `{"version":"v1",` + gpus2 + `,"links":[["X","NV1"],["NV1"]]}`, "links[1] has 1 entries for 2 gpus; the matrix must be square"},
		{"asymmetric", `{"version":"v1",` + gpus2 + `,"links":[["X","NV2"],["NV1","X"]]}`, "links[0][1] (GPU 0 to GPU 1) is NV2 but links[1][0] is NV1; the matrix must be symmetric"},
		{"unknown token", `{"version":"v1",` + gpus2 + `,"links":[["X","NVLINK"],["NVLINK","X"]]}`, `links[0][1]: invalid NVLink token "NVLINK"`},
		{"lowercase token", `{"version":"v1",` + gpus2 + `,"links":[["X","sys"],["sys","X"]]}`, `links[0][1]: unknown link "sys"`},
		{"diagonal", `{"version":"v1",` + gpus2 + `,"links":[["SYS","SYS"],["SYS","X"]]}`, "links[0][0] (GPU 0 to itself) is SYS; the diagonal must be X"},
		{"duplicate index", `{"version":"v1","gpus":[{"index":0},{"index":0}],"links":[["X","NV1"],["NV1","X"]]}`, "gpus[1]: duplicate index 0 (also gpus[0])"},
		{"negative NUMA", `{"version":"v1","gpus":[{"index":0,"numa":-3}],"links":[["X"]]}`, "NUMA node -3 is invalid"},
		{"long source", `{"version":"v1","source":"` + strings.Repeat("x", 64) + `",` + `"gpus":[{"index":0}],"links":[["X"]]}`, `"source" must be at most 63 printable characters`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, _, err := ParseAnnotation(tt.value)
			require.Error(t, err)
			assert.Contains(t, err.Error(), tt.want)
			assert.True(t, strings.HasPrefix(err.Error(), "gpu topology annotation: "), err.Error())
		})
	}
}
