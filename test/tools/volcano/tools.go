//go:build tools

// Package tools records what is built from this module: Volcano's controller-manager
// (bin/vc-controller-manager), which the end-to-end suite runs to see the PodGroups and pods its
// job controller makes for a vcjob, and Volcano's scheduler (bin/vc-scheduler), which `make bench`
// compares lockstep with. Both come from the one volcano.sh/volcano v1.10.0 and its replace set.
package tools

import (
	_ "volcano.sh/volcano/cmd/controller-manager"
	_ "volcano.sh/volcano/cmd/scheduler"
)
