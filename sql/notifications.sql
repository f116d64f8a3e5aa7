-- Notifications: the webhook outbox. Rows are written with the run's final state
-- (runs_complete, runs_reclaim) and delivered by every worker's notifier.

-- name: notifications_claim :many
-- Take due deliveries; the lease (next_attempt_at pushed ahead) makes a crashed
-- notifier's deliveries due again for another, so none is lost.
WITH picked AS (
    SELECT id
      FROM pgsched.notifications
     WHERE state = 'pending'
       AND next_attempt_at <= coalesce(%(now)s::timestamptz, now())
     ORDER BY next_attempt_at
     LIMIT %(limit)s::int
       FOR UPDATE SKIP LOCKED
)
UPDATE pgsched.notifications AS n
   SET attempts = n.attempts + 1,
       next_attempt_at = coalesce(%(now)s::timestamptz, now()) + %(lease)s::interval
  FROM picked
 WHERE n.id = picked.id
RETURNING n.id, n.url, n.event, n.payload, n.attempts,
          (SELECT u.webhook_secret FROM pgsched.users AS u WHERE u.id = n.owner_id) AS secret

-- name: notifications_record :exec
-- Record delivery attempts in one statement: delivered, retried after its backoff, or
-- given up after the last attempt; each attempt is appended to the history.
UPDATE pgsched.notifications AS n
   SET state = CASE WHEN r.ok THEN 'delivered'
                    WHEN n.attempts >= %(max_attempts)s::int THEN 'failed'
                    ELSE 'pending' END,
       delivered_at = CASE WHEN r.ok THEN now() END,
       next_attempt_at = now() + make_interval(secs => r.retry_in),
       last_status = r.status,
       last_error = r.error,
       history = n.history || jsonb_build_array(jsonb_build_object(
           'attempt', n.attempts, 'at', now(), 'status', r.status, 'error', r.error))
  FROM unnest(%(ids)b::bigint[], %(oks)b::bool[], %(statuses)b::int[], %(errors)b::text[],
              %(retry_in)b::float8[]) AS r(id, ok, status, error, retry_in)
 WHERE n.id = r.id

-- name: notifications_list_for_job :many
-- A job's deliveries and their attempts, if the owner may see the job.
SELECT n.id, n.run_id, n.event, n.url, n.state, n.attempts, n.last_status, n.last_error,
       n.history, n.created_at, n.delivered_at
  FROM pgsched.notifications AS n
  JOIN pgsched.jobs AS j ON j.id = n.job_id
 WHERE n.job_id = %(job_id)s::bigint
   AND j.owner_id = coalesce(%(owner_id)s::bigint, j.owner_id)
 ORDER BY n.id DESC
 LIMIT %(limit)s::int
