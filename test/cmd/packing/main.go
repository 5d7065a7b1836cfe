// Command packing is `make bench-packing`: a packing benchmark on the openb GPU-cluster trace
// (Weng et al., "Beware of Fragmentation: Scheduling GPU-Sharing Workloads with Fragmentation
// Gradient Descent", USENIX ATC'23). It replays the trace's whole-GPU pods, grouped into gangs,
// on the trace's 1,213 GPU nodes under three policies (a real lockstep gang.Manager driven as
// kube-scheduler drives the extender, and two topology-unaware all-or-nothing baselines, spread
// and best-fit) until the first gang that cannot be placed, and prints, per pod list, the GPU
// allocation ratio, stranded GPUs, NVLink quality of multi-GPU pods and gang spread. The nodes
// also get a seeded network of racks and blocks (network.go), and a fourth run, lockstep with
// those network tiers, joins the others in a table of how many racks and blocks multi-node gangs
// span; all from this one run.
//
// The trace is read from ../shared/traces/openb beside the repository root (the directory with
// go.mod); -trace-dir overrides it.
package main

import (
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"time"

	"k8s.io/klog/v2"

	"github.com/lockstep-sched/lockstep/fabric"
)

const citation = `Weng et al., "Beware of Fragmentation: Scheduling GPU-Sharing Workloads with Fragmentation Gradient Descent", USENIX ATC'23`

var podLists = []string{"openb_pod_list_default.csv", "openb_pod_list_multigpu50.csv"}

const nodeList = "openb_node_list_gpu_node.csv"

func main() {
	traceDir := flag.String("trace-dir", "", "directory with the openb CSV files (default: ../shared/traces/openb from the repository root)")
	seed := flag.Uint64("seed", 1, "seed of the gang grouping")
	fabricSeed := flag.Uint64("fabric-seed", 1, "seed of the nodes' places in racks")
	misses := flag.Int("misses", 12, "lockstep NVLink misses to list per pod list")
	flag.Parse()

	// lockstep logs every gang it reserves and binds; the table is the output here.
	klog.SetOutput(io.Discard)
	klog.LogToStderr(false)

	if err := run(*traceDir, *seed, *fabricSeed, *misses); err != nil {
		fmt.Fprintln(os.Stderr, "bench-packing:", err)
		os.Exit(1)
	}
}

func run(traceDir string, seed, fabricSeed uint64, showMisses int) error {
	if traceDir == "" {
		root, err := repoRoot()
		if err != nil {
			return err
		}
		traceDir = filepath.Join(root, "..", "shared", "traces", "openb")
	}
	start := time.Now()
	nodes, err := loadNodes(filepath.Join(traceDir, nodeList))
	if err != nil {
		return fmt.Errorf("%w (set -trace-dir to the directory holding the openb CSV files)", err)
	}
	topos := topologies{}
	fab := newFabric(nodes, fabricSeed)
	fmt.Printf("lockstep packing benchmark on the openb trace (%s)\n", traceDir)
	fmt.Printf("trace: %s\n", citation)
	fmt.Printf("nodes: %s\n", describeNodes(nodes))
	fmt.Println("GPU topology per node model (the trace names models, not wiring):")
	for _, r := range topologyRules {
		fmt.Println("  -", r)
	}
	fmt.Println("network:", fab.describe())
	fmt.Println("replay: whole-GPU pods only (gpu_milli = 1000, num_gpu >= 1), in arrival order (creation_time, then row; row order when")
	fmt.Println("  the list has no times), cpu_milli and memory_mib as requests, no deletions, until the first gang that cannot be placed")
	fmt.Println("gangs:", gangRule(seed))
	fmt.Println("policies:")
	fmt.Println("  - lockstep: a real gang.Manager; per member Filter over all nodes, Prioritize the feasible ones, take the top score")
	fmt.Println("    (ties: first), then every member's Bind concurrently (held until quorum); GPU indices as lockstep's commit chose them")
	fmt.Println("  - spread:   each member to the feasible node with the most free GPUs (then most free CPU, then name); lowest free indices")
	fmt.Println("  - best-fit: each member to the feasible node with the fewest free GPUs (then least free CPU, then name); lowest free indices")
	fmt.Printf("  - lockstep+tiers: the same, with gang.Config.Tiers = %s, %s: each gang's quorum in one rack if one holds it,\n", labelRack, labelBlock)
	fmt.Println("    else in one block (the tightest fit of each), else across the cluster; a quorum one node could hold keeps the node-level")
	fmt.Println("    plan; ties between equal nodes go to a rack with no idle bigger node, then to the one with the fewest idle GPUs;\n    network table only")
	fmt.Println("  baselines place member by member and take the whole gang back if a member does not fit (all-or-nothing too);")
	fmt.Println("  feasible = free GPUs >= request, free CPU, free memory, a free pod slot")

	for _, list := range podLists {
		if err := runList(filepath.Join(traceDir, list), nodes, topos, fab, seed, showMisses); err != nil {
			return err
		}
	}
	fmt.Printf("\ntotal time %s\n", time.Since(start).Round(time.Millisecond))
	fmt.Printf("data: openb trace from Alibaba clusterdata (cluster-trace-gpu-v2023); cite: %s\n", citation)
	return nil
}

