package gpu

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"strings"
	"unicode"
)

// AnnotationVersion is the only annotation format version this package reads and writes.
// Any change to the meaning of existing fields, or a new field, gets a new version: readers
// reject fields they do not know rather than silently ignore them.
const AnnotationVersion = "v1"

// AnnotationSourceNvidiaSMI is the "source" gpu-agent writes: the matrix was read from
// `nvidia-smi topo -m` on the node itself.
const AnnotationSourceNvidiaSMI = "nvidia-smi"

// maxSourceLen bounds the free-form "source" field; it is for display, not for prose.
const maxSourceLen = 63

// annotation is the v1 wire format. Example (two GPUs on one NVLink bond, NUMA node 0):
//
//	{"version":"v1","source":"nvidia-smi","gpus":[{"index":0,"numa":0},{"index":1,"numa":0}],
//	 "links":[["X","NV12"],["NV12","X"]]}
//
// links[i][j] is the path from gpus[i] to gpus[j], as nvidia-smi prints it. "numa" may be left
// out or set to -1 when unknown; "source" is optional and only displayed.
type annotation struct {
	Version string          `json:"version"`
	Source  string          `json:"source,omitempty"`
	GPUs    []annotationGPU `json:"gpus"`
	Links   [][]string      `json:"links"`
}

type annotationGPU struct {
	Index *int `json:"index"`
	NUMA  *int `json:"numa,omitempty"`
}

// ParseAnnotation reads the value of wellknown.AnnotationGPUTopology. It is strict, because a wrong
// matrix would silently steer every placement on the node: unknown fields, a version other than v1,
// a non-square or asymmetric matrix, an unknown link token or a repeated GPU index are errors that
// say what is wrong and where. source is the annotation's "source" field.
func ParseAnnotation(value string) (t *Topology, source string, err error) {
	defer func() {
		if err != nil {
			err = fmt.Errorf("gpu topology annotation: %w", err)
		}
	}()
	dec := json.NewDecoder(strings.NewReader(value))
	dec.DisallowUnknownFields()
	var a annotation
	if err := dec.Decode(&a); err != nil {
		return nil, "", describeJSONError(err)
	}
	if _, err := dec.Token(); !errors.Is(err, io.EOF) {
		return nil, "", fmt.Errorf("unexpected data after the JSON object at byte %d", dec.InputOffset())
	}
	switch {
	case a.Version == "":
		return nil, "", fmt.Errorf(`missing "version" (want %q)`, AnnotationVersion)
	case a.Version != AnnotationVersion:
		return nil, "", fmt.Errorf("unsupported version %q (this lockstep reads %q)", a.Version, AnnotationVersion)
	case len(a.Source) > maxSourceLen || strings.IndexFunc(a.Source, func(r rune) bool { return !unicode.IsPrint(r) }) >= 0:
		return nil, "", fmt.Errorf(`"source" must be at most %d printable characters`, maxSourceLen)
	case a.GPUs == nil:
		return nil, "", fmt.Errorf(`missing "gpus"`)
	case a.Links == nil:
		return nil, "", fmt.Errorf(`missing "links"`)
	}
	gpus := make([]GPU, len(a.GPUs))
	for i, g := range a.GPUs {
		if g.Index == nil {
			return nil, "", fmt.Errorf(`gpus[%d]: missing "index"`, i)
		}
		gpus[i] = GPU{Index: *g.Index, NUMA: NUMAUnknown}
		if g.NUMA != nil {
			gpus[i].NUMA = *g.NUMA
		}
	}
	// Shape first, so that a short row is reported as such and not as an out-of-range read.
	if len(a.Links) != len(gpus) {
		return nil, "", fmt.Errorf("links has %d rows for %d gpus; the matrix must be square with one row per GPU", len(a.Links), len(gpus))
	}
	links := make([][]Link, len(a.Links))
	for i, row := range a.Links {
		if len(row) != len(gpus) {
			return nil, "", fmt.Errorf("links[%d] has %d entries for %d gpus; the matrix must be square", i, len(row), len(gpus))
		}
		links[i] = make([]Link, len(row))
		for j, cell := range row {
			l, err := ParseLink(cell)
			if err != nil {
				return nil, "", fmt.Errorf("links[%d][%d]: %w", i, j, err)
			}
			links[i][j] = l
		}
	}
	t, err = New(gpus, links)
	if err != nil {
		return nil, "", err
	}
	return t, a.Source, nil
}

// describeJSONError adds the byte offset encoding/json knows but does not print.
func describeJSONError(err error) error {
	var syntax *json.SyntaxError
	var typ *json.UnmarshalTypeError
	switch {
	case errors.As(err, &syntax):
		return fmt.Errorf("invalid JSON at byte %d: %w", syntax.Offset, err)
	case errors.As(err, &typ):
		return fmt.Errorf("field %q at byte %d: %s is not a valid %s", typ.Field, typ.Offset, typ.Value, typ.Type)
	case errors.Is(err, io.EOF):
		return errors.New("empty value")
	}
	return err
}

// Annotation renders t as the value of wellknown.AnnotationGPUTopology, with source recorded in
// "source" (empty to leave it out). The output is canonical, compact JSON (GPUs in index order), so
// a caller can tell whether a node's annotation is already up to date by comparing strings.
func (t *Topology) Annotation(source string) string {
	n := len(t.gpus)
	a := annotation{Version: AnnotationVersion, Source: source, GPUs: make([]annotationGPU, n), Links: make([][]string, n)}
	for p := range t.gpus {
		a.GPUs[p] = annotationGPU{Index: &t.gpus[p].Index, NUMA: &t.gpus[p].NUMA}
		a.Links[p] = make([]string, n)
		for q := range n {
			a.Links[p][q] = t.link(p, q).String()
		}
	}
	var b bytes.Buffer
	enc := json.NewEncoder(&b)
	enc.SetEscapeHTML(false)
	// The annotation holds only ints and strings, which always encode.
	_ = enc.Encode(a)
	return strings.TrimSuffix(b.String(), "\n")
}
