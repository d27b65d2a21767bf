#!/usr/bin/env python3
"""A c2q job producer written from schemas/ alone: pika, msgpack, zstandard.

    C2Q_AMQP_URL=amqp://guest:guest@127.0.0.1:5672/%2f \
    python3 producer.py --c1 c1.json --miner 1000 --sector 7 --prefix c2q --wait --out proof.bin

Accepts the raw C1 JSON (filecoin-ffi's SealCommitPhase1Output) or lotus-bench's Commit2In;
`--canary N --seed S` submits a canary job (the worker's built-in health-check circuit) instead.

The workers declare the topology: the job exchange exists once a worker (or `c2q submit`) has
started, and this producer only checks that it does (a passive declare). With `--wait` the
result comes to a reply queue of this producer's own, durable and expiring when unused
(`x-expires`), so that it and a result in it survive a broker restart: the producer reconnects
with backoff and keeps waiting until `--timeout`, then deletes the queue.
Results may arrive more than once (at-least-once delivery): deduplicate by job_id.
"""

import argparse
import base64
import hashlib
import json
import os
import random
import sys
import time
import uuid

import msgpack
import pika
import zstandard

# What a broker restart or a lost connection raises; the wait reconnects after any of them.
BROKER_GONE = (pika.exceptions.AMQPConnectionError, pika.exceptions.AMQPChannelError)


def read_c1(path):
    with open(path, "rb") as f:
        raw = f.read()
    doc = json.loads(raw)
    if isinstance(doc, dict) and "Phase1Out" in doc:
        raw = base64.b64decode(doc["Phase1Out"])
        doc = json.loads(raw)
    return raw, doc["registered_proof"]


# Size classes (schemas/README.md): the routing key that sends a job to the workers that can
# hold it. PoRep by sector size, canaries by the smallest bucket holding their partitions.
SECTOR_CLASSES = {"2KiB": "porep-2k", "8MiB": "porep-8m", "512MiB": "porep-512m",
                  "32GiB": "porep-32g", "64GiB": "porep-64g"}
CANARY_BUCKETS = (1, 4, 16, 64)


def size_class(job):
    """The job's routing key: its size class, or "job" (the unsorted queue) if none holds it."""
    if job["kind"] == "canary":
        n = job["canary"]["partitions"]
        return next(("canary-%d" % b for b in CANARY_BUCKETS if 1 <= n <= b), "job")
    proof = job["registered_proof"]
    size = proof[len("StackedDrg"):].split("V1")[0] if proof.startswith("StackedDrg") else ""
    return SECTOR_CLASSES.get(size, "job")


def build_job(args):
    if args.canary is not None:
        seed = args.seed if args.seed is not None else time.time_ns() % (1 << 63)
        key = b"canary:%d:%d" % (args.canary, seed)
        job_id = args.job_id or "%d-%d-%s" % (args.miner, args.sector, hashlib.sha256(key).hexdigest()[:12])
        return {
            "v": 1,
            "job_id": job_id,
            "kind": "canary",
            "registered_proof": "canary",
            "miner_id": args.miner,
            "sector_number": args.sector,
            "canary": {"partitions": args.canary, "seed": seed},
        }
    c1, registered_proof = read_c1(args.c1)
    job_id = args.job_id or "%d-%d-%s" % (args.miner, args.sector, hashlib.sha256(c1).hexdigest()[:12])
    return {
        "v": 1,
        "job_id": job_id,
        "kind": "porep-c2",
        "registered_proof": registered_proof,
        "miner_id": args.miner,
        "sector_number": args.sector,
        "phase1_output": zstandard.ZstdCompressor(level=3).compress(c1),
    }


def declare_reply_queue(ch, name, expires_ms):
    # Durable and not exclusive: an exclusive or auto-delete queue is deleted with the
    # connection, so a broker restart would take the result with it. x-expires removes it
    # if this producer never comes back for it. Declaring it again with the same arguments,
    # as every reconnection does, is a no-op.
    ch.queue_declare(queue=name, durable=True, arguments={"x-expires": expires_ms})


def is_ours(result, job_id):
    # A message that reused our job id for a different payload is answered with a result of
    # its own identity and `reused_job_id` set (schemas/README.md).
    return result.get("job_id") == job_id or result.get("reused_job_id") == job_id


