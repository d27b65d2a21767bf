#!/usr/bin/env bash
# Call 2: the partitioned sort with its partitions placed in shared memory (msm_place_partitions)
# against the direct sort: gpu-check first, then MSM 2^27 and 2^25 (G1 + G2, the B query) both
# ways, traced at 2^27; the NTT with three blocks per SM (now the default) against four; then
# the pipeline, 3 jobs of 32 GiB, uncapped and at a 24 GiB cap.
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
T27="bench gpu --min-log 27 --max-log 27 --reps 5 --no-partition"
T25="bench gpu --min-log 25 --max-log 25 --reps 5 --no-partition --no-ntt"
st check 100 $B/c2q gpu-check --device 0
st part 60 $B/c2q $T27
st direct 40 env C2Q_MSM_SORT=direct $B/c2q $T27 --no-ntt
st part25 30 $B/c2q $T25
st direct25 30 env C2Q_MSM_SORT=direct $B/c2q $T25
st trace-part 30 env C2Q_MSM_TRACE=1 $B/c2q bench gpu --min-log 27 --max-log 27 --reps 1 --no-ntt --no-partition
st trace-direct 30 env C2Q_MSM_TRACE=1 C2Q_MSM_SORT=direct $B/c2q bench gpu --min-log 27 --max-log 27 --reps 1 --no-ntt --no-partition
st ntt4 40 env C2Q_KERNEL_DEFINES=-DC2Q_NTT_BLOCKS=4 $B/c2q $T27 --no-msm
for cap in all 24; do
  RUST_LOG=c2q=info,c2q::gpu::backend=debug C2Q_BENCH_JOBS=3 C2Q_BENCH_GPU_GIB=$cap \
    st pipeline-$cap $([ $cap = all ] && echo 290 || echo 200) ops/bench/gpu-run.sh pipeline $B/c2q $O/pipeline-$cap
  cat $O/pipeline-$cap/table.md 2>/dev/null
done
echo; for f in $O/trace*.log; do echo "$f"; grep -h 'msm trace' "$f" | grep 'm=134217728 ' | tail -n 1 | tr ',' '\n' | awk '/sort/{s+=$2} /accumulate/{a+=$2} END{printf "  sort %.1f ms, accumulate %.1f ms\n", s, a}'; done
for f in part direct part25 direct25 ntt4; do echo "-- $f"; grep -E '^(ntt |msm )' "$O/$f.log" | grep -v ' ms$'; done
tail -n 1 $O/check.log
printf '%s\n' "${sum[@]}"
