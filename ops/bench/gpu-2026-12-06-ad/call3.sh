#!/usr/bin/env bash
# Call 3: the MSM's window at the sizes where the cost model's choices differ (old model:
# bucket work 3, no top-window rule; new: 8 and the rule), then 32 GiB PoRep through the
# pipeline, 3 jobs, uncapped then at a 24 GiB cap (`ops/bench/gpu-run.sh pipeline`).
set -uo pipefail
B=.gpu-carry; O=/tmp/c3; mkdir -p "$O"; chmod +x $B/c2q
export RUST_LOG=c2q=info,c2q::gpu::backend=debug C2Q_BENCH_JOBS=3
pack() { tar -czf "$OUT/call3.tgz" -C /tmp c3 2>/dev/null; }
echo "C2Q_KERNEL_DEFINES='${C2Q_KERNEL_DEFINES:-}'" | tee $O/defines.txt
nvidia-smi --query-gpu=name,clocks.max.sm,memory.total,driver_version --format=csv,noheader | tee $O/device.txt
for lc in 20:16 20:13 23:19 23:16 24:20 24:19 24:16 26:22 26:20 27:20; do
  l=${lc%:*} c=${lc#*:}
  timeout 90 env C2Q_MSM_WINDOW=$c $B/c2q bench gpu --min-log $l --max-log $l --reps 5 --no-ntt --no-partition > $O/window-$l-$c.log 2>&1
  echo "2^$l c=$c: $(grep -E '^msm full-width' $O/window-$l-$c.log | grep -v ' ms$' | awk '{print $4}') ms"
done; pack
for cap in ${CAPS:-all 24}; do
  t0=$SECONDS
  C2Q_BENCH_GPU_GIB=$cap timeout $([ $cap = all ] && echo 300 || echo 210) ops/bench/gpu-run.sh pipeline $B/c2q $O/pipeline-$cap > $O/pipeline-$cap.out 2>&1
  echo "== cap $cap rc=$? $((SECONDS-t0))s"; cat $O/pipeline-$cap/table.md 2>/dev/null; pack
done