def wait_for_result(url, reply_to, expires_ms, job_id, deadline):
    """The first result for `job_id` on `reply_to`, reconnecting with exponential backoff and
    jitter whenever the broker goes away, until `deadline`. None on timeout."""
    backoff = 0.2
    while time.time() < deadline:
        conn = None
        try:
            conn = pika.BlockingConnection(pika.URLParameters(url))
            ch = conn.channel()
            declare_reply_queue(ch, reply_to, expires_ms)
            backoff = 0.2
            found = {}

            def on_message(channel, method, properties, payload):
                result = msgpack.unpackb(payload, raw=False)
                if is_ours(result, job_id) and "result" not in found:
                    found["result"] = result
                channel.basic_ack(method.delivery_tag)

            ch.basic_consume(queue=reply_to, on_message_callback=on_message)
            while "result" not in found and time.time() < deadline:
                conn.process_data_events(time_limit=1)
            if "result" in found:
                # Acked already: return it even if the broker goes away again now (the
                # queue then expires by itself).
                try:
                    ch.queue_delete(queue=reply_to)
                    conn.close()
                except BROKER_GONE:
                    pass
                return found["result"]
            conn.close()
            return None
        except BROKER_GONE as e:
            wait = min(backoff, max(0.0, deadline - time.time())) * random.uniform(0.5, 1.5)
            print("broker unavailable (%s); reconnecting in %.1f s" % (type(e).__name__, wait), file=sys.stderr)
            backoff = min(backoff * 2, 10.0)
            if conn is not None and conn.is_open:
                try:
                    conn.close()
                except BROKER_GONE:
                    pass
            time.sleep(wait)
    return None


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    what = ap.add_mutually_exclusive_group(required=True)
    what.add_argument("--c1")
    what.add_argument("--canary", type=int, metavar="PARTITIONS")
    ap.add_argument("--seed", type=int, help="canary seed (default: from the clock)")
    ap.add_argument("--miner", type=int, required=True)
    ap.add_argument("--sector", type=int, required=True)
    ap.add_argument("--job-id")
    ap.add_argument("--prefix", default="c2q")
    ap.add_argument("--wait", action="store_true")
    ap.add_argument("--out", default="proof.bin")
    ap.add_argument("--timeout", type=float, default=3600)
    args = ap.parse_args()

    job = build_job(args)
    job_id = job["job_id"]
    body = msgpack.packb(job, use_bin_type=True)

    url = os.environ.get("C2Q_AMQP_URL", "amqp://guest:guest@127.0.0.1:5672/%2f")
    conn = pika.BlockingConnection(pika.URLParameters(url))
    ch = conn.channel()
    try:
        ch.exchange_declare(exchange=args.prefix + ".jobs", passive=True)
    except pika.exceptions.ChannelClosedByBroker as e:
        print("exchange %s.jobs does not exist: start a c2q worker first, it declares the "
              "topology (%s)" % (args.prefix, e), file=sys.stderr)
        return 3
    ch.confirm_delivery()
    reply_to = None
    # The reply queue outlives the wait by a minute, so it cannot expire while this producer
    # is still reconnecting to it.
    expires_ms = int((args.timeout + 60) * 1000)
    if args.wait:
        reply_to = "%s.reply.%s" % (args.prefix, uuid.uuid4())
        declare_reply_queue(ch, reply_to, expires_ms)
    props = pika.BasicProperties(
        content_type="application/msgpack",
        delivery_mode=2,
        message_id=job_id,
        reply_to=reply_to,
        timestamp=int(time.time()),
    )
    # mandatory + confirms: an exception unless the broker routed and stored the job.
    ch.basic_publish(args.prefix + ".jobs", size_class(job), body, properties=props, mandatory=True)
    conn.close()
    if job["kind"] == "canary":
        print("submitted canary", job_id, "seed", job["canary"]["seed"], file=sys.stderr)
    else:
        print("submitted", job_id, file=sys.stderr)
    if not args.wait:
        return 0

    result = wait_for_result(url, reply_to, expires_ms, job_id, time.time() + args.timeout)
    if result is None:
        print("timed out waiting for", job_id, file=sys.stderr)
        return 2
    if result["status"] == "ok":
        with open(args.out, "wb") as f:
            f.write(result["proof"])
    summary = {k: v for k, v in result.items() if k not in ("proof", "timings")}
    summary["partitions"] = len(result.get("timings", []))
    print(json.dumps(summary))
    return 0 if result["status"] == "ok" else 1


if __name__ == "__main__":
    sys.exit(main())
