#!/usr/bin/env bash
# Fuzzes one target: hack/fuzz.sh <package dir> <FuzzTarget>, for $FUZZTIME (default 10s) with
# -fuzzminimizetime $FUZZMINIMIZETIME (default 1s).
#
# Go before 1.27 can end a duration-bounded fuzz run with a bare "context deadline exceeded" and
# exit 1 although no input failed: its coordinator races its own -fuzztime deadline
# (golang/go#75804), more often on a busy machine. A failing input is always written to
# <package>/testdata/fuzz/<FuzzTarget>/. So a run that ends that way and wrote no new input is run
# once more; anything else fails as it is.
set -euo pipefail
pkg=$1 target=$2
corpus="$pkg/testdata/fuzz/$target"
log=$(mktemp)
trap 'rm -f "$log"' EXIT

inputs() { ls "$corpus" 2>/dev/null | sort || true; }

run() {
  "${GO:-go}" test -run='^$' -fuzz="^${target}\$" -fuzztime="${FUZZTIME:-10s}" \
    -fuzzminimizetime="${FUZZMINIMIZETIME:-1s}" "./$pkg" 2>&1 | tee "$log"
  return "${PIPESTATUS[0]}"
}

before=$(inputs)
if run; then
  exit 0
fi
if [[ "$(inputs)" == "$before" ]] && tail -n 5 "$log" | grep -q '^    context deadline exceeded$'; then
  echo "fuzz: $target stopped on Go's fuzztime race (golang/go#75804), not on an input; once more" >&2
  run
  exit
fi
exit 1
