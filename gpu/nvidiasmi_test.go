package gpu

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func TestParseNvidiaSMIFixtures(t *testing.T) {
	nv := NVLink
	tests := []struct {
		file  string
		numa  []int
		same  *Topology // expected links, if the whole matrix is known
		links map[[2]int]Link
	}{
		{
			file: "a100-nvswitch.txt",
			numa: []int{3, 3, 1, 1, 7, 7, 5, 5},
			same: uniform(t, 8, nv(12)),
		},
		{
			file: "h100-nv18.txt",
			numa: []int{0, 0, 0, 0, 1, 1, 1, 1},
			same: uniform(t, 8, nv(18)),
		},
		{
			// No NUMA Affinity column on this driver: NUMA nodes are unknown.
			file: "dgx1-v100.txt",
			numa: []int{-1, -1, -1, -1, -1, -1, -1, -1},
			same: shared(dgx1V100)(),
			links: map[[2]int]Link{
				{0, 1}: nv(1), {0, 3}: nv(2), {1, 2}: nv(2), {0, 4}: nv(2), {1, 5}: nv(2), {2, 6}: nv(1), {3, 7}: nv(1),
				{4, 7}: nv(2), {5, 6}: nv(2), {0, 5}: LinkSYS, {3, 4}: LinkSYS, {2, 7}: LinkSYS,
			},
		},
		{
			file: "pcie-8gpu.txt",
			numa: []int{0, 0, 0, 0, 1, 1, 1, 1},
			links: map[[2]int]Link{
				{0, 1}: LinkPIX, {2, 3}: LinkPIX, {6, 7}: LinkPIX, {0, 2}: LinkNODE, {5, 7}: LinkNODE, {0, 4}: LinkSYS, {3, 7}: LinkSYS,
			},
		},
		{
			// NUMA Affinity N/A, as inside most cloud VMs.
			file:  "t4-2gpu.txt",
			numa:  []int{-1, -1},
			links: map[[2]int]Link{{0, 1}: LinkPHB},
		},
		{
			file:  "k80-soc-legacy.txt",
			numa:  []int{-1, -1, -1, -1},
			links: map[[2]int]Link{{0, 1}: LinkPIX, {2, 3}: LinkPIX, {0, 2}: LinkSYS, {1, 3}: LinkSYS},
		},
	}
	for _, tt := range tests {
		t.Run(tt.file, func(t *testing.T) {
			topo := loadFixture(t, tt.file)
			var numa []int
			for _, g := range topo.GPUs() {
				numa = append(numa, g.NUMA)
			}
			assert.Equal(t, tt.numa, numa)
			if tt.same != nil {
				for _, a := range topo.Indices() {
					for _, b := range topo.Indices() {
						want, _ := tt.same.Link(a, b)
						got, _ := topo.Link(a, b)
						assert.Equal(t, want, got, "GPU%d to GPU%d", a, b)
					}
				}
			}
			for pair, want := range tt.links {
				got, ok := topo.Link(pair[0], pair[1])
				require.True(t, ok)
				assert.Equal(t, want, got, "GPU%d to GPU%d", pair[0], pair[1])
			}
		})
	}
}

// The same matrix in the layouts it reaches the parser in must give the same topology.
func TestParseNvidiaSMILayouts(t *testing.T) {
	raw, err := os.ReadFile(filepath.Join("testdata", "dgx1-v100.txt"))
	require.NoError(t, err)
	want := loadFixture(t, "dgx1-v100.txt")
	text := string(raw)
	matrixOnly, _, _ := strings.Cut(text, "\nLegend:")
	tests := map[string]string{
		"CRLF":                  strings.ReplaceAll(text, "\n", "\r\n"),
		"spaces":                strings.ReplaceAll(text, "\t", "    "),
		"no legend":             matrixOnly,
		"legend without blank":  strings.Replace(text, "\n\nLegend:", "\nLegend:", 1),
		"header not indented":   strings.TrimPrefix(text, "\t"),
		"leading blank lines":   "\n  \n" + text,
		"trailing spaces":       strings.ReplaceAll(text, "\n", "  \n"),
		"NIC rows left out":     dropLines(text, "mlx5_"), // their columns stay in the header
		"GPU rows out of order": swapLines(text, "GPU2\t", "GPU6\t"),
	}
	for name, in := range tests {
		t.Run(name, func(t *testing.T) {
			got, err := ParseNvidiaSMI(strings.NewReader(in))
			require.NoError(t, err)
			assert.True(t, want.Equal(got))
		})
	}
}

