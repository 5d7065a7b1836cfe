//go:build tools

// Package tools records Helm, built from this module into bin/helm, which the end-to-end suite
// runs to lint and render the chart deploy/helm/lockstep before applying it to its apiserver.
package tools

import _ "helm.sh/helm/v3/cmd/helm"
