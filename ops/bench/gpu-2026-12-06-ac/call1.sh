#!/usr/bin/env bash
# Call 1: sppark beside c2q (same session), Fr word reduction on/off, gpu-check large 28, MSM trace.
set -uo pipefail
B=.gpu-carry; O=/tmp/c1; mkdir -p "$O"
DEADLINE=${DEADLINE:-560}
chmod +x $B/c2q $B/sppark-bench
export FIL_PROOFS_PARAMETER_CACHE=/var/tmp/c2q-test-params
sum=()
pack() { tar -czf "$OUT/call1.tgz" -C /tmp c1 2>/dev/null; }
st() { # name timeout cmd...
  local n=$1 to=$2; shift 2; local t0=$SECONDS
  local left=$((DEADLINE - SECONDS))
  [ "$left" -lt 10 ] && { sum+=("$n skipped: no time left"); return; }
  [ "$to" -gt "$left" ] && to=$left
  echo "== $n (limit ${to}s): $*"
  timeout "$to" "$@" > "$O/$n.log" 2>&1; local rc=$?
  sum+=("$(printf '%-18s rc=%-3s %4ss  %s' "$n" "$rc" $((SECONDS-t0)) "$(tail -n1 "$O/$n.log")")")
  echo "   rc=$rc $((SECONDS-t0))s"; tail -n 4 "$O/$n.log"; pack
}
nvidia-smi --query-gpu=name,clocks.max.sm,memory.total,driver_version --format=csv,noheader | tee $O/device.txt
st sppark-small 90 $B/sppark-bench --msm-logs 16 --ntt-logs 20 --reps 2
st sppark 150 $B/sppark-bench --msm-logs 20,24,26,27 --ntt-logs 27 --reps 5
st c2q-bench 150 $B/c2q bench gpu --min-log 20 --max-log 27 --reps 5 --no-partition
for k in 1 2; do for v in 0 1; do
  st ntt$k-redc$v 45 env C2Q_KERNEL_DEFINES=-DC2Q_FR_REDC=$v $B/c2q bench gpu --min-log 27 --max-log 27 --reps 7 --no-msm --no-partition
done; done
st large28 200 $B/c2q gpu-check --device 0 --seed 2806 --max-log 4 --large-log 28
st msm-trace 60 env C2Q_MSM_TRACE=1 $B/c2q bench gpu --min-log 27 --max-log 27 --reps 1 --no-ntt --no-partition
echo; echo "== sppark"; sed -n '/^work/,$p' $O/sppark.log
echo "== c2q"; grep -E '^(ntt|msm)' $O/c2q-bench.log | grep -E '2\^(20|24|26|27) '
echo "== ntt tune"; for f in $O/ntt*.log; do echo "$(basename $f .log): $(grep -E '^ntt' $f | awk '{printf "%s %s %s %s %s; ", $1,$2,$3,$4,$5}')"; done
printf '%s\n' "${sum[@]}"
