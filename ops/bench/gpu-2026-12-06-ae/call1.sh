#!/usr/bin/env bash
# Call 1: the partitioned window sort against the direct one (gpu-check first, then MSM 2^27
# timed and traced both ways); the NTT at 2^27 with its coset transforms; sppark v0.1.15
# beside it (MSM, NTT, coset NTT); the NTT pass and the accumulation at other blocks per SM.
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
  echo "   rc=$rc $((SECONDS-t0))s"; tail -n 2 "$O/$n.log"; pack
}
nvidia-smi --query-gpu=name,clocks.max.sm,memory.total,driver_version --format=csv,noheader | tee $O/device.txt
T27="bench gpu --min-log 27 --max-log 27 --reps 5 --no-partition"
st check 100 $B/c2q gpu-check --device 0
st part 110 $B/c2q $T27
st direct 60 env C2Q_MSM_SORT=direct $B/c2q $T27 --no-ntt
st trace-part 50 env C2Q_MSM_TRACE=1 $B/c2q bench gpu --min-log 27 --max-log 27 --reps 1 --no-ntt --no-partition
st trace-direct 50 env C2Q_MSM_TRACE=1 C2Q_MSM_SORT=direct $B/c2q bench gpu --min-log 27 --max-log 27 --reps 1 --no-ntt --no-partition
st sppark 100 $B/sppark-bench --msm-logs 27 --ntt-logs 27 --reps 5
st ntt3 70 env C2Q_KERNEL_DEFINES=-DC2Q_NTT_BLOCKS=3 $B/c2q $T27 --no-msm
st acc2 70 env C2Q_KERNEL_DEFINES=-DC2Q_ACCUMULATE_BLOCKS=2 $B/c2q $T27 --no-ntt
st ntt2 70 env C2Q_KERNEL_DEFINES=-DC2Q_NTT_BLOCKS=2 $B/c2q $T27 --no-msm
echo; for f in $O/trace*.log; do echo "$f"; grep -h 'msm trace' "$f" | grep 'm=134217728 ' | tail -n 1 | tr ',' '\n' | awk '/sort/{s+=$2} /accumulate/{a+=$2} END{printf "  sort %.1f ms, accumulate %.1f ms\n", s, a}'; done
for f in $O/part.log $O/direct.log $O/sppark.log $O/ntt3.log $O/ntt2.log $O/acc2.log; do echo "-- $f"; grep -E '^(ntt |msm |sppark )' "$f"; done
tail -n 4 $O/check.log
printf '%s\n' "${sum[@]}"
