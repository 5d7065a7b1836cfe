//go:build tools

// Package tools records Arena's command line built from this module into bin/arena, which the
// end-to-end suite runs to submit gang training jobs (`arena submit pytorchjob --gang`) to the
// Kubeflow training-operator, the way a user would.
package tools

import _ "github.com/kubeflow/arena/cmd/arena"
