#!/usr/bin/env bash
# Call 3: 32 GiB PoRep through the pipeline, 3 jobs, uncapped then at a 24 GiB cap
# (`ops/bench/gpu-run.sh pipeline`), on the kernels of the default build.
set -uo pipefail
B=.gpu-carry; O=/tmp/c3; mkdir -p "$O"; chmod +x $B/c2q
export RUST_LOG=c2q=info,c2q::gpu::backend=debug C2Q_BENCH_JOBS=3
pack() { tar -czf "$OUT/call3.tgz" -C /tmp c3 2>/dev/null; }
echo "C2Q_KERNEL_DEFINES='${C2Q_KERNEL_DEFINES:-}'" | tee $O/defines.txt
nvidia-smi --query-gpu=name,clocks.max.sm,memory.total,driver_version --format=csv,noheader | tee $O/device.txt
for cap in ${CAPS:-all 24}; do
  t0=$SECONDS
  C2Q_BENCH_GPU_GIB=$cap timeout ${LIMIT:-330} ops/bench/gpu-run.sh pipeline $B/c2q $O/pipeline-$cap > $O/pipeline-$cap.out 2>&1
  echo "== cap $cap rc=$? $((SECONDS-t0))s"; cat $O/pipeline-$cap/table.md 2>/dev/null; pack
done
