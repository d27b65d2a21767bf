-- Jobs a gateway accepted are recorded before they are enqueued ('queued'), so that a client
-- waiting on one is told it is known before a worker takes it, and a cancellation has a row
-- to land on. A cancelled job is not proved when a worker fetches it; one cancelled while it
-- was being proved keeps its proof, but is answered as cancelled until it is submitted again.
ALTER TABLE jobs DROP CONSTRAINT IF EXISTS jobs_status_check;
ALTER TABLE jobs ADD CONSTRAINT jobs_status_check
    CHECK (status IN ('queued', 'running', 'proved', 'published', 'failed', 'cancelled'));
ALTER TABLE jobs ADD COLUMN cancelled_at timestamptz;

-- The circuits whose parameters (SRS) a worker holds loaded, by circuit id ('porep-32g'), as
-- it announces them: what a gateway reports for the fleet.
ALTER TABLE workers ADD COLUMN resident text[] NOT NULL DEFAULT '{}';
