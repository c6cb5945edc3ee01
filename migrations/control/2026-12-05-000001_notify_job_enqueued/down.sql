DROP TRIGGER _autumn_jobs_enqueued ON autumn_jobs;
DROP FUNCTION _autumn_jobs_notify();
