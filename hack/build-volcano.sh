#!/usr/bin/env bash
# Builds Volcano v1.10.0's controller-manager into bin/vc-controller-manager, once. The end-to-end
# suite runs its job controller to check lockstep against the PodGroups and pods a vcjob makes
# (about 3 minutes on 2 cores).
exec bash "$(dirname "$0")/build-tool.sh" volcano volcano.sh/volcano/cmd/controller-manager vc-controller-manager \
  "Volcano v1.10.0's controller-manager" "about 3 minutes"
