DROP TABLE autumn_jobs;
