-- A gateway's clients name their jobs with request ids of their own, which need not be valid
-- job ids (Curio's WindowPoSt ids hold spaces and brackets): the gateway maps each to a job id
-- and keeps the client's text here, so that a client awaits and cancels by it. Several jobs
-- may share one (the partitions of a deadline that Curio sends under one id). Kept as the UTF-8
-- bytes the client sent: any text, NUL included, which a text column cannot hold.
ALTER TABLE jobs ADD COLUMN request_id bytea;
-- When a client last asked for the job: of the jobs sharing a request id, the one asked for
-- last is the one that id names.
ALTER TABLE jobs ADD COLUMN requested_at timestamptz;
-- When the job was last put on the queue by a gateway (accepted, or asked for again after a
-- failure or a cancellation): where the times reported to the client count from.
ALTER TABLE jobs ADD COLUMN submitted_at timestamptz;
-- Where the proving worker's time went (`StageTimes` of the result message, in ms).
ALTER TABLE jobs ADD COLUMN stage_ms jsonb;
CREATE INDEX jobs_request_id_idx ON jobs (request_id, requested_at)
    WHERE request_id IS NOT NULL;
