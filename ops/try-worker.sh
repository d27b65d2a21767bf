#!/usr/bin/env bash
# Run a c2q worker against the local RabbitMQ (127.0.0.1:5672, guest) and PostgreSQL
# (127.0.0.1:5432, database test), push a canary job and a freshly sealed 2 KiB PoRep job
# through it, print the results, check both proofs with `c2q verify`, then drain the worker
# with SIGTERM.
set -euo pipefail
cd "$(dirname "$0")/.."
cargo build --release --quiet
c2q=./target/release/c2q
export FIL_PROOFS_PARAMETER_CACHE=${FIL_PROOFS_PARAMETER_CACHE:-/var/tmp/c2q-test-params}
export C2Q__BROKER__URL=${C2Q__BROKER__URL:-amqp://127.0.0.1:5672/%2f}
export C2Q__BROKER__USERNAME=${C2Q__BROKER__USERNAME:-guest}
export C2Q_AMQP_PASSWORD=${C2Q_AMQP_PASSWORD:-guest}
export C2Q__BROKER__PREFIX=${C2Q__BROKER__PREFIX:-c2q-try}
export C2Q__LEDGER__URL=${C2Q__LEDGER__URL:-host=127.0.0.1 user=postgres dbname=test}
export C2Q__LEDGER__SCHEMA=${C2Q__LEDGER__SCHEMA:-c2q_try}
export C2Q__TELEMETRY__LOG_FORMAT=human
# This trial proves 2 KiB sectors only, so the memory gate can admit them on a small machine.
export C2Q__LIMITS__MAX_SECTOR_SIZE=${C2Q__LIMITS__MAX_SECTOR_SIZE:-2048}
"$c2q" params generate --if-missing --proof StackedDrg2KiBV1_1 --dir "$FIL_PROOFS_PARAMETER_CACHE"

work=$(mktemp -d)
"$c2q" worker --config compose/worker.toml &
worker=$!
trap 'kill -TERM $worker 2>/dev/null; wait $worker 2>/dev/null; rm -rf "$work"' EXIT

canary_seed=$RANDOM
"$c2q" submit --config compose/worker.toml --canary --partitions 4 --seed "$canary_seed" \
  --miner 1000 --sector 1 --wait --timeout 600 --out "$work/canary.proof"
"$c2q" verify --canary --seed "$canary_seed" "$work/canary.proof"
"$c2q" testdata c1 --miner 1000 --sector 2 --seed "$RANDOM" --out "$work/c1.json"
"$c2q" submit --config compose/worker.toml "$work/c1.json" --miner 1000 --sector 2 \
  --wait --timeout 600 --out "$work/sector-2.proof"
"$c2q" verify "$work/c1.json" "$work/sector-2.proof" --miner 1000 --sector 2
"$c2q" status --config compose/worker.toml
