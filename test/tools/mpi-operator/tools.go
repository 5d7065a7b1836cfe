//go:build tools

// Package tools records the Kubeflow MPI operator (the MPIJob v2beta1 controller) built from this
// module into bin/mpi-operator, which the end-to-end suite runs to see the PodGroups, launcher Job
// and worker pods it makes for a gang scheduler.
package tools

import _ "github.com/kubeflow/mpi-operator/cmd/mpi-operator"
