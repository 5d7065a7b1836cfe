package gpu

import (
	"bufio"
	"errors"
	"fmt"
	"io"
	"strconv"
	"strings"
)

// ParseError is a problem in `nvidia-smi topo -m` output, at a 1-based line (0: the input as a
// whole).
type ParseError struct {
	Line int
	Msg  string
}

func (e *ParseError) Error() string {
	if e.Line == 0 {
		return "nvidia-smi topo -m output: " + e.Msg
	}
	return fmt.Sprintf("nvidia-smi topo -m output, line %d: %s", e.Line, e.Msg)
}

func parseErrorf(line int, format string, args ...any) error {
	return &ParseError{Line: line, Msg: fmt.Sprintf(format, args...)}
}

// Trailing columns nvidia-smi prints after the device columns, depending on driver version.
// Their names contain spaces, so the header cannot simply be split on whitespace.
var trailingColumns = [][]string{
	{"CPU", "Affinity"},
	{"NUMA", "Affinity"},
	{"GPU", "NUMA", "ID"},
}

const (
	colCPUAffinity  = "CPU Affinity"
	colNUMAAffinity = "NUMA Affinity"
	colGPUNUMAID    = "GPU NUMA ID"
)

type smiColumn struct {
	name string
	gpu  int // GPU index for GPU<n> columns, -1 for other devices (NICs)
}

type smiRow struct {
	line     int
	cells    []string // one per device column
	trailing []string
}

// ParseNvidiaSMI reads the output of `nvidia-smi topo -m` (or `--matrix`) into a Topology.
//
// It takes the formats drivers have printed over the years: tab- or space-separated cells, NIC
// rows and columns (NIC<n> in newer drivers, mlx5_<n> and the like in older ones; they are
// skipped), any of the trailing CPU Affinity, NUMA Affinity and GPU NUMA ID columns, the old
// SOC token for SYS, and both legend variants, which are ignored. A GPU's NUMA node comes from
// NUMA Affinity when it names one node, else from GPU NUMA ID (set on coherent systems such as
// Grace Hopper), else it is unknown.
//
// Anything it does not understand is an error, a *ParseError naming the line, never a guess:
// a wrong matrix would steer placements silently, while an error leaves the node on its last
// good annotation or the fallbacks of FromNode.
func ParseNvidiaSMI(r io.Reader) (*Topology, error) {
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 0, 64*1024), 1024*1024)
	lineNo := 0
	next := func() (string, bool, error) {
		if !sc.Scan() {
			return "", false, sc.Err()
		}
		lineNo++
		line := strings.TrimRight(sc.Text(), "\r")
		for i := 0; i < len(line); i++ {
			if c := line[i]; c < 0x20 && c != '\t' || c == 0x7f {
				return "", false, parseErrorf(lineNo, "control character %#02x at column %d (ANSI colour codes or binary data?)", c, i+1)
			}
		}
		return line, true, nil
	}

	var header string
	headerLine := 0
	for {
		line, ok, err := next()
		if err != nil {
			return nil, readError(err)
		}
		if !ok {
			return nil, parseErrorf(0, "no topology matrix (empty output)")
		}
		if strings.TrimSpace(line) != "" {
			header, headerLine = line, lineNo
			break
		}
	}
	cols, trailing, err := parseSMIHeader(header, headerLine)
	if err != nil {
		return nil, err
	}
	colIndex := make(map[string]int, len(cols))
	for i, c := range cols {
		colIndex[c.name] = i
	}

	rows := make([]*smiRow, len(cols))
	for {
		line, ok, err := next()
		if err != nil {
			return nil, readError(err)
		}
		if !ok || strings.TrimSpace(line) == "" || isLegend(line) {
			// What may follow the matrix: nothing, or blank lines and then the legend, whose
			// wording varies by driver and is not needed. Other text means the matrix was cut in
			// two or something else got mixed into the output.
			for ok && strings.TrimSpace(line) == "" {
				if line, ok, err = next(); err != nil {
					return nil, readError(err)
				}
			}
			if ok && !isLegend(line) {
				return nil, parseErrorf(lineNo, "unexpected text after the matrix: %q", strings.TrimSpace(line))
			}
			break
		}
		fields := strings.Fields(line)
		label := fields[0]
		c, known := colIndex[label]
		if !known {
			return nil, parseErrorf(lineNo, "row %q is not one of the devices in the header (line %d)", label, headerLine)
		}
		if rows[c] != nil {
			return nil, parseErrorf(lineNo, "second row for %s (first on line %d)", label, rows[c].line)
		}
		cells := fields[1:]
		isGPU := cols[c].gpu >= 0
		switch {
		case len(cells) < len(cols):
			return nil, parseErrorf(lineNo, "row %s has %d cells, want one for each of the %d device columns", label, len(cells), len(cols))
		case isGPU && len(cells) != len(cols)+len(trailing):
			want := fmt.Sprintf("%d, one per device column", len(cols))
			if len(trailing) > 0 {
				want = fmt.Sprintf("%d, one per device column and one each for %s", len(cols)+len(trailing), strings.Join(trailing, ", "))
			}
			return nil, parseErrorf(lineNo, "row %s has %d fields after the label, want %s", label, len(cells), want)
		case len(cells) > len(cols)+len(trailing):
			// NIC rows may leave the trailing columns empty, so only too many fields are wrong.
			return nil, parseErrorf(lineNo, "row %s has %d fields after the label, more than the header's %d columns", label, len(cells), len(cols)+len(trailing))
		}
		rows[c] = &smiRow{line: lineNo, cells: cells[:len(cols)], trailing: cells[len(cols):]}
	}
	return buildSMITopology(cols, trailing, rows, headerLine)
}

