-- The job queue. Framework state, so it lives on the control database and is never
-- sharded: a job carries the tenant key and resolves the shard when it runs, through the
-- same router as requests, so a job enqueued before a tenant moved runs where it lives now.
--
-- A worker claims the oldest due job with FOR UPDATE SKIP LOCKED (competing workers never
-- wait on each other or run a job twice), holds it under a lease it renews while the job
-- runs, and finishes it (done), schedules a retry with exponential backoff, or buries it
-- (dead, with the last error) after max_attempts. A lease that runs out (its worker died)
-- makes the job claimable again.
CREATE TABLE autumn_jobs (
    id              BIGSERIAL   PRIMARY KEY,
    kind            TEXT        NOT NULL,
    payload         JSONB       NOT NULL DEFAULT '{}',
    -- Enqueueing the same key twice makes one job.
    idempotency_key TEXT        UNIQUE,
    state           TEXT        NOT NULL DEFAULT 'queued'
        CHECK (state IN ('queued', 'running', 'done', 'dead')),
    attempts        INTEGER     NOT NULL DEFAULT 0,
    max_attempts    INTEGER     NOT NULL DEFAULT 5 CHECK (max_attempts > 0),
    run_at          TIMESTAMPTZ NOT NULL DEFAULT now(),
    locked_by       TEXT,
    locked_until    TIMESTAMPTZ,
    last_error      TEXT,
    result          JSONB,
    created_at      TIMESTAMPTZ NOT NULL DEFAULT now(),
    updated_at      TIMESTAMPTZ NOT NULL DEFAULT now(),
    finished_at     TIMESTAMPTZ
);

-- The claim query: due queued jobs, and running jobs whose lease ran out.
CREATE INDEX autumn_jobs_due ON autumn_jobs (run_at, id) WHERE state = 'queued';
CREATE INDEX autumn_jobs_leased ON autumn_jobs (locked_until) WHERE state = 'running';
