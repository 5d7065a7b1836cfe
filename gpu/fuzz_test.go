package gpu

import (
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
)

// FuzzParseAnnotation reads any value of a node's GPU topology annotation. Whoever may write a
// Node's annotations writes it, and lockstep reads it on every node event: it must never panic,
// must word every refusal as the annotation's, and what it accepts must be a matrix it renders
// back to the same topology (so gpu-agent's comparison of strings holds) and whose every pair of
// GPUs has a link.
func FuzzParseAnnotation(f *testing.F) {
	for _, name := range fixtures {
		f.Add(loadFixture(f, name).Annotation(AnnotationSourceNvidiaSMI))
	}
	for _, seed := range []string{
		`{"version":"v1","gpus":[{"index":0}],"links":[["X"]]}`,
		`{"version":"v1","source":"hand","gpus":[{"index":1},{"index":0,"numa":1}],"links":[["X","SOC"],["SYS","X"]]}`,
		`{"version":"v1","gpus":[{"index":3,"numa":-1},{"index":7,"numa":2}],"links":[["X","NV18"],["NV18","X"]]}`,
		`{"version":"v1","gpus":[{"index":0},{"index":1}],"links":[["X","PIX"],["PXB","X"]]}`,
		`{"version":"v1","gpus":[{"index":0},{"index":0}],"links":[["X","NV1"],["NV1","X"]]}`,
		`{"version":"v1","gpus":[{"index":-1}],"links":[["X"]]}`,
		`{"version":"v1","gpus":[{"index":9223372036854775807}],"links":[["X"]]}`,
		`{"version":"v1","gpus":[{"index":0,"numa":-3}],"links":[["X"]]}`,
		`{"version":"v1","gpus":[],"links":[]}`,
		`{"version":"v1","gpus":[{"index":0},{"index":1}],"links":[["X","NV1"]]}`,
		`{"version":"v1","gpus":[{"index":0}],"links":[["X"]],"bandwidth":1}`,
		`{"version":"v1","gpus":[{"index":0}],"links":[["X"]]} {}`,
		`{"version":"v2","gpus":[{"index":0}],"links":[["X"]]}`,
		`{"VERSION":"v1","Gpus":[{"Index":0}],"LINKS":[["X"]]}`,
		`{"version":"v1","source":"` + strings.Repeat("x", 64) + `","gpus":[{"index":0}],"links":[["X"]]}`,
		`{"version":"v1","source":"a\u0000b","gpus":[{"index":0}],"links":[["X"]]}`,
		``,
		`null`,
	} {
		f.Add(seed)
	}
	f.Fuzz(func(t *testing.T, value string) {
		topo, source, err := ParseAnnotation(value)
		if err != nil {
			require.Nil(t, topo)
			require.True(t, strings.HasPrefix(err.Error(), "gpu topology annotation: "), "error %q", err)
			return
		}
		require.Positive(t, topo.Len())
		indices := topo.Indices()
		require.Len(t, indices, topo.Len())
		for _, a := range indices {
			require.GreaterOrEqual(t, a, 0)
			for _, b := range indices {
				l, ok := topo.Link(a, b)
				require.True(t, ok, "no link between GPUs %d and %d", a, b)
				back, _ := topo.Link(b, a)
				require.Equal(t, l, back, "asymmetric link between GPUs %d and %d", a, b)
				require.Equal(t, a == b, l == LinkSelf, "GPUs %d and %d", a, b)
			}
		}
		rendered := topo.Annotation(source)
		again, againSource, err := ParseAnnotation(rendered)
		require.NoError(t, err, "rendered %q from %q", rendered, value)
		require.True(t, topo.Equal(again), "rendered %q from %q", rendered, value)
		require.Equal(t, source, againSource)
		require.Equal(t, rendered, again.Annotation(againSource), "rendering is canonical")
	})
}
