#!/usr/bin/env bash
# Usage: hack/build-control-plane.sh [MINOR]
#
# Builds the pinned etcd, kube-apiserver, kube-scheduler and kube-controller-manager into bin/
# (once; later runs reuse them). The end-to-end suite and `make demo` run these real components on
# loopback.
#
# With MINOR (e.g. 1.36), builds that release's kube-apiserver, kube-scheduler and
# kube-controller-manager from test/tools/k8s-MINOR into bin/k8s-MINOR instead, beside a link to
# the one etcd: the control planes the suite's core cases also run against
# (LOCKSTEP_KUBE_BIN=bin/k8s-MINOR, `make test-versions`).
set -euo pipefail
# current, announce and built: one announcement for the whole control plane, however many of its
# four binaries need building (see build-tool.sh).
. "$(dirname "$0")/build-tool.sh"

minor=${1:-}
kdir=test/tools/k8s
kbin=$bin
if [[ -n "$minor" ]]; then
  kdir=test/tools/k8s-$minor
  kbin=$bin/k8s-$minor
  [[ -f "$root/$kdir/go.mod" ]] || { echo "no module $kdir for Kubernetes $minor" >&2; exit 2; }
  mkdir -p "$kbin"
fi

# The Kubernetes binaries report the pinned release at /version, as a release build would: a plain
# go build reports v0.0.0-master, which clients that parse the server's version (Kueue) refuse.
kversion=$(cd "$root/$kdir" && go list -m -f '{{.Version}}' k8s.io/kubernetes)
kminor=${kversion#v1.}
kminor=${kminor%%.*}
kflags="-X k8s.io/component-base/version.gitVersion=$kversion -X k8s.io/component-base/version.gitMajor=1 -X k8s.io/component-base/version.gitMinor=$kminor -X k8s.io/component-base/version.gitTreeState=clean"

# name|output dir|module dir|package|link flags beyond -s
parts=(
  "etcd|$bin|test/tools/etcd|go.etcd.io/etcd/server/v3|"
  "kube-apiserver|$kbin|$kdir|k8s.io/kubernetes/cmd/kube-apiserver|$kflags"
  "kube-scheduler|$kbin|$kdir|k8s.io/kubernetes/cmd/kube-scheduler|$kflags"
  "kube-controller-manager|$kbin|$kdir|k8s.io/kubernetes/cmd/kube-controller-manager|$kflags"
)

# The stamp covers the link flags too, so a new pinned release rebuilds the binaries.
stamp_of() { # module-dir ldflags
  ( cat "$root/$1/go.mod" "$root/$1/go.sum"; echo "$2") | sha256sum | cut -c1-16
}

todo=()
for part in "${parts[@]}"; do
  IFS='|' read -r name out dir pkg extra <<<"$part"
  bin=$out current "$name" "$(stamp_of "$dir" "-s $extra")" || todo+=("$part")
done
[[ "$kbin" == "$bin" ]] || ln -sfn ../etcd "$kbin/etcd"
[[ ${#todo[@]} -gt 0 ]] || exit 0

names=""
for part in "${todo[@]}"; do names+="${names:+, }${part%%|*}"; done
announce "the control plane ($kversion) into ${kbin#"$root/"}: $names" "about 7 minutes for all four"
for part in "${todo[@]}"; do
  IFS='|' read -r name out dir pkg extra <<<"$part"
  ldflags="-s $extra"
  (cd "$root/$dir" && CGO_ENABLED=0 go build -trimpath -ldflags="$ldflags" -o "$out/$name" "$pkg")
  stamp_of "$dir" "$ldflags" >"$out/.$name.stamp"
done
built "the control plane ($kversion)"
