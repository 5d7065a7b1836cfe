//go:build tools

// Package tools records the scheduler-plugins scheduler (kube-scheduler with the Coscheduling
// plugin compiled in) built from this module into bin/sp-scheduler.
package tools

import _ "sigs.k8s.io/scheduler-plugins/cmd/scheduler"
