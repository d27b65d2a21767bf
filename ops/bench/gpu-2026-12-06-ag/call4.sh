#!/usr/bin/env bash
# Call 4: 32 GiB WindowPoSt (3 jobs) and 64 GiB SnapDeals (2 jobs), uncapped.
set -uo pipefail
B=.gpu-carry; O=/tmp/c4; mkdir -p "$O"; chmod +x $B/c2q
export FIL_PROOFS_PARAMETER_CACHE=/var/tmp/c4q-test-params
DEADLINE=${DEADLINE:-540}
sum=()
pack() { tar -czf "$OUT/call4.tgz" -C /tmp c4 2>/dev/null; }
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
RUST_LOG=c2q=info,c2q::gpu::backend=debug C2Q_BENCH_PROOF=StackedDrgWindow32GiBV1_2 C2Q_BENCH_JOBS=3 C2Q_BENCH_GPU_GIB=all \
  st window32 280 ops/bench/gpu-run.sh pipeline $B/c2q $O/window32
cat $O/window32/table.md 2>/dev/null
RUST_LOG=c2q=info,c2q::gpu::backend=debug C2Q_BENCH_SNAP=1 C2Q_BENCH_PROOF=StackedDrg64GiBV1 C2Q_BENCH_JOBS=2 C2Q_BENCH_GPU_GIB=all \
  st snap64 280 ops/bench/gpu-run.sh pipeline $B/c2q $O/snap64
cat $O/snap64/table.md 2>/dev/null
printf '%s\n' "${sum[@]}"
