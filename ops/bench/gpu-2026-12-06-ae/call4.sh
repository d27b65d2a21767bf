#!/usr/bin/env bash
# Call 4: sort blocks of 128 (default) and 256 threads at 2^24 and 2^26; the pipeline, 3 jobs of
# 32 GiB, at 48 and 16 GiB caps (the streamed paths), with the default build.
set -uo pipefail
B=.gpu-carry; O=/tmp/c4; mkdir -p "$O"; chmod +x $B/c2q
export FIL_PROOFS_PARAMETER_CACHE=/var/tmp/c2q-test-params
DEADLINE=${DEADLINE:-540}
sum=()
pack() { tar -czf "$OUT/call4.tgz" -C /tmp c4 2>/dev/null; }
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
for l in 24 26; do
  st block128-$l 40 $B/c2q bench gpu --min-log $l --max-log $l --reps 5 --no-partition --no-ntt
  st block256-$l 40 env C2Q_MSM_SORT_BLOCK=256 $B/c2q bench gpu --min-log $l --max-log $l --reps 5 --no-partition --no-ntt
done
for cap in 48 16; do
  RUST_LOG=c2q=info,c2q::gpu::backend=debug C2Q_BENCH_JOBS=3 C2Q_BENCH_GPU_GIB=$cap \
    st pipeline-$cap 230 ops/bench/gpu-run.sh pipeline $B/c2q $O/pipeline-$cap
  grep -E 'steady state|proving start alone|per partition|B multiexp|peak device' $O/pipeline-$cap/table.md 2>/dev/null
done
echo; for f in block128-24 block256-24 block128-26 block256-26; do echo "-- $f"; grep -E '^msm ' "$O/$f.log" | grep -v ' ms$'; done
printf '%s\n' "${sum[@]}"
