package main

import (
	"errors"
	"os/exec"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/lockstep-sched/lockstep/test/lib/cluster"
)

// The baseline mode runs right after lockstep's, named by the commit its revision names now.
func TestBaselineModeFollowsLockstep(t *testing.T) {
	root, err := cluster.RepoRoot()
	require.NoError(t, err)
	head, err := exec.Command("git", "-C", root, "rev-parse", "--short", "HEAD").Output()
	require.NoError(t, err)
	key := "lockstep@" + strings.TrimSpace(string(head))

	given := []string{"stock", "lockstep", "volcano"}
	o, err := options{modes: given, baseline: baseline{rev: "HEAD"}}.withBaseline(root)
	require.NoError(t, err)
	assert.Equal(t, []string{"stock", "lockstep", key, "volcano"}, o.modes)
	assert.Equal(t, key, o.baseline.key())
	assert.Equal(t, []string{"stock", "lockstep", "volcano"}, given, "the caller's list is left as it was")

	o, err = options{modes: given}.withBaseline(root)
	require.NoError(t, err)
	assert.Equal(t, given, o.modes, "without -baseline the modes are as given")

	_, err = options{modes: given, baseline: baseline{rev: "no-such-revision"}}.withBaseline(root)
	assert.ErrorContains(t, err, "-baseline")
}

func TestBaselineNeedsTheLockstepMode(t *testing.T) {
	o := options{workload: "uniform", w: workload{nodes: 1, gpusPerNode: 8, gangSize: 1, gangGPU: 1}, modes: []string{"volcano"}}
	require.NoError(t, o.validate())
	o.baseline.rev = "HEAD~1"
	assert.ErrorContains(t, o.validate(), "-modes must name lockstep")
	o.modes = []string{"lockstep", "volcano"}
	assert.NoError(t, o.validate())
}

// burstResult is what a burst (-ordinary 0 -idle-samples 0) of 2,000 gang pods measured.
func burstResult(key string, took time.Duration, gangDone []time.Duration, partial time.Duration, cpu float64) result {
	return result{
		mode:       mode{key: key},
		gang:       rate{bound: 2000, total: 2000, took: took},
		gangDone:   gangDone,
		maxPartial: partial, commitPartial: partial / 2,
		procs: []usage{{name: "kube-scheduler", cpu: cpu, peakMB: 300}, {name: "lockstep", cpu: cpu / 4, peakMB: 100}},
		costs: []cost{{phase: "gangs"}},
	}
}

// Every ratio is above 1 when the new build is better, whichever way its metric counts, and the
// metrics a burst does not measure are left out.
func TestComparisonRatiosFavourTheBetterBuild(t *testing.T) {
	bl := baseline{rev: "HEAD~1", commit: "41c3194"}
	results := []result{
		burstResult("lockstep", 10*time.Second, []time.Duration{8 * time.Second, 9 * time.Second, 10 * time.Second}, 100*time.Millisecond, 12),
		burstResult(bl.key(), 16*time.Second, []time.Duration{12 * time.Second, 14 * time.Second, 16 * time.Second}, 200*time.Millisecond, 18),
		{mode: mode{key: "volcano"}},
	}
	var out strings.Builder
	printComparison(&out, bl, results)
	assert.Equal(t, `
lockstep, this tree (new) against lockstep at HEAD~1 = 41c3194 (baseline), one after the other on this control plane;
ratio > 1: new is better (baseline/new for times, CPU and memory; new/baseline for rates and shares).
                                       metric      new  baseline  ratio      ratio is
                                  gang pods/s    200.0     125.0   1.60  new/baseline
                                gang done p50   9.000s   14.000s   1.56  baseline/new
                                gang done p99  10.000s   16.000s   1.60  baseline/new
                             max partial gang   0.100s    0.200s   2.00  baseline/new
  max partial gang, lockstep's commit records   0.050s    0.100s   2.00  baseline/new
                                        CPU s     15.0      22.5   1.50  baseline/new
                                      peak MB      400       400   1.00  baseline/new
`, out.String())
}

func TestComparisonNeedsBothBuildsToHaveRun(t *testing.T) {
	bl := baseline{rev: "main", commit: "d73eb5a"}
	unbuilt := result{mode: mode{key: bl.key(), unavailable: errors.New("building ./cmd/extender: exit status 1")}}
	var out strings.Builder
	printComparison(&out, bl, []result{burstResult("lockstep", time.Second, nil, 0, 1), unbuilt})
	assert.Contains(t, out.String(), "no comparison: lockstep@d73eb5a did not run")
	assert.NotContains(t, out.String(), "metric")
}

func TestTraceComparisonUsesTheTraceTablesFigures(t *testing.T) {
	bl := baseline{rev: "HEAD~1", commit: "41c3194"}
	replay := func(key string, allocated int, placed ...time.Duration) result {
		return result{mode: mode{key: key}, costs: []cost{{phase: "trace"}}, trace: &traceResult{
			allocated: allocated, capacity: 8000, placed: placed, gangPlaced: placed, gangPods: 100, gangSpan: 10 * time.Second,
		}}
	}
	var out strings.Builder
	printComparison(&out, bl, []result{replay("lockstep", 8000, 50*time.Millisecond), replay(bl.key(), 6000, 100*time.Millisecond)})
	assert.Regexp(t, `GPUs allocated +100\.0% +75\.0% +1\.33 +new/baseline`, out.String())
	assert.Regexp(t, `gang placed p99 +0\.050s +0\.100s +2\.00 +baseline/new`, out.String())
	assert.NotContains(t, out.String(), "gang done", "a replay has no burst to be done with")
}