func readError(err error) error {
	var pe *ParseError
	switch {
	case errors.Is(err, bufio.ErrTooLong):
		return parseErrorf(0, "line longer than 1 MiB; this is not nvidia-smi output")
	case errors.As(err, &pe):
		return err
	}
	return fmt.Errorf("reading nvidia-smi topo -m output: %w", err)
}

func isLegend(line string) bool { return strings.HasPrefix(strings.TrimSpace(line), "Legend:") }

func parseSMIHeader(header string, line int) (cols []smiColumn, trailing []string, err error) {
	fields := strings.Fields(header)
	seen := make(map[string]bool, len(fields))
	for i := 0; i < len(fields); {
		if name, n := matchTrailing(fields[i:]); n > 0 {
			if seen[name] {
				return nil, nil, parseErrorf(line, "header repeats column %q", name)
			}
			seen[name] = true
			trailing = append(trailing, name)
			i += n
			continue
		}
		name := fields[i]
		switch {
		case len(trailing) > 0:
			return nil, nil, parseErrorf(line, "header has %q after %q; only CPU Affinity, NUMA Affinity and GPU NUMA ID may follow the device columns", name, trailing[len(trailing)-1])
		case name == "X" || isLinkToken(name):
			return nil, nil, parseErrorf(line, "expected the header (GPU0 GPU1 ...) but found a matrix row")
		case !isDeviceName(name):
			return nil, nil, parseErrorf(line, "header column %q is not a device name", name)
		case seen[name]:
			return nil, nil, parseErrorf(line, "header repeats column %q", name)
		}
		seen[name] = true
		col := smiColumn{name: name, gpu: -1}
		if idx, ok := gpuColumnIndex(name); ok {
			col.gpu = idx
		}
		cols = append(cols, col)
		i++
	}
	nGPU := 0
	for _, c := range cols {
		if c.gpu >= 0 {
			nGPU++
		}
	}
	if nGPU == 0 {
		return nil, nil, parseErrorf(line, "header %q names no GPU<n> columns; is this `nvidia-smi topo -m` output?", strings.TrimSpace(header))
	}
	return cols, trailing, nil
}

func matchTrailing(fields []string) (string, int) {
	for _, words := range trailingColumns {
		if len(fields) >= len(words) && equalStrings(fields[:len(words)], words) {
			return strings.Join(words, " "), len(words)
		}
	}
	return "", 0
}

func equalStrings(a, b []string) bool {
	for i := range a {
		if a[i] != b[i] {
			return false
		}
	}
	return true
}

func isLinkToken(s string) bool {
	_, err := ParseLink(s)
	return err == nil
}

// isDeviceName accepts the names nvidia-smi gives rows and columns: GPU3, NIC0, mlx5_2, mlx4_0.
func isDeviceName(s string) bool {
	if s == "" || !isLetter(s[0]) {
		return false
	}
	for i := 1; i < len(s); i++ {
		c := s[i]
		if !isLetter(c) && (c < '0' || c > '9') && c != '_' && c != '-' && c != '.' && c != ':' {
			return false
		}
	}
	return true
}

