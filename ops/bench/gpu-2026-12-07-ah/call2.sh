#!/usr/bin/env bash
# Call 2, on the machine still warm from call 1 (the recorded constraints on its disk): the
# binary with the fix again, which call 1's 280 s step limit had cut before its jobs ended.
B=/tmp/bins; O=/tmp/c2; mkdir -p $O
export C2Q_BENCH_JOBS=3 C2Q_BENCH_URGENT=StackedDrgWinning32GiBV1 C2Q_BENCH_GPU_GIB=all
timeout 400 ops/bench/gpu-run.sh pipeline $B/c2q-after $O/pipeline-after > $O/run.log 2>&1
echo rc=$?; cat $O/pipeline-after/table.md
grep -h "A, B and C are made on the CPU\|evicting resident\|jobs done\|job [0-9]: 10 of 10" $O/pipeline-after/bench-pipeline.log | cut -c1-200
tar -czf $OUT/call2.tgz -C /tmp c2
