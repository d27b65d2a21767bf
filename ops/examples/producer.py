#!/usr/bin/env python3
"""A c2q job producer written from schemas/job.v1.schema.json alone: pika, msgpack, zstandard.

    C2Q_AMQP_URL=amqp://guest:guest@127.0.0.1:5672/%2f \
    python3 producer.py --c1 c1.json --miner 1000 --sector 7 --prefix c2q --wait --out proof.bin

Accepts the raw C1 JSON (filecoin-ffi's SealCommitPhase1Output) or lotus-bench's Commit2In.
Results may arrive more than once (at-least-once delivery): deduplicate by job_id.
"""

import argparse
import base64
import hashlib
import json
import os
import sys
import time
import uuid

import msgpack
import pika
import zstandard


def read_c1(path):
    with open(path, "rb") as f:
        raw = f.read()
    doc = json.loads(raw)
    if isinstance(doc, dict) and "Phase1Out" in doc:
        raw = base64.b64decode(doc["Phase1Out"])
        doc = json.loads(raw)
    return raw, doc["registered_proof"]


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--c1", required=True)
    ap.add_argument("--miner", type=int, required=True)
    ap.add_argument("--sector", type=int, required=True)
    ap.add_argument("--job-id")
    ap.add_argument("--prefix", default="c2q")
    ap.add_argument("--wait", action="store_true")
    ap.add_argument("--out", default="proof.bin")
    ap.add_argument("--timeout", type=float, default=3600)
    args = ap.parse_args()

    c1, registered_proof = read_c1(args.c1)
    job_id = args.job_id or "%d-%d-%s" % (args.miner, args.sector, hashlib.sha256(c1).hexdigest()[:12])
    job = {
        "v": 1,
        "job_id": job_id,
        "kind": "porep-c2",
        "registered_proof": registered_proof,
        "miner_id": args.miner,
        "sector_number": args.sector,
        "phase1_output": zstandard.ZstdCompressor(level=3).compress(c1),
    }
    body = msgpack.packb(job, use_bin_type=True)

    url = os.environ.get("C2Q_AMQP_URL", "amqp://guest:guest@127.0.0.1:5672/%2f")
    conn = pika.BlockingConnection(pika.URLParameters(url))
    ch = conn.channel()
    ch.confirm_delivery()
    reply_to = None
    if args.wait:
        reply_to = "%s.reply.%s" % (args.prefix, uuid.uuid4())
        ch.queue_declare(queue=reply_to, exclusive=True, auto_delete=True)
    props = pika.BasicProperties(
        content_type="application/msgpack",
        delivery_mode=2,
        message_id=job_id,
        reply_to=reply_to,
        timestamp=int(time.time()),
    )
    # mandatory + confirms: an exception unless the broker routed and stored the job.
    ch.basic_publish(args.prefix + ".jobs", "job", body, properties=props, mandatory=True)
    print("submitted", job_id, file=sys.stderr)
    if not args.wait:
        conn.close()
        return 0

    found = {}

    def on_message(channel, method, properties, payload):
        result = msgpack.unpackb(payload, raw=False)
        if result.get("job_id") == job_id and "result" not in found:
            found["result"] = result

    ch.basic_consume(queue=reply_to, on_message_callback=on_message, auto_ack=True)
    deadline = time.time() + args.timeout
    while "result" not in found and time.time() < deadline:
        conn.process_data_events(time_limit=1)
    conn.close()
    if "result" not in found:
        print("timed out waiting for", job_id, file=sys.stderr)
        return 2
    result = found["result"]
    if result["status"] == "ok":
        with open(args.out, "wb") as f:
            f.write(result["proof"])
    summary = {k: v for k, v in result.items() if k not in ("proof", "timings")}
    summary["partitions"] = len(result.get("timings", []))
    print(json.dumps(summary))
    return 0 if result["status"] == "ok" else 1


if __name__ == "__main__":
    sys.exit(main())