func isLetter(c byte) bool { return c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' }

func gpuColumnIndex(name string) (int, bool) {
	digits, ok := strings.CutPrefix(name, "GPU")
	if !ok || digits == "" || !allDigits(digits) || len(digits) > 1 && digits[0] == '0' {
		return 0, false
	}
	n, err := strconv.Atoi(digits)
	return n, err == nil
}

func buildSMITopology(cols []smiColumn, trailing []string, rows []*smiRow, headerLine int) (*Topology, error) {
	var gpuCols []int // positions in cols of the GPU columns
	for i, c := range cols {
		if c.gpu < 0 {
			continue
		}
		if c.gpu > MaxGPUIndex {
			return nil, parseErrorf(headerLine, "%s: index above %d", c.name, MaxGPUIndex)
		}
		if rows[i] == nil {
			return nil, parseErrorf(headerLine, "column %s has no row", c.name)
		}
		gpuCols = append(gpuCols, i)
	}
	if len(gpuCols) > MaxGPUs {
		return nil, parseErrorf(headerLine, "%d GPUs, more than the supported %d", len(gpuCols), MaxGPUs)
	}
	n := len(gpuCols)
	gpus := make([]GPU, n)
	links := make([][]Link, n)
	for a, ca := range gpuCols {
		row := rows[ca]
		numa, err := smiNUMA(trailing, row.trailing)
		if err != nil {
			return nil, parseErrorf(row.line, "%s: %v", cols[ca].name, err)
		}
		gpus[a] = GPU{Index: cols[ca].gpu, NUMA: numa}
		links[a] = make([]Link, n)
		for b, cb := range gpuCols {
			cell := row.cells[cb]
			l, err := ParseLink(cell)
			if err != nil {
				return nil, parseErrorf(row.line, "%s to %s: %v", cols[ca].name, cols[cb].name, err)
			}
			switch {
			case a == b && l != LinkSelf:
				return nil, parseErrorf(row.line, "%s to itself is %q, want X", cols[ca].name, cell)
			case a != b && l == LinkSelf:
				return nil, parseErrorf(row.line, "%s to %s is X, which only belongs on the diagonal", cols[ca].name, cols[cb].name)
			}
			links[a][b] = l
		}
	}
	for a := range n {
		for b := a + 1; b < n; b++ {
			if links[a][b] != links[b][a] {
				ra, rb := rows[gpuCols[a]], rows[gpuCols[b]]
				return nil, parseErrorf(rb.line, "%s to %s is %v, but line %d has %s to %s as %v; the matrix must be symmetric",
					cols[gpuCols[b]].name, cols[gpuCols[a]].name, links[b][a], ra.line, cols[gpuCols[a]].name, cols[gpuCols[b]].name, links[a][b])
			}
		}
	}
	t, err := New(gpus, links)
	if err != nil {
		// The checks above cover everything New checks; reaching this is a bug, not bad input.
		return nil, fmt.Errorf("building topology from nvidia-smi output: %w", err)
	}
	return t, nil
}

// smiNUMA picks a GPU's NUMA node from its trailing cells. NUMA Affinity is the CPU-side node,
// the one that matters for placing the pod's CPUs and memory; GPU NUMA ID, where present, is the
// node of the GPU's own memory on coherent systems and serves when NUMA Affinity is N/A.
// Affinity to several nodes ("0-1", "0,2") is valid but gives no single node.
func smiNUMA(trailing, values []string) (int, error) {
	var numa, gpuNUMA string
	for i, name := range trailing {
		switch name {
		case colNUMAAffinity:
			numa = values[i]
		case colGPUNUMAID:
			gpuNUMA = values[i]
		}
	}
	for _, c := range []struct{ name, value string }{{colNUMAAffinity, numa}, {colGPUNUMAID, gpuNUMA}} {
		node, single, err := parseNUMAField(c.value)
		if err != nil {
			return 0, fmt.Errorf("%s %q: %v", c.name, c.value, err)
		}
		if single {
			return node, nil
		}
	}
	return NUMAUnknown, nil
}

func parseNUMAField(v string) (node int, single bool, err error) {
	switch {
	case v == "" || v == "N/A":
		return 0, false, nil
	case allDigits(v):
		n, err := strconv.Atoi(v)
		if err != nil || n > 1<<20 {
			return 0, false, fmt.Errorf("not a NUMA node number")
		}
		return n, true, nil
	}
	for _, part := range strings.Split(v, ",") {
		lo, hi, isRange := strings.Cut(part, "-")
		if lo == "" || !allDigits(lo) || isRange && (hi == "" || !allDigits(hi)) {
			return 0, false, fmt.Errorf("want a NUMA node, a list or range of nodes, or N/A")
		}
	}
	return 0, false, nil
}
