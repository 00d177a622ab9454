#!/usr/bin/env bash
# Runs two builds of sparsegpu-bench on the same inputs one after the other, alternating, so that a change
# can be judged against the run-to-run spread on the same GPU:
#   scripts/compare_builds.sh OLD_BENCH NEW_BENCH OUT_DIR [ROUNDS]
# writes OUT_DIR/{old,new}-FAMILY-ROUND.jsonl and .txt for SpAMM at N = 8192 (valid ratios 10 % and
# 5 %) and each other family's default run.
set -uo pipefail
old=$1 new=$2 out=$3 rounds=${4:-1}
mkdir -p "$out"
runs=(
  "spamm --n 8192 --ratios 0.1,0.05 --no-exact"
  "smat"
  "msrep"
  "sddmm"
)
status=0
for round in $(seq 1 "$rounds"); do
  for run in "${runs[@]}"; do
    family=${run%% *}
    for build in old new; do
      bin=$old; [ "$build" = new ] && bin=$new
      echo "=== $build $run (round $round)"
      # shellcheck disable=SC2086
      "$bin" --family $run --json "$out/$build-$family-$round.jsonl" > "$out/$build-$family-$round.txt" 2>&1 || status=1
      tail -n 25 "$out/$build-$family-$round.txt"
    done
  done
done
exit $status