func dropLines(text, prefix string) string {
	var out []string
	for _, l := range strings.Split(text, "\n") {
		if !strings.HasPrefix(l, prefix) {
			out = append(out, l)
		}
	}
	return strings.Join(out, "\n")
}

func swapLines(text, a, b string) string {
	lines := strings.Split(text, "\n")
	ia, ib := -1, -1
	for i, l := range lines {
		if strings.HasPrefix(l, a) {
			ia = i
		}
		if strings.HasPrefix(l, b) {
			ib = i
		}
	}
	lines[ia], lines[ib] = lines[ib], lines[ia]
	return strings.Join(lines, "\n")
}

func TestParseNvidiaSMIGPUNUMAID(t *testing.T) {
	// Grace Hopper: NUMA Affinity is the CPU node, GPU NUMA ID the node of the GPU's own memory.
	// The CPU side wins; GPU NUMA ID only stands in when NUMA Affinity is N/A.
	in := "\tGPU0\tGPU1\tCPU Affinity\tNUMA Affinity\tGPU NUMA ID\n" +
		"GPU0\t X \tNV18\t0-71\t0\t\t4\n" +
		"GPU1\tNV18\t X \t72-143\tN/A\t\t12\n"
	topo, err := ParseNvidiaSMI(strings.NewReader(in))
	require.NoError(t, err)
	assert.Equal(t, []GPU{{Index: 0, NUMA: 0}, {Index: 1, NUMA: 12}}, topo.GPUs())

	in = "\tGPU0\tGPU1\tCPU Affinity\tNUMA Affinity\n" +
		"GPU0\t X \tSYS\t0-127\t0-1\n" +
		"GPU1\tSYS\t X \t0-127\t0,1\n"
	topo, err = ParseNvidiaSMI(strings.NewReader(in))
	require.NoError(t, err)
	assert.Equal(t, []GPU{{Index: 0, NUMA: NUMAUnknown}, {Index: 1, NUMA: NUMAUnknown}}, topo.GPUs(), "affinity to several nodes names no single node")
}

func TestParseNvidiaSMISingleGPU(t *testing.T) {
	topo, err := ParseNvidiaSMI(strings.NewReader("\tGPU0\tCPU Affinity\tNUMA Affinity\nGPU0\t X \t0-7\t0\n"))
	require.NoError(t, err)
	assert.Equal(t, []GPU{{Index: 0, NUMA: 0}}, topo.GPUs())
}

