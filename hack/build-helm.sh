#!/usr/bin/env bash
# Builds Helm v3.17.0 from the tools module test/tools/helm into bin/helm, once (about 3 minutes on
# 2 cores). The end-to-end suite runs it to lint and render the chart deploy/helm/lockstep before
# applying it to its apiserver.
#
# hack/build-tool.sh's recipe, plus the -X flags Helm's own Makefile links in: without them `helm
# version` has no patch version and Helm assumes Kubernetes v1.20 wherever there is no cluster to
# ask (`helm template`, `helm lint`: the chart's kubeVersion check and the deprecated-API lint).
# Helm's Makefile takes that version from its client-go, v0.32 -> 1.32; so does this.
set -euo pipefail
. "$(dirname "$0")/build-tool.sh" # current, announce and built
dir="$root/test/tools/helm"
cd "$dir"
# The checksum database answers 404 for several of the pinned k8s.io staging versions; go.sum
# still holds every hash, so skipping the lookup checks no less.
export GONOSUMDB=k8s.io
helm_version=$(go list -m -f '{{.Version}}' helm.sh/helm/v3)
k8s=$(go list -m -f '{{.Version}}' k8s.io/client-go) # v0.32.1
k8s_minor=$(echo "$k8s" | cut -d. -f2)
ldflags="-s -w -X helm.sh/helm/v3/internal/version.version=$helm_version"
for pkg in helm.sh/helm/v3/pkg/lint/rules helm.sh/helm/v3/pkg/chartutil; do
  ldflags+=" -X $pkg.k8sVersionMajor=1 -X $pkg.k8sVersionMinor=$k8s_minor"
done
# The stamp covers the link flags, as the control plane's does, rather than this script's text:
# a comment edited here rebuilds nothing.
want=$( (cat go.mod go.sum; echo "$ldflags") | sha256sum | cut -c1-16)
if current helm "$want"; then
  exit 0
fi
announce "Helm v3.17.0 into bin/helm" "about 3 minutes"
CGO_ENABLED=0 go build -trimpath -ldflags="$ldflags" -o "$bin/helm" helm.sh/helm/v3/cmd/helm
echo "$want" >"$bin/.helm.stamp"
built "bin/helm"
