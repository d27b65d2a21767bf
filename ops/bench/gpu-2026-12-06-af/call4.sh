#!/usr/bin/env bash
# Call 4: the committed default (two sort blocks per SM beside the accumulation, no override):
# MSM and NTT at 2^27, sppark beside them, then gpu-check.
set -uo pipefail
B=.gpu-carry; O=/tmp/c4; mkdir -p "$O"; chmod +x $B/c2q $B/sppark-bench
export FIL_PROOFS_PARAMETER_CACHE=/var/tmp/c2q-test-params
DEADLINE=${DEADLINE:-150}
sum=()
pack() { tar -czf "$OUT/call4.tgz" -C /tmp c4 2>/dev/null; }
st() { # name timeout cmd...
  local n=$1 to=$2; shift 2; local t0=$SECONDS left=$((DEADLINE - SECONDS))
  [ "$left" -lt 10 ] && { sum+=("$n skipped: no time left"); return; }
  [ "$to" -gt "$left" ] && to=$left
  timeout "$to" "$@" > "$O/$n.log" 2>&1; local rc=$?
  sum+=("$(printf '%-12s rc=%-3s %4ss' "$n" "$rc" $((SECONDS-t0)))"); pack
}
nvidia-smi --query-gpu=name,clocks.max.sm,memory.total,driver_version --format=csv,noheader | tee $O/device.txt
st t27 40 $B/c2q bench gpu --min-log 27 --max-log 27 --reps 5 --no-partition
st sppark 40 $B/sppark-bench --msm-logs 27 --ntt-logs 27 --reps 5
st check 70 $B/c2q gpu-check --device 0
grep -E '^(ntt |msm )' "$O/t27.log" | grep -v ' ms$'; grep -E '^sppark ' $O/sppark.log | sort -u
tail -n 1 $O/check.log
printf '%s\n' "${sum[@]}"
