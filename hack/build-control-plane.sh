#!/usr/bin/env bash
# Builds the pinned etcd, kube-apiserver, kube-scheduler and kube-controller-manager into bin/ (once; later runs reuse them).
# The end-to-end suite and `make demo` run these real components on loopback.
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
bin="$root/bin"
mkdir -p "$bin"

build() { # name module-dir package
  local name=$1 dir=$2 pkg=$3 stamp="$bin/.$1.stamp"
  local want
  want=$(cat "$root/$dir/go.mod" "$root/$dir/go.sum" | sha256sum | cut -c1-16)
  if [[ -x "$bin/$name" && -f "$stamp" && "$(cat "$stamp")" == "$want" ]]; then
    return
  fi
  echo "building $name from $dir (first time takes a few minutes)..." >&2
  (cd "$root/$dir" && CGO_ENABLED=0 go build -trimpath -ldflags=-s -o "$bin/$name" "$pkg")
  echo "$want" >"$stamp"
}

build etcd test/tools/etcd go.etcd.io/etcd/server/v3
build kube-apiserver test/tools/k8s k8s.io/kubernetes/cmd/kube-apiserver
build kube-scheduler test/tools/k8s k8s.io/kubernetes/cmd/kube-scheduler
build kube-controller-manager test/tools/k8s k8s.io/kubernetes/cmd/kube-controller-manager
