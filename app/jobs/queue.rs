//! The `autumn_jobs` table on the control database: enqueue, claim, lease, finish, retry.
//! Every state change is one statement, so two workers can never both own a job.

use std::time::Duration;

use chrono::{DateTime, Utc};
use diesel::QueryableByName;
use diesel::sql_types::{BigInt, Integer, Interval, Jsonb, Nullable, Text, Timestamptz};
use diesel_async::{AsyncPgConnection, RunQueryDsl};
use serde::Serialize;
use serde_json::Value;

use super::Job;

/// One job row.
#[derive(Debug, Clone, QueryableByName, Serialize)]
pub struct JobRow {
    #[diesel(sql_type = BigInt)]
    pub id: i64,
    #[diesel(sql_type = Text)]
    pub kind: String,
    #[diesel(sql_type = Jsonb)]
    pub payload: Value,
    #[diesel(sql_type = Nullable<Text>)]
    pub idempotency_key: Option<String>,
    #[diesel(sql_type = Text)]
    pub state: String,
    #[diesel(sql_type = Integer)]
    pub attempts: i32,
    #[diesel(sql_type = Integer)]
    pub max_attempts: i32,
    #[diesel(sql_type = Timestamptz)]
    pub run_at: DateTime<Utc>,
    #[diesel(sql_type = Nullable<Text>)]
    pub locked_by: Option<String>,
    #[diesel(sql_type = Nullable<Text>)]
    pub last_error: Option<String>,
    #[diesel(sql_type = Nullable<Jsonb>)]
    pub result: Option<Value>,
    #[diesel(sql_type = Timestamptz)]
    pub created_at: DateTime<Utc>,
    #[diesel(sql_type = Timestamptz)]
    pub updated_at: DateTime<Utc>,
    #[diesel(sql_type = Nullable<Timestamptz>)]
    pub finished_at: Option<DateTime<Utc>>,
}

const COLUMNS: &str = "id, kind, payload, idempotency_key, state, attempts, max_attempts, \
     run_at, locked_by, last_error, result, created_at, updated_at, finished_at";

/// What to enqueue: a job as the code knows it, so that what is stored is what
/// [`Job::parse`] reads back.
#[derive(Debug, Clone)]
pub struct NewJob<'a> {
    pub job: &'a Job,
    pub idempotency_key: Option<&'a str>,
    pub max_attempts: i32,
}

/// Enqueues a job; with an idempotency key already used, returns that job instead.
/// The flag says whether this call created it.
pub async fn enqueue(
    conn: &mut AsyncPgConnection,
    job: &NewJob<'_>,
) -> diesel::QueryResult<(JobRow, bool)> {
    let created: Option<JobRow> = diesel::sql_query(format!(
        "INSERT INTO autumn_jobs (kind, payload, idempotency_key, max_attempts) \
         VALUES ($1, $2, $3, $4) ON CONFLICT (idempotency_key) DO NOTHING RETURNING {COLUMNS}"
    ))
    .bind::<Text, _>(job.job.kind())
    .bind::<Jsonb, _>(job.job.payload())
    .bind::<Nullable<Text>, _>(job.idempotency_key)
    .bind::<Integer, _>(job.max_attempts)
    .get_result(conn)
    .await
    .optional()?;
    if let Some(row) = created {
        return Ok((row, true));
    }
    let existing = diesel::sql_query(format!(
        "SELECT {COLUMNS} FROM autumn_jobs WHERE idempotency_key = $1"
    ))
    .bind::<Nullable<Text>, _>(job.idempotency_key)
    .get_result(conn)
    .await?;
    Ok((existing, false))
}

use diesel::OptionalExtension;

