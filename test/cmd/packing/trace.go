package main

import (
	"encoding/csv"
	"fmt"
	"io"
	"math/rand/v2"
	"os"
	"sort"
	"strconv"
	"strings"
)

// traceNode is one row of openb_node_list_gpu_node.csv.
type traceNode struct {
	name     string
	cpuMilli int64
	memMiB   int64
	gpus     int
	model    string
}

// tracePod is one replayed row of a pod list: a whole-GPU pod (gpu_milli 1000, num_gpu >= 1).
type tracePod struct {
	name     string
	row      int // 0-based data row, the tie-break after creation_time
	cpuMilli int64
	memMiB   int64
	numGPU   int
	created  int64 // creation_time in seconds; 0 when the list has no times
}

// gangSpec is one gang of the replay: consecutive pods of one num_gpu.
type gangSpec struct {
	name   string
	pods   []tracePod
	numGPU int // per member
}

func (g *gangSpec) gpus() int { return g.numGPU * len(g.pods) }

// readCSV reads a file with a header row into records keyed by column name.
func readCSV(path string) (header map[string]int, rows [][]string, err error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, nil, err
	}
	defer f.Close()
	r := csv.NewReader(f)
	r.ReuseRecord = false
	head, err := r.Read()
	if err != nil {
		return nil, nil, fmt.Errorf("%s: header: %w", path, err)
	}
	header = map[string]int{}
	for i, h := range head {
		header[strings.TrimSpace(h)] = i
	}
	for {
		rec, err := r.Read()
		if err == io.EOF {
			break
		}
		if err != nil {
			return nil, nil, fmt.Errorf("%s: %w", path, err)
		}
		rows = append(rows, rec)
	}
	return header, rows, nil
}

// column returns an accessor for a required column.
func column(path string, header map[string]int, name string) (func(rec []string) string, error) {
	i, ok := header[name]
	if !ok {
		return nil, fmt.Errorf("%s: no column %q", path, name)
	}
	return func(rec []string) string { return strings.TrimSpace(rec[i]) }, nil
}

func parseInt(path string, row int, col, v string) (int64, error) {
	if v == "" {
		return 0, nil
	}
	n, err := strconv.ParseInt(v, 10, 64)
	if err != nil {
		return 0, fmt.Errorf("%s: row %d: %s=%q: %w", path, row+2, col, v, err)
	}
	return n, nil
}

func loadNodes(path string) ([]traceNode, error) {
	header, rows, err := readCSV(path)
	if err != nil {
		return nil, err
	}
	cols := map[string]func([]string) string{}
	for _, c := range []string{"sn", "cpu_milli", "memory_mib", "gpu", "model"} {
		if cols[c], err = column(path, header, c); err != nil {
			return nil, err
		}
	}
	nodes := make([]traceNode, 0, len(rows))
	for i, rec := range rows {
		n := traceNode{name: cols["sn"](rec), model: cols["model"](rec)}
		if n.cpuMilli, err = parseInt(path, i, "cpu_milli", cols["cpu_milli"](rec)); err != nil {
			return nil, err
		}
		if n.memMiB, err = parseInt(path, i, "memory_mib", cols["memory_mib"](rec)); err != nil {
			return nil, err
		}
		g, err := parseInt(path, i, "gpu", cols["gpu"](rec))
		if err != nil {
			return nil, err
		}
		n.gpus = int(g)
		nodes = append(nodes, n)
	}
	return nodes, nil
}

// loadPods returns the whole-GPU pods of a pod list in arrival order (creation_time, then row
// order; row order alone when the list has no creation_time column) and the number of rows.
func loadPods(path string) (pods []tracePod, rowCount int, hasTimes bool, err error) {
	header, rows, err := readCSV(path)
	if err != nil {
		return nil, 0, false, err
	}
	cols := map[string]func([]string) string{}
	for _, c := range []string{"name", "cpu_milli", "memory_mib", "num_gpu", "gpu_milli"} {
		if cols[c], err = column(path, header, c); err != nil {
			return nil, 0, false, err
		}
	}
	created, hasTimes := func([]string) string { return "" }, false
	if _, ok := header["creation_time"]; ok {
		created, _ = column(path, header, "creation_time")
		hasTimes = true
	}
	for i, rec := range rows {
		numGPU, err := parseInt(path, i, "num_gpu", cols["num_gpu"](rec))
		if err != nil {
			return nil, 0, false, err
		}
		milli, err := parseInt(path, i, "gpu_milli", cols["gpu_milli"](rec))
		if err != nil {
			return nil, 0, false, err
		}
		if numGPU < 1 || milli != 1000 {
			continue
		}
		p := tracePod{name: cols["name"](rec), row: i, numGPU: int(numGPU)}
		if p.cpuMilli, err = parseInt(path, i, "cpu_milli", cols["cpu_milli"](rec)); err != nil {
			return nil, 0, false, err
		}
		if p.memMiB, err = parseInt(path, i, "memory_mib", cols["memory_mib"](rec)); err != nil {
			return nil, 0, false, err
		}
		if p.created, err = parseInt(path, i, "creation_time", created(rec)); err != nil {
			return nil, 0, false, err
		}
		pods = append(pods, p)
	}
	sort.SliceStable(pods, func(a, b int) bool {
		if pods[a].created != pods[b].created {
			return pods[a].created < pods[b].created
		}
		return pods[a].row < pods[b].row
	})
	return pods, len(rows), hasTimes, nil
}

// gangSizes is the distribution gang sizes are drawn from, in percent.
var gangSizes = []struct{ size, percent int }{{1, 50}, {2, 20}, {4, 20}, {8, 10}}

func gangRule(seed uint64) string {
	var parts []string
	for _, s := range gangSizes {
		parts = append(parts, fmt.Sprintf("%d: %d%%", s.size, s.percent))
	}
	return fmt.Sprintf("the trace has no gangs; walking the pods in arrival order, each gang starts at the next pod, draws a size from {%s} "+
		"(math/rand/v2 PCG, seed %d, one draw per gang) and takes that many consecutive pods, cut short where num_gpu changes "+
		"(or the list ends); min-available = the gang's size, so every gang is all-or-nothing",
		strings.Join(parts, ", "), seed)
}

// makeGangs groups pods (in arrival order) into gangs by gangRule.
func makeGangs(pods []tracePod, seed uint64) []gangSpec {
	rng := rand.New(rand.NewPCG(seed, 0x6c6f636b73746570)) // "lockstep"
	var gangs []gangSpec
	for i := 0; i < len(pods); {
		draw, size := rng.IntN(100), 0
		for _, s := range gangSizes {
			if draw < s.percent {
				size = s.size
				break
			}
			draw -= s.percent
		}
		j := i + 1
		for j < len(pods) && j-i < size && pods[j].numGPU == pods[i].numGPU {
			j++
		}
		gangs = append(gangs, gangSpec{name: fmt.Sprintf("gang-%04d", len(gangs)), pods: pods[i:j], numGPU: pods[i].numGPU})
		i = j
	}
	return gangs
}
