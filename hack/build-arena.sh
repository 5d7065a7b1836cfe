#!/usr/bin/env bash
# Builds Arena v0.15.5's command line into bin/arena and the kubectl it shells out to into
# bin/arena-kubectl (Arena runs a binary of exactly that name from PATH), once each. The kubectl
# is the control plane's own (test/tools/k8s, Kubernetes 1.37). The end-to-end suite runs
# `arena submit pytorchjob --gang ...` with them against the training-operator (the first build
# takes several minutes on 2 cores).
set -euo pipefail
here=$(dirname "$0")
# Neither build has been timed on its own ("several minutes" is the figure of the first run).
bash "$here/build-tool.sh" arena github.com/kubeflow/arena/cmd/arena arena \
  "Arena v0.15.5's command line" "several minutes"
bash "$here/build-tool.sh" k8s k8s.io/kubernetes/cmd/kubectl arena-kubectl \
  "the kubectl Arena runs (Kubernetes 1.37)" "a few minutes, less once the control plane is built"
