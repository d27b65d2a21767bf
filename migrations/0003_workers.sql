-- Workers announce themselves every few seconds with the size classes they fetch, so that
-- `c2q status` and every worker's metrics can tell a class whose jobs no running worker takes.
-- A row is one worker process; a worker that stops says so, one that dies stops announcing.
CREATE TABLE IF NOT EXISTS workers (
    -- The process: worker name and a per-process id (as a lease holder).
    token      text PRIMARY KEY,
    name       text NOT NULL,
    -- Size class keys, largest first (`porep-32g`, `canary-4`, ...).
    classes    text[] NOT NULL,
    -- The proving backends, as the worker names them (`cuda:0 (NVIDIA H200)`, `cpu`).
    backend    text NOT NULL,
    started_at timestamptz NOT NULL DEFAULT now(),
    seen_at    timestamptz NOT NULL DEFAULT now(),
    stopped    boolean NOT NULL DEFAULT false
);
CREATE INDEX IF NOT EXISTS workers_seen_at ON workers (seen_at);
