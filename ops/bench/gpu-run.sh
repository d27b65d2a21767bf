#!/usr/bin/env bash
# One GPU-machine session of c2q, from a prebuilt binary (no toolchain there):
#   ops/bench/gpu-run.sh check BIN OUTDIR   correctness: `quick`, then `porep`
#   ops/bench/gpu-run.sh quick BIN OUTDIR   gpu-check (kernels against the CPU) on every GPU, and
#                                           at 2^27 and 2^28 (--large-log) on the first
#   ops/bench/gpu-run.sh porep BIN OUTDIR   PoRep and SnapDeals proofs cpu = cuda, a 13-partition job on one
#                                           and all GPUs, synthetic and V1 sectors on the GPU, then `post`
#   ops/bench/gpu-run.sh post BIN OUTDIR    2 KiB WindowPoSt partitions (full and padded) and a
#                                           WinningPoSt through `c2q prove` on the GPU, each checked
#                                           by `c2q verify`
#   ops/bench/gpu-run.sh time BIN OUTDIR    timings: MSM phases at 2^27, the full `c2q bench gpu`
#                                           table (its partition start records the 32 GiB
#                                           constraints into the parameter dir first, ~2 min,
#                                           unless there), a 13-partition job on one and all GPUs
#   ops/bench/gpu-run.sh pipeline BIN OUTDIR  `c2q bench pipeline` on full-size shape-only jobs
#                                           ($C2Q_BENCH_PROOF, default StackedDrg32GiBV1_1, or
#                                           StackedDrg32GiBV1's update with C2Q_BENCH_SNAP=1;
#                                           $C2Q_BENCH_JOBS jobs, default 2; an urgent PoSt job
#                                           among them with C2Q_BENCH_URGENT=<PoSt proof>;
#                                           device memory caps with C2Q_BENCH_GPU_GIB, comma
#                                           separated, e.g. all,80,48, one run each) on every
#                                           GPU; the constraints are recorded into a parameter
#                                           dir on the machine's disk; $RUST_LOG if set (e.g.
#                                           c2q=info,c2q::gpu::backend=debug for each start's
#                                           phases), else c2q=info
#   ops/bench/gpu-run.sh tune BIN OUTDIR    NTT and MSM at 2^27 for each kernel variant listed
#                                           in $C2Q_TUNE (`;`-separated C2Q_KERNEL_DEFINES values,
#                                           an empty one being the default build)
# Every step's full output goes to OUTDIR; the short table is printed last.
set -uo pipefail
phase=$1 bin=$2 out=$3
mkdir -p "$out"
export FIL_PROOFS_PARAMETER_CACHE=/var/tmp/c2q-test-params
summary=()
step() { # name, command...: runs it, logs it, remembers its status and time
  local name=$1; shift
  local t0=$SECONDS
  "$@" >"$out/$name.log" 2>&1
  local rc=$?
  summary+=("$(printf '%-34s rc=%-3s %4ss  %s' "$name" "$rc" $((SECONDS - t0)) "$(tail -n1 "$out/$name.log")")")
  return $rc
}
gpus=$(nvidia-smi -L | wc -l)
nvidia-smi -L >"$out/devices.txt"

# A 13-partition non-interactive 2 KiB sector, proved on GPU 0, then on every GPU at once.
prove_ni() {
  local ni=StackedDrg2KiBV1_2_Feat_NonInteractivePoRep
  step params-ni "$bin" params generate --if-missing --proof "$ni" --dir "$FIL_PROOFS_PARAMETER_CACHE"
  step seal-ni "$bin" testdata c1 --proof "$ni" --miner 1000 --sector 7 --seed "$RANDOM" --out /tmp/ni.json
  step prove-ni-gpu0 "$bin" prove /tmp/ni.json --miner 1000 --sector 7 --backend cuda --device 0 --json --out /tmp/ni0.proof
  local all
  all=$(seq -s, 0 $((gpus - 1)))
  step "prove-ni-gpus-${all//,/-}" "$bin" prove /tmp/ni.json --miner 1000 --sector 7 --backend cuda --device "$all" --json --out /tmp/ni-all.proof
  # The other interactive kinds (same circuit and parameters as V1_1), on the GPU.
  for kind in StackedDrg2KiBV1_1_Feat_SyntheticPoRep StackedDrg2KiBV1; do
    step "seal-$kind" "$bin" testdata c1 --proof "$kind" --miner 1000 --sector 8 --seed "$RANDOM" --out "/tmp/$kind.json"
    step "prove-$kind" "$bin" prove "/tmp/$kind.json" --miner 1000 --sector 8 --backend cuda --json --out "/tmp/$kind.proof"
  done
  # A SnapDeals update through `c2q prove` on the GPU, checked by `c2q verify`.
  step params-snap "$bin" params generate --if-missing --snap --proof StackedDrg2KiBV1 --dir "$FIL_PROOFS_PARAMETER_CACHE"
  step testdata-snap "$bin" testdata snap --seed "$RANDOM" --out /tmp/snap.json
  step prove-snap "$bin" prove /tmp/snap.json --backend cuda --json --out /tmp/snap.proof
  step verify-snap "$bin" verify /tmp/snap.json /tmp/snap.proof
}

