#!/usr/bin/env bash
# Call 3: the sort kernels in blocks of 64, 128 (the new default) and 256 threads (the old
# launch) beside the accumulation: gpu-check first, then MSM 2^27 and the B query's G1 + G2 MSM
# at 2^25 each way, the NTT at 2^27; the fastest at 2^27 then runs the pipeline, 3 jobs of
# 32 GiB, uncapped and at a 24 GiB cap (and on an H200 at an 80 GiB cap, with sppark beside).
set -uo pipefail
B=.gpu-carry; O=/tmp/c3; mkdir -p "$O"; chmod +x $B/c2q $B/sppark-bench
export FIL_PROOFS_PARAMETER_CACHE=/var/tmp/c2q-test-params
DEADLINE=${DEADLINE:-580}
sum=()
pack() { tar -czf "$OUT/call3.tgz" -C /tmp c3 2>/dev/null; }
st() { # name timeout cmd...
  local n=$1 to=$2; shift 2; local t0=$SECONDS left=$((DEADLINE - SECONDS))
  [ "$left" -lt 10 ] && { sum+=("$n skipped: no time left"); return; }
  [ "$to" -gt "$left" ] && to=$left
  echo "== $n (limit ${to}s): $*"
  timeout "$to" "$@" > "$O/$n.log" 2>&1; local rc=$?
  sum+=("$(printf '%-14s rc=%-3s %4ss' "$n" "$rc" $((SECONDS-t0)))")
  echo "   rc=$rc $((SECONDS-t0))s"; tail -n 1 "$O/$n.log"; pack
}
nvidia-smi --query-gpu=name,clocks.max.sm,memory.total,driver_version --format=csv,noheader | tee $O/device.txt
T27="bench gpu --min-log 27 --max-log 27 --reps 5 --no-partition"
T25="bench gpu --min-log 25 --max-log 25 --reps 5 --no-partition --no-ntt"
st check 100 $B/c2q gpu-check --device 0
st block128 60 $B/c2q $T27
st block256 40 env C2Q_MSM_SORT_BLOCK=256 $B/c2q $T27 --no-ntt
st block64 40 env C2Q_MSM_SORT_BLOCK=64 $B/c2q $T27 --no-ntt
st g1g2-128 30 $B/c2q $T25
st g1g2-256 30 env C2Q_MSM_SORT_BLOCK=256 $B/c2q $T25
best=128 bestms=999999
for b in 128 256 64; do
  ms=$(grep -E '^msm full-width' $O/block$b.log | grep -v ' ms$' | awk '{print $4}')
  [ -n "$ms" ] && awk -v a="$ms" -v b="$bestms" 'BEGIN{exit !(a < b)}' && { best=$b; bestms=$ms; }
done
echo "fastest sort block: $best ($bestms ms)" | tee $O/best.txt
export C2Q_MSM_SORT_BLOCK=$best
h200=0; grep -q H200 $O/device.txt && h200=1
[ $h200 = 1 ] && st sppark 60 $B/sppark-bench --msm-logs 27 --ntt-logs 27 --reps 5
caps="all 24"; [ $h200 = 1 ] && caps="all 24 80"
for cap in $caps; do
  RUST_LOG=c2q=info,c2q::gpu::backend=debug C2Q_BENCH_JOBS=3 C2Q_BENCH_GPU_GIB=$cap \
    st pipeline-$cap $([ $cap = all ] && echo 270 || echo 170) ops/bench/gpu-run.sh pipeline $B/c2q $O/pipeline-$cap
  grep -E 'steady state|proving start alone|per partition' $O/pipeline-$cap/table.md 2>/dev/null
done
echo; for f in block128 block256 block64 g1g2-128 g1g2-256 sppark; do [ -f $O/$f.log ] && { echo "-- $f"; grep -E '^(ntt |msm |sppark )' "$O/$f.log" | grep -v ' ms$'; }; done
tail -n 1 $O/check.log; cat $O/best.txt
printf '%s\n' "${sum[@]}"
