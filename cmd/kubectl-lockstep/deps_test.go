package main

import (
	"os/exec"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
)

// The kubectl plugin reads lockstep's answers through package views alone: it must not carry the
// scheduler core (gang, decide) or the extender's HTTP layer.
func TestPluginLinksNoSchedulerCore(t *testing.T) {
	out, err := exec.Command("go", "list", "-deps", ".").CombinedOutput()
	require.NoError(t, err, "%s", out)
	for _, dep := range strings.Fields(string(out)) {
		for _, core := range []string{"/gang", "/decide", "/extender"} {
			require.False(t, strings.HasSuffix(dep, "github.com/lockstep-sched/lockstep"+core), "kubectl-lockstep links %s", dep)
		}
	}
}
