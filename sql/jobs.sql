-- Jobs: what users create. `next_run_at` is the planner's cursor: the next slot not yet
-- materialised as a run; NULL when the schedule has nothing more to give.

-- name: jobs_insert :one
-- Create a job. With an idempotency key the owner already used, nothing is inserted
-- and no row comes back (the caller then returns the existing job).
INSERT INTO pgsched.jobs (owner_id, name, message, schedule_kind, execute_at, cron,
                          interval_seconds, anchor_at, timezone, executor, task, payload,
                          timeout_seconds, max_attempts, backoff_base_seconds,
                          backoff_max_seconds, priority, overlap, misfire,
                          starting_deadline_seconds, next_run_at, idempotency_key,
                          notify_url, notify_on_success, notify_on_failure)
VALUES (%(owner_id)s::bigint, %(name)s::text, %(message)s::text,
        %(schedule_kind)s::pgsched.schedule_kind, %(execute_at)s::timestamptz,
        %(cron)s::text, %(interval_seconds)s::float8, %(anchor_at)s::timestamptz,
        %(timezone)s::text, %(executor)s::pgsched.executor_kind, %(task)s::text,
        %(payload)s::jsonb, %(timeout_seconds)s::float8, %(max_attempts)s::int,
        %(backoff_base_seconds)s::float8, %(backoff_max_seconds)s::float8,
        %(priority)s::smallint, %(overlap)s::pgsched.overlap_policy,
        %(misfire)s::pgsched.misfire_policy, %(starting_deadline_seconds)s::float8,
        %(next_run_at)s::timestamptz, %(idempotency_key)s::text, %(notify_url)s::text,
        %(notify_on_success)s::bool, %(notify_on_failure)s::bool)
ON CONFLICT (owner_id, idempotency_key) DO NOTHING
RETURNING *

-- name: jobs_get_by_idempotency_key :one
-- The job an owner created earlier with this idempotency key.
SELECT * FROM pgsched.jobs
 WHERE owner_id = %(owner_id)s::bigint
   AND idempotency_key = %(idempotency_key)s::text

-- name: jobs_get :one
-- One job with its latest run's state, if the owner may see it (owner_id NULL: an
-- operator sees every job).
SELECT j.*, u.username AS owner, last.state AS last_run_state
  FROM pgsched.jobs AS j
  JOIN pgsched.users AS u ON u.id = j.owner_id
  LEFT JOIN LATERAL (
        SELECT r.state
          FROM pgsched.runs AS r
         WHERE r.job_id = j.id
         ORDER BY r.slot_at DESC, r.attempt DESC
         LIMIT 1
  ) AS last ON true
 WHERE j.id = %(id)s::bigint
   AND j.owner_id = coalesce(%(owner_id)s::bigint, j.owner_id)

-- name: jobs_list :many
-- Jobs, newest first, with their latest run's state; keyset paginated by id; filtered
-- by state and by a part of the name.
SELECT j.*, u.username AS owner, last.state AS last_run_state,
       last.finished_at AS last_run_finished_at
  FROM pgsched.jobs AS j
  JOIN pgsched.users AS u ON u.id = j.owner_id
  LEFT JOIN LATERAL (
        SELECT r.state, r.finished_at
          FROM pgsched.runs AS r
         WHERE r.job_id = j.id
         ORDER BY r.slot_at DESC, r.attempt DESC
         LIMIT 1
  ) AS last ON true
 WHERE j.owner_id = coalesce(%(owner_id)s::bigint, j.owner_id)
   AND j.id < coalesce(%(before_id)s::bigint, 9223372036854775807)
   AND (%(state)s::pgsched.job_state IS NULL OR j.state = %(state)s::pgsched.job_state)
   AND (%(name)s::text IS NULL OR strpos(lower(j.name), lower(%(name)s::text)) > 0)
 ORDER BY j.id DESC
 LIMIT %(limit)s::int

-- name: jobs_cancel :one
-- Cancel a job: it plans nothing more. Its runs are cancelled by runs_cancel_for_job in
-- the same transaction.
UPDATE pgsched.jobs
   SET state = 'cancelled', next_run_at = NULL,
       updated_at = coalesce(%(now)s::timestamptz, now())
 WHERE id = %(id)s::bigint
   AND owner_id = coalesce(%(owner_id)s::bigint, owner_id)
   AND state IN ('active', 'paused')
RETURNING id

-- name: jobs_plan_claim :many
-- Lock the jobs whose next slot falls inside the horizon. SKIP LOCKED lets every worker
-- run a planner at once: each takes a disjoint set of jobs, and none waits for another.
SELECT j.id, j.owner_id, j.schedule_kind, j.execute_at, j.cron, j.interval_seconds,
       j.anchor_at, j.timezone, j.next_run_at, j.priority, j.misfire, j.overlap,
       j.starting_deadline_seconds, coalesce(%(now)s::timestamptz, now()) AS db_now
  FROM pgsched.jobs AS j
 WHERE j.state = 'active'
   AND j.next_run_at IS NOT NULL
   AND j.next_run_at <= coalesce(%(now)s::timestamptz, now()) + %(horizon)s::interval
   AND (%(job_ids)b::bigint[] IS NULL OR j.id = ANY(%(job_ids)b::bigint[]))
 ORDER BY j.next_run_at
 LIMIT %(limit)s::int
   FOR UPDATE SKIP LOCKED

