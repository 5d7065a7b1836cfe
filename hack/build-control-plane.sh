#!/usr/bin/env bash
# Builds the pinned etcd, kube-apiserver, kube-scheduler and kube-controller-manager into bin/
# (once; later runs reuse them). The end-to-end suite and `make demo` run these real components on
# loopback.
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
bin="$root/bin"
mkdir -p "$bin"

# The Kubernetes binaries report the pinned release at /version, as a release build would: a plain
# go build reports v0.0.0-master, which clients that parse the server's version (Kueue) refuse.
kversion=$(cd "$root/test/tools/k8s" && go list -m -f '{{.Version}}' k8s.io/kubernetes)
kminor=${kversion#v1.}
kminor=${kminor%%.*}
kflags="-X k8s.io/component-base/version.gitVersion=$kversion -X k8s.io/component-base/version.gitMajor=1 -X k8s.io/component-base/version.gitMinor=$kminor -X k8s.io/component-base/version.gitTreeState=clean"

build() { # name module-dir package [ldflags]
  local name=$1 dir=$2 pkg=$3 ldflags="-s ${4:-}" stamp="$bin/.$1.stamp"
  local want
  want=$( (cat "$root/$dir/go.mod" "$root/$dir/go.sum"; echo "$ldflags") | sha256sum | cut -c1-16)
  if [[ -x "$bin/$name" && -f "$stamp" && "$(cat "$stamp")" == "$want" ]]; then
    return
  fi
  echo "building $name from $dir (first time takes a few minutes)..." >&2
  (cd "$root/$dir" && CGO_ENABLED=0 go build -trimpath -ldflags="$ldflags" -o "$bin/$name" "$pkg")
  echo "$want" >"$stamp"
}

build etcd test/tools/etcd go.etcd.io/etcd/server/v3
build kube-apiserver test/tools/k8s k8s.io/kubernetes/cmd/kube-apiserver "$kflags"
build kube-scheduler test/tools/k8s k8s.io/kubernetes/cmd/kube-scheduler "$kflags"
build kube-controller-manager test/tools/k8s k8s.io/kubernetes/cmd/kube-controller-manager "$kflags"
