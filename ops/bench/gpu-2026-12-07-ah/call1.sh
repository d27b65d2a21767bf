#!/usr/bin/env bash
# Call 1: 3 jobs of 32 GiB PoRep with one urgent 32 GiB WinningPoSt among them, uncapped, with
# the binary that lets other circuits' points give way to the constraints (after), then with
# the one before it (before), on the same machine.
set -uo pipefail
B=/tmp/bins; O=/tmp/c1; mkdir -p "$B" "$O"
for b in before after; do gunzip -c .gpu-carry/c2q-$b.gz > $B/c2q-$b && chmod +x $B/c2q-$b; done
DEADLINE=${DEADLINE:-585}
sum=()
pack() { tar -czf "$OUT/call1.tgz" -C /tmp c1 2>/dev/null; }
st() { # name timeout cmd...
  local n=$1 to=$2; shift 2; local t0=$SECONDS left=$((DEADLINE - SECONDS))
  [ "$left" -lt 10 ] && { sum+=("$n skipped: no time left"); return; }
  [ "$to" -gt "$left" ] && to=$left
  echo "== $n (limit ${to}s): $*"
  timeout "$to" "$@" > "$O/$n.log" 2>&1; local rc=$?
  sum+=("$(printf '%-16s rc=%-3s %4ss' "$n" "$rc" $((SECONDS-t0)))")
  echo "   rc=$rc $((SECONDS-t0))s"; tail -n 1 "$O/$n.log"; pack
}
nvidia-smi --query-gpu=name,clocks.max.sm,memory.total,driver_version --format=csv,noheader | tee $O/device.txt

export C2Q_BENCH_JOBS=3 C2Q_BENCH_URGENT=StackedDrgWinning32GiBV1 C2Q_BENCH_GPU_GIB=all
for b in after before; do
  st pipeline-$b 280 ops/bench/gpu-run.sh pipeline $B/c2q-$b $O/pipeline-$b
done
for b in after before; do
  echo "-- $b"; cat $O/pipeline-$b/table.md 2>/dev/null
  grep -h "A, B and C are made on the CPU\|evicting resident\|urgent" $O/pipeline-$b/bench-pipeline.log | cut -c1-220 | head -8
done

printf '%s\n' "${sum[@]}"
