#!/usr/bin/env bash
# Call 1: the lazy sums of products in split rows (C2Q_MUL_SUB_SPLIT=1, Fp and Fp2) and the
# inlined products (C2Q_FP_INLINE=1) against the default at 2^27 (MSM, NTT) and 2^25 (the B
# query's G1 + G2 MSM); the MSM's phases traced at 2^27; the window swept at 2^27.
set -uo pipefail
B=.gpu-carry; O=/tmp/c1; mkdir -p "$O"; chmod +x $B/c2q
DEADLINE=${DEADLINE:-540}
sum=()
pack() { tar -czf "$OUT/call1.tgz" -C /tmp c1 2>/dev/null; }
st() { # name timeout cmd...
  local n=$1 to=$2; shift 2; local t0=$SECONDS left=$((DEADLINE - SECONDS))
  [ "$left" -lt 10 ] && { sum+=("$n skipped: no time left"); return; }
  [ "$to" -gt "$left" ] && to=$left
  echo "== $n (limit ${to}s): $*"
  timeout "$to" "$@" > "$O/$n.log" 2>&1; local rc=$?
  sum+=("$(printf '%-16s rc=%-3s %4ss' "$n" "$rc" $((SECONDS-t0))) $(grep -E '^(ntt forward |ntt inverse|msm full-width|msm porep-like|msm g1\+g2)' "$O/$n.log" | grep -v ' ms$' | awk '{printf "%s %s %s; ", $1, $2, $(NF-3)}')")
  echo "   rc=$rc $((SECONDS-t0))s"; tail -n 2 "$O/$n.log"; pack
}
nvidia-smi --query-gpu=name,clocks.max.sm,memory.total,driver_version --format=csv,noheader | tee $O/device.txt
T27="bench gpu --min-log 27 --max-log 27 --reps 5 --no-partition"
T25="bench gpu --min-log 25 --max-log 25 --reps 5 --no-ntt --no-partition"
st split 80 $B/c2q $T27
st subsplit 80 env C2Q_KERNEL_DEFINES=-DC2Q_MUL_SUB_SPLIT=1 $B/c2q $T27
st subsplit-inline 110 env C2Q_KERNEL_DEFINES="-DC2Q_MUL_SUB_SPLIT=1 -DC2Q_FP_INLINE=1" $B/c2q $T27
st g2-split 50 $B/c2q $T25
st g2-subsplit 50 env C2Q_KERNEL_DEFINES=-DC2Q_MUL_SUB_SPLIT=1 $B/c2q $T25
st trace 40 env C2Q_MSM_TRACE=1 $B/c2q bench gpu --min-log 27 --max-log 27 --reps 1 --no-ntt --no-partition
st trace-subsplit 40 env C2Q_MSM_TRACE=1 C2Q_KERNEL_DEFINES=-DC2Q_MUL_SUB_SPLIT=1 $B/c2q bench gpu --min-log 27 --max-log 27 --reps 1 --no-ntt --no-partition
for w in 21 20; do
  st window$w 45 env C2Q_MSM_WINDOW=$w C2Q_KERNEL_DEFINES=-DC2Q_MUL_SUB_SPLIT=1 $B/c2q bench gpu --min-log 27 --max-log 27 --reps 3 --no-ntt --no-partition
done
echo; grep -h 'msm trace' $O/trace*.log | cut -c1-400
printf '%s\n' "${sum[@]}"
