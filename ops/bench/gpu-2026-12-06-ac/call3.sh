#!/usr/bin/env bash
# Call 3: sppark v0.1.15 and c2q, MSM and NTT, one after the other on one GPU.
set -uo pipefail
B=.gpu-carry; O=/tmp/c3; mkdir -p "$O"
chmod +x $B/c2q $B/sppark-bench
pack() { tar -czf "$OUT/call3.tgz" -C /tmp c3 2>/dev/null; }
st() { local n=$1 to=$2; shift 2; local t0=$SECONDS; echo "== $n (limit ${to}s): $*"
  timeout "$to" "$@" > "$O/$n.log" 2>&1; echo "   rc=$? $((SECONDS-t0))s"; tail -n 3 "$O/$n.log"; pack; }
nvidia-smi --query-gpu=name,clocks.max.sm,memory.total,driver_version --format=csv,noheader | tee $O/device.txt
st sppark-small 40 $B/sppark-bench --msm-logs 16 --ntt-logs 20 --reps 2
st sppark 200 $B/sppark-bench --msm-logs 20,24,26,27 --ntt-logs 27 --reps 5
st c2q-bench 120 $B/c2q bench gpu --min-log 20 --max-log 27 --reps 5 --no-partition
echo "== sppark"; sed -n '/^work/,$p' $O/sppark.log
echo "== c2q"; grep -E '^(ntt|msm full)' $O/c2q-bench.log | grep -E '2\^(20|24|26|27) ' | tail -n 8