// repoRoot is the nearest directory at or above the working directory holding go.mod.
func repoRoot() (string, error) {
	dir, err := os.Getwd()
	if err != nil {
		return "", err
	}
	for {
		if _, err := os.Stat(filepath.Join(dir, "go.mod")); err == nil {
			return dir, nil
		}
		parent := filepath.Dir(dir)
		if parent == dir {
			return "", errors.New("no go.mod at or above the working directory; run from the repository or set -trace-dir")
		}
		dir = parent
	}
}

type policyRun struct {
	name     string
	c        *cluster
	gangs    int // gangs placed
	stopGang *gangSpec
	stopWhy  string
	elapsed  time.Duration
	lockstep *lockstepPolicy
	misses   []nvlinkMiss
}

// policies are the runs of each pod list. The packing table shows the first three as it always
// has; lockstep+tiers joins them in the network table.
var policies = []string{"lockstep", "spread", "best-fit", "lockstep+tiers"}

func runList(path string, nodes []traceNode, topos topologies, fab *netFabric, seed uint64, showMisses int) error {
	pods, rows, hasTimes, err := loadPods(path)
	if err != nil {
		return err
	}
	gangs := makeGangs(pods, seed)
	fmt.Printf("\n== %s ==\n", filepath.Base(path))
	order := "creation_time, then row"
	if !hasTimes {
		order = "row order (no times in this list)"
	}
	fmt.Printf("pods: %d rows, %d whole-GPU pods replayed (%s), by num_gpu: %s; %d GPUs requested in all\n",
		rows, len(pods), order, countBy(pods, func(p tracePod) int { return p.numGPU }), sumGPUs(pods))
	fmt.Printf("gangs: %d, by size: %s\n", len(gangs), countGangs(gangs, func(g gangSpec) int { return len(g.pods) }))
	fmt.Printf("  multi-member gangs by GPUs per member: %s\n", countGangsIf(gangs, func(g gangSpec) bool { return len(g.pods) > 1 }, func(g gangSpec) int { return g.numGPU }))

	var runs []*policyRun
	for _, name := range policies {
		r, err := runPolicy(name, gangs, nodes, topos, fab)
		if err != nil {
			return fmt.Errorf("%s, %s: %w", filepath.Base(path), name, err)
		}
		runs = append(runs, r)
	}
	report(pods, gangs, runs[:3], showMisses, nodes)
	fmt.Println()
	reportNetwork(gangs, runs, nodes, fab)
	return nil
}

// runPolicy replays the gangs in order under one policy, on a fresh cluster, until the first
// that cannot be placed.
func runPolicy(name string, gangs []gangSpec, nodes []traceNode, topos topologies, fab *netFabric) (*policyRun, error) {
	c, err := newCluster(nodes, topos)
	if err != nil {
		return nil, err
	}
	r := &policyRun{name: name, c: c}
	place, err := placer(r, fab)
	if err != nil {
		return nil, err
	}
	t0 := time.Now()
	for i := range gangs {
		ok, why, err := place(c, &gangs[i])
		if err != nil {
			return nil, err
		}
		if !ok {
			r.stopGang, r.stopWhy = &gangs[i], why
			break
		}
		r.gangs++
	}
	r.elapsed = time.Since(t0)
	if r.lockstep != nil {
		r.lockstep.m.Stop()
	}
	return r, nil
}

// placer is the gang placement of r's policy; for lockstep it starts the manager on r's cluster.
func placer(r *policyRun, fab *netFabric) (func(*cluster, *gangSpec) (bool, string, error), error) {
	switch r.name {
	case "spread":
		return spread.placeGang, nil
	case "best-fit":
		return bestFit.placeGang, nil
	}
	var tiers fabric.Tiers
	if r.name == "lockstep+tiers" {
		tiers = benchTiers
	}
	var err error
	if r.lockstep, err = newLockstep(r.c, fab, tiers); err != nil {
		return nil, err
	}
	if r.name == "lockstep" {
		r.lockstep.onPlaced = func(g *gangSpec, member int, n *nodeState, ids []int) {
			if miss, ok := checkNVLink(r.c, g, member, n, ids); ok {
				r.misses = append(r.misses, miss)
			}
		}
	}
	return r.lockstep.placeGang, nil
}
