#!/usr/bin/env bash
# Builds the Kubeflow MPI operator v0.8.0 into bin/mpi-operator, once. The end-to-end suite runs
# it in both of its gang-scheduling modes to check lockstep against the PodGroups, launcher Job and
# worker pods it makes (a few minutes on 2 cores).
exec bash "$(dirname "$0")/build-tool.sh" mpi-operator github.com/kubeflow/mpi-operator/cmd/mpi-operator mpi-operator \
  "the Kubeflow MPI operator v0.8.0" "under a minute after Kueue's build, about 6 minutes without"
