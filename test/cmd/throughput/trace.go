package main

import (
	"cmp"
	"encoding/csv"
	"fmt"
	"io"
	"math/rand/v2"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
)

// traceItem is one arrival of the trace workload: a gang of size members of gpus GPUs each, or,
// with size 1, an ordinary pod.
type traceItem struct {
	name string
	size int
	gpus int // per member
}

func (t traceItem) isGang() bool { return t.size > 1 }

// members are the item's pod names: the item's own name for an ordinary pod.
func (t traceItem) members() []string {
	if !t.isGang() {
		return []string{t.name}
	}
	names := make([]string, t.size)
	for i := range names {
		names[i] = fmt.Sprintf("%s-%d", t.name, i)
	}
	return names
}

func (t traceItem) shape() string {
	if !t.isGang() {
		return fmt.Sprintf("pod x %d GPU", t.gpus)
	}
	return fmt.Sprintf("%d x %d GPU", t.size, t.gpus)
}

// tracePod is what the workload takes of a row of an openb pod list: its GPUs, and when it came.
type tracePod struct {
	row     int
	numGPU  int
	created int64 // creation_time in seconds; 0 when the list has none
}

// gangSizes is the distribution gang sizes are drawn from, in percent: the rule of
// `make bench-packing` (test/cmd/packing, gangSizes and makeGangs), so that one seed gives both
// benchmarks the same gangs.
var gangSizes = []struct{ size, percent int }{{1, 50}, {2, 20}, {4, 20}, {8, 10}}

// traceRule says how the items are made, for the report.
func traceRule(list string, seed uint64) string {
	var parts []string
	for _, s := range gangSizes {
		parts = append(parts, fmt.Sprintf("%d: %d%%", s.size, s.percent))
	}
	return fmt.Sprintf("openb %s, whole-GPU pods (gpu_milli 1000, num_gpu >= 1) in arrival order; as make bench-packing groups them: "+
		"each gang starts at the next pod, draws a size from {%s} (PCG seed %d) and takes that many consecutive pods, cut short where "+
		"num_gpu changes; a gang of one is an ordinary pod", list, strings.Join(parts, ", "), seed)
}

// loadTrace reads an openb pod list and groups its whole-GPU pods into items.
func loadTrace(path string, seed uint64) ([]traceItem, error) {
	pods, err := readTracePods(path)
	if err != nil {
		return nil, err
	}
	if len(pods) == 0 {
		return nil, fmt.Errorf("%s: no whole-GPU pods", path)
	}
	return groupItems(pods, seed), nil
}

// groupItems groups pods, in arrival order, by the rule of gangSizes.
func groupItems(pods []tracePod, seed uint64) []traceItem {
	rng := rand.New(rand.NewPCG(seed, 0x6c6f636b73746570)) // "lockstep", as bench-packing seeds it
	var items []traceItem
	for i := 0; i < len(pods); {
		size := drawSize(rng.IntN(100))
		j := i + 1
		for j < len(pods) && j-i < size && pods[j].numGPU == pods[i].numGPU {
			j++
		}
		items = append(items, traceItem{name: fmt.Sprintf("t%04d", len(items)), size: j - i, gpus: pods[i].numGPU})
		i = j
	}
	return items
}

func drawSize(draw int) int {
	for _, s := range gangSizes {
		if draw < s.percent {
			return s.size
		}
		draw -= s.percent
	}
	return 1
}

// readTracePods returns the whole-GPU pods of a pod list in arrival order: creation_time, then
// row order (row order alone when the list has no creation_time column).
func readTracePods(path string) ([]tracePod, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	r := csv.NewReader(f)
	head, err := r.Read()
	if err != nil {
		return nil, fmt.Errorf("%s: header: %w", path, err)
	}
	col := map[string]int{}
	for i, h := range head {
		col[strings.TrimSpace(h)] = i
	}
	for _, need := range []string{"num_gpu", "gpu_milli"} {
		if _, ok := col[need]; !ok {
			return nil, fmt.Errorf("%s: no column %q", path, need)
		}
	}
	var pods []tracePod
	for row := 0; ; row++ {
		rec, err := r.Read()
		if err == io.EOF {
			break
		}
		if err != nil {
			return nil, fmt.Errorf("%s: %w", path, err)
		}
		p, whole, err := parseTracePod(rec, col, row)
		if err != nil {
			return nil, fmt.Errorf("%s: %w", path, err)
		}
		if whole {
			pods = append(pods, p)
		}
	}
	slices.SortStableFunc(pods, func(a, b tracePod) int {
		return cmp.Or(cmp.Compare(a.created, b.created), cmp.Compare(a.row, b.row))
	})
	return pods, nil
}

// parseTracePod reads one row; whole says whether it is a whole-GPU pod.
func parseTracePod(rec []string, col map[string]int, row int) (p tracePod, whole bool, err error) {
	field := func(name string) (int64, error) {
		i, ok := col[name]
		if !ok || strings.TrimSpace(rec[i]) == "" {
			return 0, nil
		}
		n, err := strconv.ParseInt(strings.TrimSpace(rec[i]), 10, 64)
		if err != nil {
			return 0, fmt.Errorf("row %d: %s: %w", row+2, name, err)
		}
		return n, nil
	}
	var numGPU, milli int64
	if numGPU, err = field("num_gpu"); err == nil {
		milli, err = field("gpu_milli")
	}
	if err == nil {
		p.created, err = field("creation_time")
	}
	p.row, p.numGPU = row, int(numGPU)
	return p, err == nil && numGPU >= 1 && milli == 1000, err
}

// defaultTraceDir is where the openb trace lives: shared/traces/openb beside the repository.
func defaultTraceDir(root string) string {
	return filepath.Join(root, "..", "shared", "traces", "openb")
}
