#!/usr/bin/env bash
# Call 4: the split product (C2Q_MUL_SPLIT=1) against the default: MSM and NTT at 2^27, gpu-check.
set -uo pipefail
B=.gpu-carry; O=/tmp/c4; mkdir -p "$O"; chmod +x $B/c2q
DEADLINE=${DEADLINE:-170}
pack() { tar -czf "$OUT/call4.tgz" -C /tmp c4 2>/dev/null; }
st() { local n=$1 to=$2; shift 2; local t0=$SECONDS left=$((DEADLINE - SECONDS))
  [ "$left" -lt 10 ] && { echo "$n skipped"; return; }; [ "$to" -gt "$left" ] && to=$left
  echo "== $n (limit ${to}s)"; timeout "$to" "$@" > "$O/$n.log" 2>&1; echo "   rc=$? $((SECONDS-t0))s"
  grep -E '^(ntt forward |ntt inverse|msm full-width|msm porep-like|msm g1\+g2)' "$O/$n.log" | grep '2^27' ; tail -n 1 "$O/$n.log"; pack; }
nvidia-smi --query-gpu=name,clocks.max.sm --format=csv,noheader | tee $O/device.txt
T="bench gpu --min-log 27 --max-log 27 --reps 5 --no-partition"
st split1 50 env C2Q_KERNEL_DEFINES=-DC2Q_MUL_SPLIT=1 $B/c2q $T
st split0 50 $B/c2q $T
st check-split1 70 env C2Q_KERNEL_DEFINES=-DC2Q_MUL_SPLIT=1 $B/c2q gpu-check --device 0 --seed 3131
st split1b 40 env C2Q_KERNEL_DEFINES=-DC2Q_MUL_SPLIT=1 $B/c2q $T