# 2 KiB PoSt through `c2q prove` on the GPU: a full WindowPoSt partition, one padded from a
# single sector, and a WinningPoSt, each checked by `c2q verify` (filecoin-proofs' verifier).
prove_post() {
  step params-window "$bin" params generate --if-missing --post --proof StackedDrgWindow2KiBV1_2 --dir "$FIL_PROOFS_PARAMETER_CACHE"
  step params-winning "$bin" params generate --if-missing --post --proof StackedDrgWinning2KiBV1 --dir "$FIL_PROOFS_PARAMETER_CACHE"
  local name args
  for name in window window-padded winning; do
    case $name in
    window) args=() ;;
    window-padded) args=(--sectors 1) ;;
    winning) args=(--winning) ;;
    esac
    step "testdata-$name" "$bin" testdata post "${args[@]}" --seed "$RANDOM" --out "/tmp/$name.json"
    step "prove-$name" "$bin" prove "/tmp/$name.json" --backend cuda --json --out "/tmp/$name.proof"
    step "verify-$name" "$bin" verify "/tmp/$name.json" "/tmp/$name.proof"
  done
}

case $phase in
all)
  "$0" check "$bin" "$out/check" && "$0" time "$bin" "$out/time"
  exit $?
  ;;
check)
  "$0" quick "$bin" "$out/quick" && "$0" porep "$bin" "$out/porep"
  exit $?
  ;;
quick)
  for d in $(seq 0 $((gpus - 1))); do
    step "gpu-check-dev$d" "$bin" gpu-check --device "$d" --seed "$RANDOM$d"
  done
  # Full size on the first GPU: a partition's domain, and the largest supported size.
  for l in 27 28; do
    step "gpu-check-large-2-$l" "$bin" gpu-check --device 0 --seed "$RANDOM" --large-log "$l"
  done
  ;;
porep)
  step gpu-check-sectors "$bin" gpu-check --sectors --seed "$RANDOM"
  prove_ni
  prove_post
  ;;
post)
  step gpu-check-dev0 "$bin" gpu-check --device 0 --seed "$RANDOM"
  prove_post
  ;;
tune)
  IFS=';' read -r -a variants <<<"${C2Q_TUNE:-}"
  # `read` drops a trailing empty field: "X;" means X, then the default build.
  [[ "${C2Q_TUNE:-}" == *";" ]] && variants+=("")
  [ ${#variants[@]} -eq 0 ] && variants=("")
  k=0
  for v in "${variants[@]}"; do
    k=$((k + 1))
    step "tune-$k" env C2Q_KERNEL_DEFINES="$v" "$bin" bench gpu --min-log 27 --max-log 27 --reps 5 --no-partition
    summary+=("  defines '${v}': $(grep -E '^(ntt forward|msm full-width|msm porep-like) ' "$out/tune-$k.log" | awk '{printf "%s %s %s ms; ", $1, $2, $4}')")
  done
  ;;
pipeline)
  all=$(seq -s, 0 $((gpus - 1)))
  # The recorded constraints go beside (absent) parameters on the machine's own disk.
  export FIL_PROOFS_PARAMETER_CACHE=/var/tmp/c2q-bench-params
  mkdir -p "$FIL_PROOFS_PARAMETER_CACHE"
  extra=()
  proof=${C2Q_BENCH_PROOF:-StackedDrg32GiBV1_1}
  # An update proof is named by its sector's registered proof, not the PoRep's V1_1.
  [ -n "${C2Q_BENCH_SNAP:-}" ] && extra+=(--snap) && proof=${C2Q_BENCH_PROOF:-StackedDrg32GiBV1}
  [ -n "${C2Q_BENCH_URGENT:-}" ] && extra+=(--urgent "$C2Q_BENCH_URGENT")
  [ -n "${C2Q_BENCH_GPU_GIB:-}" ] && extra+=(--gpu-memory-gib "$C2Q_BENCH_GPU_GIB")
  step bench-pipeline env RUST_LOG="${RUST_LOG:-c2q=info}" "$bin" bench pipeline --proof "$proof" \
    --jobs "${C2Q_BENCH_JOBS:-2}" --device "$all" --json "${extra[@]}"
  grep '^|' "$out/bench-pipeline.log" | sed -n '/^| what/,$p' >"$out/table.md"
  summary+=("$(cat "$out/table.md")")
  ;;
time)
  step msm-trace-2-27 env C2Q_MSM_TRACE=1 "$bin" bench gpu --min-log 27 --max-log 27 --reps 3 --no-ntt --no-partition
  step bench-table "$bin" bench gpu --reps 5
  prove_ni
  ;;
*)
  echo "usage: $0 check|time|all BIN OUTDIR" >&2
  exit 2
  ;;
esac
printf '%s\n' "${summary[@]}"
