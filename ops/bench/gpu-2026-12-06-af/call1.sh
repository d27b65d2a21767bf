#!/usr/bin/env bash
# Call 1: gpu-check; the MSM's sort grid beside the accumulation (C2Q_MSM_SORT_BESIDE blocks per
# SM; 0 = as many as fit, the grid of before) at 2^27, 2^25 (with the B query's G1 + G2), 2^24
# and 2^20; the NTT at 2^27; sppark v0.1.15 beside them.
set -uo pipefail
B=.gpu-carry; O=/tmp/c1; mkdir -p "$O"; chmod +x $B/c2q $B/sppark-bench
export FIL_PROOFS_PARAMETER_CACHE=/var/tmp/c2q-test-params
DEADLINE=${DEADLINE:-560}
sum=()
pack() { tar -czf "$OUT/call1.tgz" -C /tmp c1 2>/dev/null; }
st() { # name timeout cmd...
  local n=$1 to=$2; shift 2; local t0=$SECONDS left=$((DEADLINE - SECONDS))
  [ "$left" -lt 10 ] && { sum+=("$n skipped: no time left"); return; }
  [ "$to" -gt "$left" ] && to=$left
  echo "== $n (limit ${to}s): $*"
  timeout "$to" "$@" > "$O/$n.log" 2>&1; local rc=$?
  sum+=("$(printf '%-12s rc=%-3s %4ss' "$n" "$rc" $((SECONDS-t0)))")
  echo "   rc=$rc $((SECONDS-t0))s"; pack
}
msm() { # name log k
  st "$1" 60 env C2Q_MSM_SORT_BESIDE=$3 $B/c2q bench gpu --min-log $2 --max-log $2 --reps 5 --no-ntt --no-partition
}
nvidia-smi --query-gpu=name,clocks.max.sm,memory.total,driver_version --format=csv,noheader | tee $O/device.txt
st check 100 $B/c2q gpu-check --device 0
r=0; for k in 0 4 1 2 8 0 4; do r=$((r+1)); msm "k$k-27-$r" 27 $k; done
for k in 0 2 4; do msm "k$k-25" 25 $k; done
for k in 0 4; do msm "k$k-24" 24 $k; done
for k in 0 4; do msm "k$k-20" 20 $k; done
st ntt 60 $B/c2q bench gpu --min-log 27 --max-log 27 --reps 5 --no-msm --no-partition
st sppark 100 $B/sppark-bench --msm-logs 27 --ntt-logs 27 --reps 5
echo
for f in $O/k*.log; do echo "$(basename $f .log): $(grep -E '^msm ' $f | grep -v ' ms$' | awk '{printf "%s %s %s; ", $2, $3, $4}')"; done
for f in $O/ntt.log $O/sppark.log; do echo "-- $f"; grep -E '^(ntt |msm |sppark )' "$f"; done
tail -n 3 $O/check.log
printf '%s\n' "${sum[@]}"