func TestParseNvidiaSMIRejects(t *testing.T) {
	const header = "\tGPU0\tGPU1\tNIC0\tCPU Affinity\tNUMA Affinity\n"
	const gpu0 = "GPU0\t X \tNV4\tPIX\t0-7\t0\n"
	const gpu1 = "GPU1\tNV4\t X \tPIX\t0-7\t0\n"
	const nic0 = "NIC0\tPIX\tPIX\t X \n"
	tests := []struct {
		name, in string
		line     int
		want     string
	}{
		{"empty", "", 0, "no topology matrix"},
		{"blank", "\n\n  \n", 0, "no topology matrix"},
		{"not nvidia-smi", "No devices were found\n", 1, "names no GPU<n> columns"},
		{"driver error", "NVIDIA-SMI has failed because it couldn't communicate with the NVIDIA driver.\n", 1, `header column "couldn't" is not a device name`},
		{"row first", gpu0 + gpu1, 1, "expected the header (GPU0 GPU1 ...) but found a matrix row"},
		{"duplicate column", "\tGPU0\tGPU0\n", 1, `header repeats column "GPU0"`},
		{"device after trailing column", "\tGPU0\tCPU Affinity\tGPU1\n", 1, `header has "GPU1" after "CPU Affinity"`},
		{"ANSI colour", header + "\x1b[1mGPU0\x1b[0m\t X \tNV4\tPIX\t0-7\t0\n", 2, "control character 0x1b at column 1"},
		{"unknown row", header + gpu0 + "GPU2\tNV4\t X \tPIX\t0-7\t0\n", 3, `row "GPU2" is not one of the devices in the header (line 1)`},
		{"second row", header + gpu0 + gpu0, 3, "second row for GPU0 (first on line 2)"},
		{"missing cell", header + gpu0 + "GPU1\tNV4\t X \t0-7\t0\n", 3, "row GPU1 has 4 fields after the label, want 5, one per device column and one each for CPU Affinity, NUMA Affinity"},
		{"extra cell, no trailing columns", "\tGPU0\tGPU1\nGPU0\t X \tNV4\tPIX\nGPU1\tNV4\t X \n", 2, "row GPU0 has 3 fields after the label, want 2, one per device column"},
		{"too few cells", header + gpu0 + "GPU1\tNV4\n", 3, "row GPU1 has 1 cells, want one for each of the 3 device columns"},
		{"extra field", header + gpu0 + gpu1 + "NIC0\tPIX\tPIX\t X \t0-7\t0\t9\n", 4, "row NIC0 has 6 fields after the label, more than the header's 5 columns"},
		{"unknown token", header + gpu0 + "GPU1\tC2C\t X \tPIX\t0-7\t0\n", 3, `GPU1 to GPU0: unknown link "C2C"`},
		{"bad NVLink width", header + gpu0 + "GPU1\tNV0\t X \tPIX\t0-7\t0\n", 3, `GPU1 to GPU0: invalid NVLink token "NV0"`},
		{"diagonal", header + "GPU0\tSYS\tNV4\tPIX\t0-7\t0\n" + gpu1, 2, `GPU0 to itself is "SYS", want X`},
		{"X off diagonal", header + "GPU0\t X \t X \tPIX\t0-7\t0\n" + gpu1, 2, "GPU0 to GPU1 is X, which only belongs on the diagonal"},
		{"asymmetric", header + gpu0 + "GPU1\tNV2\t X \tPIX\t0-7\t0\n", 3, "GPU1 to GPU0 is NV2, but line 2 has GPU0 to GPU1 as NV4; the matrix must be symmetric"},
		{"GPU row missing", header + gpu0 + nic0, 1, "column GPU1 has no row"},
		{"text after matrix", header + gpu0 + gpu1 + "\nGPU2\tSYS\n", 5, `unexpected text after the matrix: "GPU2\tSYS"`},
		{"bad NUMA", header + gpu0 + "GPU1\tNV4\t X \tPIX\t0-7\tzero\n", 3, `GPU1: NUMA Affinity "zero": want a NUMA node`},
		{"GPU index too high", "\tGPU0\tGPU5000\nGPU0\t X \tSYS\nGPU5000\tSYS\t X \n", 1, "GPU5000: index above 4095"},
		{"over-long line", "\tGPU0\t" + strings.Repeat("x", 2<<20) + "\n", 0, "line longer than 1 MiB"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			topo, err := ParseNvidiaSMI(strings.NewReader(tt.in))
			require.Error(t, err)
			assert.Nil(t, topo)
			var pe *ParseError
			require.True(t, errors.As(err, &pe), "want a *ParseError, got %T: %v", err, err)
			assert.Equal(t, tt.line, pe.Line, err.Error())
			assert.Contains(t, err.Error(), tt.want)
		})
	}
}

func TestParseErrorMessage(t *testing.T) {
	assert.Equal(t, "nvidia-smi topo -m output, line 3: boom", (&ParseError{Line: 3, Msg: "boom"}).Error())
	assert.Equal(t, "nvidia-smi topo -m output: boom", (&ParseError{Msg: "boom"}).Error())
}
