#!/usr/bin/env bash
# One GPU-machine session of c2q, from a prebuilt binary (no toolchain there):
#   ops/bench/gpu-run.sh check BIN OUTDIR   correctness: gpu-check on every GPU, PoRep proofs
#                                           cpu = cuda, a 13-partition job on one and all GPUs
#   ops/bench/gpu-run.sh time BIN OUTDIR    timings: NTT and MSM launch variants at 2^27, then
#                                           the full `c2q bench gpu` table
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
}

case $phase in
check)
  for d in $(seq 0 $((gpus - 1))); do
    step "gpu-check-dev$d" "$bin" gpu-check --device "$d" --seed "$RANDOM$d"
  done
  step gpu-check-porep "$bin" gpu-check --porep --seed "$RANDOM"
  prove_ni
  ;;
time)
  v() { # label, env assignments...: one NTT or MSM timing at 2^27 under the given knobs
    local label=$1; shift
    step "$label" env "$@" "$bin" bench gpu --min-log 27 --max-log 27 --reps 5 --no-partition \
      $([[ $label == ntt* ]] && echo --no-msm || echo --no-ntt)
  }
  v ntt-default
  v ntt-run2 C2Q_NTT_RUN=2
  v ntt-run1 C2Q_NTT_RUN=1
  v ntt-run0 C2Q_NTT_RUN=0
  v ntt-radix2 C2Q_NTT_RADIX=2
  v ntt-occ3 C2Q_NTT_OCC3=1
  v ntt-bitrev-simple C2Q_NTT_BITREV=simple
  v msm-rounds-default C2Q_MSM_TRACE=1
  v msm-rounds0 C2Q_MSM_AFFINE_ROUNDS=0 C2Q_MSM_TRACE=1
  v msm-rounds2 C2Q_MSM_AFFINE_ROUNDS=2 C2Q_MSM_TRACE=1
  v msm-rounds3 C2Q_MSM_AFFINE_ROUNDS=3 C2Q_MSM_TRACE=1
  step bench-table "$bin" bench gpu --reps 5
  prove_ni
  ;;
*)
  echo "usage: $0 check|time BIN OUTDIR" >&2
  exit 2
  ;;
esac
printf '%s\n' "${summary[@]}"
