#!/usr/bin/env bash
# Builds Volcano v1.10.0's scheduler into bin/vc-scheduler, once, from the same tools module (and
# so the same replace set) as its controller-manager (hack/build-volcano.sh). Only `make bench`
# compares lockstep with it, so `make test` does not pay for this build.
exec bash "$(dirname "$0")/build-tool.sh" volcano volcano.sh/volcano/cmd/scheduler vc-scheduler \
  "Volcano v1.10.0's scheduler (for make bench)" "about 2 minutes once the controller-manager is built"
