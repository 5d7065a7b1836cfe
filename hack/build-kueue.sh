#!/usr/bin/env bash
# Builds Kueue v0.17.1's controller (cmd/kueue) into bin/kueue, once. The end-to-end suite runs it
# to admit pod groups and Jobs by quota while lockstep places what it admitted (several minutes
# on 2 cores the first time).
exec bash "$(dirname "$0")/build-tool.sh" kueue sigs.k8s.io/kueue/cmd/kueue
