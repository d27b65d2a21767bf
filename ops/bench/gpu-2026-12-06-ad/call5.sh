#!/usr/bin/env bash
# Call 5: gpu-check on the window choice with its per-window cost, and that choice against the
# old model's at the small sizes where they differ.
set -uo pipefail
B=.gpu-carry; O=/tmp/c5; mkdir -p "$O"; chmod +x $B/c2q
pack() { tar -czf "$OUT/call5.tgz" -C /tmp c5 2>/dev/null; }
nvidia-smi --query-gpu=name,clocks.max.sm,memory.total,driver_version --format=csv,noheader | tee $O/device.txt
timeout 150 $B/c2q gpu-check --device 0 --seed 5151 > $O/gpu-check.log 2>&1; echo "gpu-check rc=$?: $(tail -n1 $O/gpu-check.log)"; pack
for lc in ${SIZES:-12:default 12:9 16:default 16:13 24:default}; do
  l=${lc%:*} c=${lc#*:}; w=(); [ $c != default ] && w=(C2Q_MSM_WINDOW=$c)
  timeout 60 env "${w[@]}" $B/c2q bench gpu --min-log $l --max-log $l --reps 7 --no-ntt --no-partition > $O/window-$l-$c.log 2>&1
  echo "2^$l c=$c: $(grep -E '^msm (full-width|porep-like|g1)' $O/window-$l-$c.log | grep -v ' ms$' | awk '{printf "%s %s; ", $2, $(NF-3)}')"
done; pack
