-- Leases: the worker proving a job holds it until lease_until and renews it while it works, so
-- a second delivery of the same job (a duplicate message, or a redelivery after the first
-- worker's channel closed) waits instead of being proved again. A worker that dies stops
-- renewing; once its lease has expired another worker takes the job over.
ALTER TABLE jobs
    -- The process holding the lease: worker name and a per-process token, so that a restarted
    -- worker with the same name does not mistake its predecessor's lease for its own.
    ADD COLUMN lease_holder text,
    -- NULL when nobody holds the job (not started, finished, or handed back).
    ADD COLUMN lease_until  timestamptz;
