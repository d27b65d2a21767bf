#!/usr/bin/env bash
# Call 2: gpu-check, then the pipeline (3 jobs of 32 GiB) uncapped and at a 24 GiB cap, with
# the sort grid beside the accumulation at its default; NTT and MSM at 2^27 first.
set -uo pipefail
B=.gpu-carry; O=/tmp/c2; mkdir -p "$O"; chmod +x $B/c2q
export FIL_PROOFS_PARAMETER_CACHE=/var/tmp/c2q-test-params
DEADLINE=${DEADLINE:-575}
sum=()
pack() { tar -czf "$OUT/call2.tgz" -C /tmp c2 2>/dev/null; }
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
st t27 40 $B/c2q bench gpu --min-log 27 --max-log 27 --reps 5 --no-partition
for cap in ${CAPS:-all 24}; do
  RUST_LOG=c2q=info,c2q::gpu::backend=debug C2Q_BENCH_JOBS=3 C2Q_BENCH_GPU_GIB=$cap \
    st pipeline-$cap $([ $cap = all ] && echo 290 || echo 200) ops/bench/gpu-run.sh pipeline $B/c2q $O/pipeline-$cap
  cat $O/pipeline-$cap/table.md 2>/dev/null
done
echo; grep -E '^(ntt |msm )' "$O/t27.log" | grep -v ' ms$'
tail -n 1 $O/check.log
printf '%s\n' "${sum[@]}"