/// Enqueues `jobs` in one statement, skipping those whose idempotency key is already
/// used; returns how many it created.
pub async fn enqueue_many(
    conn: &mut AsyncPgConnection,
    jobs: &[NewJob<'_>],
) -> diesel::QueryResult<usize> {
    use diesel::sql_types::Array;
    if jobs.is_empty() {
        return Ok(0);
    }
    let kinds: Vec<&str> = jobs.iter().map(|j| j.job.kind()).collect();
    let payloads: Vec<String> = jobs.iter().map(|j| j.job.payload().to_string()).collect();
    let keys: Vec<Option<&str>> = jobs.iter().map(|j| j.idempotency_key).collect();
    let attempts: Vec<i32> = jobs.iter().map(|j| j.max_attempts).collect();
    diesel::sql_query(
        "INSERT INTO autumn_jobs (kind, payload, idempotency_key, max_attempts) \
         SELECT k, p::jsonb, i, m FROM unnest($1::text[], $2::text[], $3::text[], $4::int[]) \
         AS j(k, p, i, m) ON CONFLICT (idempotency_key) DO NOTHING",
    )
    .bind::<Array<Text>, _>(kinds)
    .bind::<Array<Text>, _>(payloads)
    .bind::<Array<Nullable<Text>>, _>(keys)
    .bind::<Array<Integer>, _>(attempts)
    .execute(conn)
    .await
}

/// Claims the oldest due job (or one whose lease ran out) for `worker`, under a lease.
pub async fn claim(
    conn: &mut AsyncPgConnection,
    worker: &str,
    lease: Duration,
) -> diesel::QueryResult<Option<JobRow>> {
    diesel::sql_query(format!(
        "UPDATE autumn_jobs SET state = 'running', attempts = attempts + 1, locked_by = $1, \
         locked_until = now() + $2, updated_at = now() \
         WHERE id = (SELECT id FROM autumn_jobs \
                     WHERE (state = 'queued' AND run_at <= now()) \
                        OR (state = 'running' AND locked_until < now()) \
                     ORDER BY run_at, id LIMIT 1 FOR UPDATE SKIP LOCKED) \
         RETURNING {COLUMNS}"
    ))
    .bind::<Text, _>(worker)
    .bind::<Interval, _>(interval(lease))
    .get_result(conn)
    .await
    .optional()
}

/// Extends the lease of a job `worker` still owns; false when it no longer does.
pub async fn heartbeat(
    conn: &mut AsyncPgConnection,
    id: i64,
    worker: &str,
    lease: Duration,
) -> diesel::QueryResult<bool> {
    let n = diesel::sql_query(
        "UPDATE autumn_jobs SET locked_until = now() + $3, updated_at = now() \
         WHERE id = $1 AND state = 'running' AND locked_by = $2",
    )
    .bind::<BigInt, _>(id)
    .bind::<Text, _>(worker)
    .bind::<Interval, _>(interval(lease))
    .execute(conn)
    .await?;
    Ok(n == 1)
}

/// Marks a job `worker` owns as done, keeping its result.
pub async fn complete(
    conn: &mut AsyncPgConnection,
    id: i64,
    worker: &str,
    result: &Value,
) -> diesel::QueryResult<bool> {
    let n = diesel::sql_query(
        "UPDATE autumn_jobs SET state = 'done', result = $3, locked_by = NULL, \
         locked_until = NULL, last_error = NULL, finished_at = now(), updated_at = now() \
         WHERE id = $1 AND state = 'running' AND locked_by = $2",
    )
    .bind::<BigInt, _>(id)
    .bind::<Text, _>(worker)
    .bind::<Jsonb, _>(result)
    .execute(conn)
    .await?;
    Ok(n == 1)
}

/// Records a failed attempt: a retry after `backoff`, or `dead` once attempts are used up.
/// Returns the job's new state.
pub async fn fail(
    conn: &mut AsyncPgConnection,
    id: i64,
    worker: &str,
    error: &str,
    backoff: Duration,
) -> diesel::QueryResult<Option<String>> {
    #[derive(QueryableByName)]
    struct State {
        #[diesel(sql_type = Text)]
        state: String,
    }
    let row: Option<State> = diesel::sql_query(
        "UPDATE autumn_jobs SET \
           state = CASE WHEN attempts >= max_attempts THEN 'dead' ELSE 'queued' END, \
           run_at = CASE WHEN attempts >= max_attempts THEN run_at ELSE now() + $4 END, \
           finished_at = CASE WHEN attempts >= max_attempts THEN now() END, \
           last_error = $3, locked_by = NULL, locked_until = NULL, updated_at = now() \
         WHERE id = $1 AND state = 'running' AND locked_by = $2 RETURNING state",
    )
    .bind::<BigInt, _>(id)
    .bind::<Text, _>(worker)
    .bind::<Text, _>(error)
    .bind::<Interval, _>(interval(backoff))
    .get_result(conn)
    .await
    .optional()?;
    Ok(row.map(|r| r.state))
}

/// The newest jobs, all or in one state.
pub async fn list(
    conn: &mut AsyncPgConnection,
    state: Option<&str>,
    limit: i64,
) -> diesel::QueryResult<Vec<JobRow>> {
    diesel::sql_query(format!(
        "SELECT {COLUMNS} FROM autumn_jobs WHERE $1::text IS NULL OR state = $1 \
         ORDER BY id DESC LIMIT $2"
    ))
    .bind::<Nullable<Text>, _>(state)
    .bind::<BigInt, _>(limit)
    .load(conn)
    .await
}

/// Puts a dead job back in the queue with fresh attempts; false when it is not dead.
pub async fn retry(conn: &mut AsyncPgConnection, id: i64) -> diesel::QueryResult<bool> {
    let n = diesel::sql_query(
        "UPDATE autumn_jobs SET state = 'queued', attempts = 0, run_at = now(), \
         finished_at = NULL, updated_at = now() WHERE id = $1 AND state = 'dead'",
    )
    .bind::<BigInt, _>(id)
    .execute(conn)
    .await?;
    Ok(n == 1)
}

/// How many jobs are in each state (every state listed, zeros included).
pub async fn counts(conn: &mut AsyncPgConnection) -> diesel::QueryResult<Vec<(String, i64)>> {
    #[derive(QueryableByName)]
    struct Row {
        #[diesel(sql_type = Text)]
        state: String,
        #[diesel(sql_type = BigInt)]
        n: i64,
    }
    let rows: Vec<Row> = diesel::sql_query(
        "SELECT s.state, count(j.id) AS n \
         FROM unnest(ARRAY['queued', 'running', 'done', 'dead']) AS s(state) \
         LEFT JOIN autumn_jobs j ON j.state = s.state GROUP BY s.state ORDER BY s.state",
    )
    .load(conn)
    .await?;
    Ok(rows.into_iter().map(|r| (r.state, r.n)).collect())
}

fn interval(d: Duration) -> diesel::data_types::PgInterval {
    diesel::data_types::PgInterval::from_microseconds(d.as_micros() as i64)
}
