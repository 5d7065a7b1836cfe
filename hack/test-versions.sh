#!/usr/bin/env bash
# Usage: CORE_CASES='A|B' NATIVE_CASES='C|D' hack/test-versions.sh MINOR...   (make test-versions)
#
# Runs the end-to-end suite's core cases against the pinned control plane (bin/) and against each
# older release's (bin/k8s-MINOR), and Kubernetes' own PodGroup cases on the releases that serve
# that API (1.36 and later). Prints one table row per release: what docs/operating.md's version
# table is made from. Each run's whole output stays in _output/test-versions/<version>.log.
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
cd "$root"
GO=${GO:-go}
out=_output/test-versions
mkdir -p "$out"

# release DIR: the minor and whole version the kube-apiserver in DIR reports.
release() {
  "$1/kube-apiserver" --version | sed -n 's/^Kubernetes v1\.\([0-9]*\)\..*/\1 &/p' | sed 's/Kubernetes //'
}

rows=()
failed=0
for dir in bin $(printf 'bin/k8s-%s ' "$@"); do
  read -r minor version < <(release "$dir")
  cases=$CORE_CASES
  api="none lockstep reads"
  if ((minor >= 37)); then
    cases+="|$NATIVE_CASES" api="scheduling.k8s.io/v1beta1"
  elif ((minor >= 36)); then
    cases+="|$NATIVE_CASES" api="scheduling.k8s.io/v1alpha2"
  fi
  log="$out/$version.log"
  echo "==> The core end-to-end cases against Kubernetes $version ($dir); output in $log" >&2
  env_dir=()
  [[ "$dir" == bin ]] || env_dir=(LOCKSTEP_KUBE_BIN="$dir")
  if env "${env_dir[@]}" "$GO" test -race -count=1 -timeout 30m -v -run "^($cases)\$" ./test/e2e/ >"$log" 2>&1; then
    verdict=pass
  else
    verdict=FAIL failed=1
  fi
  passed=$(grep -c '^--- PASS' "$log" || true)
  notpassed=$(grep -E '^--- (FAIL|SKIP)' "$log" | awk '{sub(":", "", $2); print $3 " (" $2 ")"}' | paste -sd, - || true)
  want=$(tr '|' '\n' <<<"$cases" | wc -l)
  rows+=("| $version | $api | $passed of $want | ${notpassed:-none} | $verdict |")
done

echo
echo "| Kubernetes | PodGroup API | cases passed | failed or skipped | run |"
echo "|---|---|---|---|---|"
printf '%s\n' "${rows[@]}"
exit $failed
