#!/usr/bin/env bash
# Call 5: the accumulation at two blocks per SM (C2Q_KERNEL_DEFINES=-DC2Q_ACCUMULATE_BLOCKS=2)
# against three, with the direct sort in blocks of 128: full-width MSMs at 2^27, 2^25 and 2^24.
set -uo pipefail
B=.gpu-carry; O=/tmp/c5; mkdir -p "$O"; chmod +x $B/c2q
pack() { tar -czf "$OUT/call5.tgz" -C /tmp c5 2>/dev/null; }
nvidia-smi --query-gpu=name,clocks.max.sm,memory.total,driver_version --format=csv,noheader | tee $O/device.txt
for l in 27 25 24; do
  for v in 3 2; do
    timeout 60 env C2Q_KERNEL_DEFINES=-DC2Q_ACCUMULATE_BLOCKS=$v $B/c2q bench gpu --min-log $l --max-log $l --reps 5 --no-ntt --no-partition > $O/acc$v-$l.log 2>&1
    echo "acc$v 2^$l rc=$? $(grep -E '^msm ' $O/acc$v-$l.log | grep -v ' ms$' | awk '{printf "%s %s; ", $2, $4}')"
    pack
  done
done
