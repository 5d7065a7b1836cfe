//go:build tools

// Package tools records Volcano's controller-manager built from this module into
// bin/vc-controller-manager, which the end-to-end suite runs to see the PodGroups and pods its
// job controller makes for a vcjob.
package tools

import _ "volcano.sh/volcano/cmd/controller-manager"
