#!/usr/bin/env bash
# Builds the Kubeflow training-operator v1.8.1 into bin/training-operator, once. The end-to-end
# suite runs it to check lockstep against the PodGroups and pods it makes (about 2 minutes on 2
# cores).
exec bash "$(dirname "$0")/build-tool.sh" training-operator github.com/kubeflow/training-operator/cmd/training-operator.v1 training-operator \
  "the Kubeflow training-operator v1.8.1" "about 2 minutes"
