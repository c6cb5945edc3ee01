-- Workers wait for a job instead of polling for one (app/jobs/worker.rs): every enqueue
-- notifies, at commit. Jobs are few, so the NOTIFY's cost (it serializes the commits of
-- the transactions that send one) does not matter here. A job due later (a retry after
-- its backoff) is found by the worker's backstop poll.
CREATE FUNCTION _autumn_jobs_notify() RETURNS trigger
LANGUAGE plpgsql AS $$
BEGIN
    PERFORM pg_notify('autumn_jobs', '');
    RETURN NULL;
END $$;

CREATE TRIGGER _autumn_jobs_enqueued
    AFTER INSERT ON autumn_jobs
    FOR EACH STATEMENT EXECUTE FUNCTION _autumn_jobs_notify();
