#!/usr/bin/env bash
# Builds Koordinator v1.8.0's koord-scheduler (kube-scheduler's framework on the Kubernetes 1.35
# libraries, with Koordinator's Coscheduling and other plugins compiled in) into
# bin/koord-scheduler, once. Only `make bench` compares lockstep with it, so `make test` does not
# pay for this build.
exec bash "$(dirname "$0")/build-tool.sh" koordinator github.com/koordinator-sh/koordinator/cmd/koord-scheduler koord-scheduler \
  "Koordinator v1.8.0's koord-scheduler (for make bench)" "about 9 minutes"
