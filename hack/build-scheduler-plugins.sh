#!/usr/bin/env bash
# Builds the scheduler-plugins v0.34.7 scheduler (kube-scheduler with the Coscheduling plugin
# compiled in) into bin/sp-scheduler, once. Only `make bench` compares lockstep with it, so
# `make test` does not pay for this build (about 4 minutes on 2 cores).
exec bash "$(dirname "$0")/build-tool.sh" scheduler-plugins sigs.k8s.io/scheduler-plugins/cmd/scheduler sp-scheduler \
  "the scheduler-plugins v0.34.7 scheduler (for make bench)" "about 4 minutes"
