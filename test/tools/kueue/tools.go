//go:build tools

// Package tools records Kueue's controller (quota admission of Jobs and plain pod groups) built
// from this module into bin/kueue, which the end-to-end suite runs so that Kueue admits by quota
// while lockstep places what it admitted.
package tools

import _ "sigs.k8s.io/kueue/cmd/kueue"
