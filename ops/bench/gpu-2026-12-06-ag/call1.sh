#!/usr/bin/env bash
# Call 1: gpu-check; MSM and NTT at 2^27 (c2q bench gpu); sppark v0.1.15 beside them; the
# pipeline (3 jobs of 32 GiB PoRep) uncapped.
set -uo pipefail
B=.gpu-carry; O=/tmp/c1; mkdir -p "$O"; chmod +x $B/c2q $B/sppark-bench
export FIL_PROOFS_PARAMETER_CACHE=/var/tmp/c2q-test-params
DEADLINE=${DEADLINE:-575}
sum=()
pack() { tar -czf "$OUT/call1.tgz" -C /tmp c1 2>/dev/null; }
st() { # name timeout cmd...
  local n=$1 to=$2; shift 2; local t0=$SECONDS left=$((DEADLINE - SECONDS))
  [ "$left" -lt 10 ] && { sum+=("$n skipped: no time left"); return; }
  [ "$to" -gt "$left" ] && to=$left
  echo "== $n (limit ${to}s): $*"
  timeout "$to" "$@" > "$O/$n.log" 2>&1; local rc=$?
  sum+=("$(printf '%-12s rc=%-3s %4ss' "$n" "$rc" $((SECONDS-t0)))")
  echo "   rc=$rc $((SECONDS-t0))s"; tail -n 1 "$O/$n.log"; pack
}
nvidia-smi --query-gpu=name,clocks.max.sm,memory.total,driver_version --format=csv,noheader | tee $O/device.txt
st check 100 $B/c2q gpu-check --device 0
st t27 60 $B/c2q bench gpu --min-log 27 --max-log 27 --reps 5 --no-partition
st sppark 100 $B/sppark-bench --msm-logs 27 --ntt-logs 27 --reps 5
RUST_LOG=c2q=info,c2q::gpu::backend=debug C2Q_BENCH_JOBS=3 C2Q_BENCH_GPU_GIB=all \
  st pipeline-all 300 ops/bench/gpu-run.sh pipeline $B/c2q $O/pipeline-all
cat $O/pipeline-all/table.md 2>/dev/null
echo
for f in $O/t27.log $O/sppark.log; do echo "-- $f"; grep -E '^(ntt |msm |sppark )' "$f" | grep -v ' ms$'; done
tail -n 1 $O/check.log
printf '%s\n' "${sum[@]}"
