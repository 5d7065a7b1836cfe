#!/usr/bin/env bash
# Usage: hack/build-tool.sh NAME PACKAGE BINARY WHAT TAKES
#   e.g. hack/build-tool.sh kueue sigs.k8s.io/kueue/cmd/kueue kueue "Kueue v0.17.1's controller" "about 6 minutes"
#
# Builds PACKAGE from the tools module test/tools/NAME into bin/BINARY, once: a stamp of the
# module's go.mod and go.sum says whether the binary is current. Each tool has a module of its own
# so that its dependencies never touch lockstep's go.mod.
#
# The first `make demo` or `make test` on a fresh machine spends most of its time in these builds,
# and go build prints nothing while it compiles, for up to nine minutes. So a build says, before it
# starts, what it builds (WHAT) and how long a first build takes on 2 cores (TAKES), and when it
# ends, how long it took. A binary that is already current says nothing: later runs stay quiet.
# TAKES comes from the Makefile's comments on each target; keep the two in step.
#
# build-control-plane.sh and build-helm.sh build with link flags of their own. They source this
# file for `current`, `announce` and `built`, so that every build speaks the same two lines.
set -euo pipefail

root=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
bin="$root/bin"
mkdir -p "$bin"

# current BINARY KEY: whether bin/BINARY exists and its stamp says it was built from KEY (a hash
# of whatever decides the build: go.mod, go.sum, link flags).
current() {
  [[ -x "$bin/$1" && -f "$bin/.$1.stamp" && "$(cat "$bin/.$1.stamp")" == "$2" ]]
}

# announce WHAT TAKES: the line a person waiting reads first. "==>" is the step marker `make demo`
# prints too, so that a build reads as one more step before the demo's own.
announce() {
  build_started=$SECONDS
  echo "==> Building $1 (first build on 2 cores: $2; later runs reuse it)" >&2
}

# built WHAT: the line that ends the wait, with the time it took (so the estimates can be checked).
built() {
  local s=$((SECONDS - build_started))
  printf '==> Built %s in %dm%02ds\n' "$1" $((s / 60)) $((s % 60)) >&2
}

if [[ "${BASH_SOURCE[0]}" == "$0" ]]; then
  if [[ $# -ne 5 ]]; then
    echo "usage: $0 NAME PACKAGE BINARY WHAT TAKES" >&2
    exit 2
  fi
  name=$1 pkg=$2 out=$3 what=$4 takes=$5
  dir="$root/test/tools/$name"
  want=$(cat "$dir/go.mod" "$dir/go.sum" | sha256sum | cut -c1-16)
  if current "$out" "$want"; then
    exit 0
  fi
  announce "$what into bin/$out" "$takes"
  # The checksum database answers 404 for several of the pinned k8s.io staging versions; go.sum
  # still holds every hash, so skipping the lookup checks no less.
  (cd "$dir" && GONOSUMDB=k8s.io CGO_ENABLED=0 go build -trimpath -ldflags=-s -o "$bin/$out" "$pkg")
  echo "$want" >"$bin/.$out.stamp"
  built "bin/$out"
fi
