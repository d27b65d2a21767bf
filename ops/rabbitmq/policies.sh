#!/bin/sh
# Broker policies for a c2q prefix (default c2q). The worker declares its queues with explicit
# arguments (x-delivery-limit, dead-letter exchange, per-level retry queues); these policies
# add what is better changed without redeclaring, and document the intended values.
set -eu
P=${1:-c2q}
VHOST=${VHOST:-/}
# Job queue: poison messages go to the DLQ after 5 deliveries (also set as x-delivery-limit),
# at-least-once dead-lettering so a dead letter is never dropped.
rabbitmqctl set_policy -p "$VHOST" --apply-to queues --priority 10 "$P-jobs" "^$P\.jobs$" \
  "{\"delivery-limit\":5,\"dead-letter-exchange\":\"$P.dlx\",\"dead-letter-strategy\":\"at-least-once\",\"overflow\":\"reject-publish\"}"
# Results are kept for a week for consumers that were away.
rabbitmqctl set_policy -p "$VHOST" --apply-to queues --priority 10 "$P-results" "^$P\.results$" \
  '{"message-ttl":604800000}'
# Dead letters are kept until an operator replays or purges them (no TTL, no length limit).
