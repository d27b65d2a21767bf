#!/usr/bin/env bash
# Prove a freshly sealed 2 KiB test sector with c2q, locally: no broker, no database; then
# check the proof with `c2q verify`.
# Test parameters are generated on first use into /var/tmp/c2q-test-params (a minute or two).
set -euo pipefail
cd "$(dirname "$0")/.."
cargo build --release --quiet
c2q=./target/release/c2q
export FIL_PROOFS_PARAMETER_CACHE=${FIL_PROOFS_PARAMETER_CACHE:-/var/tmp/c2q-test-params}
"$c2q" params generate --if-missing --proof StackedDrg2KiBV1_1 --dir "$FIL_PROOFS_PARAMETER_CACHE"
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
"$c2q" testdata c1 --miner 1000 --sector 1 --out "$work/c1.json"
"$c2q" prove "$work/c1.json" --miner 1000 --sector 1 --out "$work/proof.bin"
"$c2q" verify "$work/c1.json" "$work/proof.bin" --miner 1000 --sector 1