-- name: jobs_plan_advance :exec
-- Move the planner's cursor of each planned job past the slots it materialised.
UPDATE pgsched.jobs AS j
   SET next_run_at = a.next_run_at
  FROM unnest(%(ids)b::bigint[], %(next_run_ats)b::timestamptz[]) AS a(id, next_run_at)
 WHERE j.id = a.id

-- name: jobs_overlap_gate :one
-- Admit a run of a forbid/replace job: the job row lock serialises concurrent gates. If
-- the job's active run is still running, `forbid` refuses this one; `replace` admits it
-- and asks the active run to stop (flag + NOTIFY), and the caller waits for it to end.
WITH job AS MATERIALIZED (
    SELECT id, overlap, active_run_id, active_run_due_at
      FROM pgsched.jobs
     WHERE id = %(job_id)s::bigint
       FOR UPDATE
), previous AS MATERIALIZED (
    SELECT r.id, r.due_at
      FROM pgsched.runs AS r, job
     WHERE r.id = job.active_run_id
       AND r.due_at = job.active_run_due_at
       AND r.state = 'running'
       AND r.id <> %(run_id)s::bigint
), admitted AS (
    UPDATE pgsched.jobs AS j
       SET active_run_id = %(run_id)s::bigint, active_run_due_at = %(due_at)s::timestamptz
      FROM job
     WHERE j.id = job.id
       AND (job.overlap = 'replace' OR NOT EXISTS (SELECT 1 FROM previous))
    RETURNING j.id
), stopping AS (
    UPDATE pgsched.runs AS r
       SET cancel_requested = true
      FROM previous, job
     WHERE job.overlap = 'replace'
       AND r.id = previous.id
       AND r.due_at = previous.due_at
    RETURNING r.id
)
SELECT EXISTS (SELECT 1 FROM admitted) AS admitted,
       (SELECT id FROM previous) AS previous_id,
       (SELECT due_at FROM previous) AS previous_due_at,
       pg_notify('pgsched_cancel', coalesce((SELECT string_agg(id::text, ',') FROM stopping), ''))
           AS notified

-- name: jobs_set_state :one
-- Pause (active -> paused) or resume (paused -> active, with a new cursor).
UPDATE pgsched.jobs
   SET state = %(to_state)s::pgsched.job_state,
       next_run_at = CASE WHEN %(to_state)s::pgsched.job_state = 'active'
                          THEN %(next_run_at)s::timestamptz ELSE next_run_at END,
       updated_at = now()
 WHERE id = %(id)s::bigint
   AND owner_id = coalesce(%(owner_id)s::bigint, owner_id)
   AND state = %(from_state)s::pgsched.job_state
RETURNING *

-- name: jobs_update :one
-- Replace a job's schedule and policies (an edit); the caller re-plans it.
UPDATE pgsched.jobs
   SET name = %(name)s::text, message = %(message)s::text,
       schedule_kind = %(schedule_kind)s::pgsched.schedule_kind,
       execute_at = %(execute_at)s::timestamptz, cron = %(cron)s::text,
       interval_seconds = %(interval_seconds)s::float8, anchor_at = %(anchor_at)s::timestamptz,
       timezone = %(timezone)s::text, executor = %(executor)s::pgsched.executor_kind,
       task = %(task)s::text, payload = %(payload)s::jsonb,
       timeout_seconds = %(timeout_seconds)s::float8, max_attempts = %(max_attempts)s::int,
       backoff_base_seconds = %(backoff_base_seconds)s::float8,
       backoff_max_seconds = %(backoff_max_seconds)s::float8,
       priority = %(priority)s::smallint, overlap = %(overlap)s::pgsched.overlap_policy,
       misfire = %(misfire)s::pgsched.misfire_policy,
       starting_deadline_seconds = %(starting_deadline_seconds)s::float8,
       next_run_at = %(next_run_at)s::timestamptz,
       notify_url = %(notify_url)s::text, notify_on_success = %(notify_on_success)s::bool,
       notify_on_failure = %(notify_on_failure)s::bool,
       state = CASE WHEN state IN ('completed', 'dead') THEN 'active' ELSE state END,
       updated_at = now()
 WHERE id = %(id)s::bigint
   AND owner_id = coalesce(%(owner_id)s::bigint, owner_id)
   AND state <> 'cancelled'
RETURNING *

-- name: jobs_delete :one
-- Delete a job (its runs were cancelled first; their history ages out with retention).
DELETE FROM pgsched.jobs
 WHERE id = %(id)s::bigint
   AND owner_id = coalesce(%(owner_id)s::bigint, owner_id)
RETURNING id
