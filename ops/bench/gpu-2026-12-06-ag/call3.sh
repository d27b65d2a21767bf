#!/usr/bin/env bash
# Call 3: SnapDeals 32 GiB (2 jobs) at a 24 GiB cap; 64 GiB PoRep (2 jobs) uncapped.
set -uo pipefail
B=.gpu-carry; O=/tmp/c3; mkdir -p "$O"; chmod +x $B/c2q
export FIL_PROOFS_PARAMETER_CACHE=/var/tmp/c3q-test-params
DEADLINE=${DEADLINE:-575}
sum=()
pack() { tar -czf "$OUT/call3.tgz" -C /tmp c3 2>/dev/null; }
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
RUST_LOG=c2q=info,c2q::gpu::backend=debug C2Q_BENCH_SNAP=1 C2Q_BENCH_PROOF=StackedDrg32GiBV1 C2Q_BENCH_JOBS=2 C2Q_BENCH_GPU_GIB=24 \
  st snap32-24 200 ops/bench/gpu-run.sh pipeline $B/c2q $O/snap32-24
cat $O/snap32-24/table.md 2>/dev/null
RUST_LOG=c2q=info,c2q::gpu::backend=debug C2Q_BENCH_PROOF=StackedDrg64GiBV1_1 C2Q_BENCH_JOBS=2 C2Q_BENCH_GPU_GIB=all \
  st porep64 360 ops/bench/gpu-run.sh pipeline $B/c2q $O/porep64
cat $O/porep64/table.md 2>/dev/null
printf '%s\n' "${sum[@]}"
