-- The job ledger: one row per job id, the record that makes delivery idempotent.
CREATE TABLE jobs (
    job_id           text PRIMARY KEY,
    kind             text NOT NULL,
    registered_proof text NOT NULL,
    miner_id         bigint NOT NULL,
    sector_number    bigint NOT NULL,
    -- SHA-256 of the decompressed C1 and every field that changes the proof.
    c1_digest        bytea NOT NULL,
    status           text NOT NULL
                     CHECK (status IN ('running', 'proved', 'published', 'failed')),
    -- Times a worker started on this job (redeliveries and retries included).
    attempts         integer NOT NULL DEFAULT 0,
    -- Times a proof was computed: stays 1 when redeliveries are answered from the ledger.
    proofs_computed  integer NOT NULL DEFAULT 0,
    worker           text,
    created_at       timestamptz NOT NULL DEFAULT now(),
    started_at       timestamptz,
    proved_at        timestamptz,
    published_at     timestamptz,
    updated_at       timestamptz NOT NULL DEFAULT now(),
    error_kind       text,
    error_message    text,
    proof            bytea,
    timings          jsonb
);

CREATE INDEX jobs_status_idx ON jobs (status);
