//go:build tools

// Package tools records the Kubeflow training-operator (the TFJob, MPIJob, ... controllers)
// built from this module into bin/training-operator, which the end-to-end suite runs to see the
// PodGroups and pods it makes for a gang scheduler.
package tools

import _ "github.com/kubeflow/training-operator/cmd/training-operator.v1"
