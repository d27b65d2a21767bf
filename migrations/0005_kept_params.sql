-- What a worker keeps loaded, what it released, and whether it stalls, as it announces them:
-- `c2q status` and a gateway's GetStatus report them. `resident` (0004) names the circuits;
-- these arrays run beside it, one entry per circuit.
ALTER TABLE workers ADD COLUMN resident_bytes bigint[] NOT NULL DEFAULT '{}';
ALTER TABLE workers ADD COLUMN resident_idle_s bigint[] NOT NULL DEFAULT '{}';
-- The worker's last releases of kept parameters, newest last, as one line each.
ALTER TABLE workers ADD COLUMN evicted text[] NOT NULL DEFAULT '{}';
-- Seconds the worker has held nothing while jobs of its classes were ready; NULL when not.
ALTER TABLE workers ADD COLUMN stalled_s bigint;
