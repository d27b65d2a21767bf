#!/usr/bin/env python3
"""Median proving-start phases per run of a `c2q bench pipeline` log.

Reads the backend's debug lines (RUST_LOG=c2q::gpu::backend=debug and, for the streamed MSMs,
c2q::gpu::msm=debug) and prints, for each "run N of M: device memory G" of the log, the median
of every start's phases after the run's first start, then the medians of the "streamed MSM"
lines grouped by their shape (MSMs summed, longest piece, G2 or not).

    python3 ops/bench/start-phases.py ops/bench/gpu-2026-12-05-aa/call2-pipeline-24-16-together.log
"""
import re
import statistics
import sys

PHASES = ["h_ms", "msm_h_ms", "aux_ms", "msm_l_ms", "queries_ms", "msm_a_ms", "msm_b_ms",
          "total_ms", "waited_ms", "copy_ms"]
STREAMED = re.compile(
    r"streamed MSM msms=(\d+) pieces=(\d+) streamed_pieces=(\d+) longest=(\d+) buffers=(\d+) "
    r"g2=(\w+) ms=([0-9.]+) sums_ms=([0-9.]+) copy_ms=([0-9.]+) waited_ms=([0-9.]+)")


def median(values):
    return statistics.median(values) if values else 0.0


def report(path):
    text = re.sub(r"\x1b\[[0-9;]*m", "", open(path, encoding="utf-8").read())
    # A run over several device memory caps names each; a single uncapped run names none, and
    # the whole log is that run.
    runs = re.split(r"run \d+ of \d+: device memory", text)[1:] or ["(one run)\n" + text]
    for run in runs:
        cap = run.split("\n", 1)[0].strip()
        starts = []
        for line in run.split("\n"):
            if "proving start" in line and "phases=" in line:
                phases = {k: float(v) for k, v in re.findall(r"(\w+_ms): ([0-9.]+)", line)}
                phases["together"] = "l_with_h: true" in line
                starts.append(phases)
        if not starts:
            continue
        steady = starts[1:] or starts
        together = " (H and L together)" if steady[-1]["together"] else ""
        print(f"{path}: {cap}, {len(starts)} starts{together}")
        print("  " + " ".join(f"{k}={median([s.get(k, 0.0) for s in steady]):.0f}" for k in PHASES))
        shapes = {}
        for m in STREAMED.finditer(run):
            key = (m.group(1), m.group(4), m.group(6))
            shapes.setdefault(key, []).append(
                (int(m.group(2)),) + tuple(float(m.group(i)) for i in (7, 8, 9, 10)))
        for (msms, longest, g2), rows in shapes.items():
            ms, sums, copy, waited = (median([r[i] for r in rows]) for i in range(1, 5))
            print(f"  streamed MSM msms={msms} longest={longest} g2={g2}: {len(rows)} times, "
                  f"{rows[-1][0]} pieces, ms={ms:.0f} sums={sums:.0f} copies={copy:.0f} "
                  f"waited={waited:.0f}")


if __name__ == "__main__":
    if len(sys.argv) < 2:
        sys.exit(__doc__)
    for log in sys.argv[1:]:
        report(log)
