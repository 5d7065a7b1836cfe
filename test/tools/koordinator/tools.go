//go:build tools

// Package tools records koord-scheduler (kube-scheduler's framework with Koordinator's plugins,
// Coscheduling among them) built from this module into bin/koord-scheduler.
package tools

import _ "github.com/koordinator-sh/koordinator/cmd/koord-scheduler"
