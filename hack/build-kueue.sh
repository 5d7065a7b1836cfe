#!/usr/bin/env bash
# Builds Kueue v0.17.1's controller (cmd/kueue) into bin/kueue, once. The end-to-end suite runs it
# to admit pod groups and Jobs by quota while lockstep places what it admitted (several minutes
# on 2 cores the first time).
# About 7 minutes is derived, not timed alone: the Makefile puts Kueue at a quarter of the
# suite's 47 CPU-minutes, and its Kubernetes libraries alone take the MPI operator about 6.
exec bash "$(dirname "$0")/build-tool.sh" kueue sigs.k8s.io/kueue/cmd/kueue kueue \
  "Kueue v0.17.1's controller" "about 7 minutes"
