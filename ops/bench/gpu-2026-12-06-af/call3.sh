#!/usr/bin/env bash
# Call 3: the checks on the kernels of the default build (C2Q_KERNEL_DEFINES as given, if any):
# gpu-check at 2^28 and 2^27, and the sectors (2 KiB PoRep and SnapDeals, CPU = CUDA, verified).
set -uo pipefail
B=.gpu-carry; O=/tmp/c3; mkdir -p "$O"; chmod +x $B/c2q
DEADLINE=${DEADLINE:-560}
export FIL_PROOFS_PARAMETER_CACHE=/var/tmp/c2q-test-params
sum=()
pack() { tar -czf "$OUT/call3.tgz" -C /tmp c3 2>/dev/null; }
st() { local n=$1 to=$2; shift 2; local t0=$SECONDS left=$((DEADLINE - SECONDS))
  [ "$left" -lt 10 ] && { sum+=("$n skipped: no time left"); return; }
  [ "$to" -gt "$left" ] && to=$left
  echo "== $n (limit ${to}s): $*"
  timeout "$to" "$@" > "$O/$n.log" 2>&1; local rc=$?
  sum+=("$(printf '%-12s rc=%-3s %4ss  %s' "$n" "$rc" $((SECONDS-t0)) "$(tail -n1 "$O/$n.log")")")
  echo "   rc=$rc $((SECONDS-t0))s"; tail -n 2 "$O/$n.log"; pack; }
echo "C2Q_KERNEL_DEFINES='${C2Q_KERNEL_DEFINES:-}'" | tee $O/defines.txt
nvidia-smi --query-gpu=name,clocks.max.sm,memory.total,driver_version --format=csv,noheader | tee $O/device.txt
st large28 200 $B/c2q gpu-check --device 0 --seed 2812 --max-log 4 --large-log 28
st sectors 190 $B/c2q gpu-check --sectors --seed 6613
st large27 150 $B/c2q gpu-check --device 0 --seed 2712 --large-log 27
printf '%s\n' "${sum[@]}"
