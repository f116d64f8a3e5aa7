-- Stats: what `pgsched status`, the dashboard and the /metrics database gauges show.
-- They read the operator views (migration 0004), so psql shows the same numbers.
-- `%(owner_id)s` NULL means every owner (an admin, or the operator).

-- name: stats_queue :many
-- Queue depth and the oldest due-but-unclaimed age, per priority.
SELECT priority,
       sum(due)::bigint AS due,
       sum(scheduled)::bigint AS scheduled,
       sum(running)::bigint AS running,
       max(oldest_due_seconds) AS oldest_due_seconds
  FROM pgsched.queue_stats
 WHERE owner_id = coalesce(%(owner_id)s::bigint, owner_id)
 GROUP BY priority
 ORDER BY priority DESC

-- name: stats_cluster :one
-- The cluster's health: dead letters, partitions, live workers and the leader.
SELECT (SELECT count(*) FROM pgsched.dead_letters
         WHERE owner_id = coalesce(%(owner_id)s::bigint, owner_id)) AS dead_letters,
       (SELECT count(*) FROM pg_inherits
         WHERE inhparent = 'pgsched.runs'::regclass) AS partitions,
       (SELECT count(*) FROM pgsched.workers_live) AS workers_live,
       (SELECT worker_id FROM pgsched.workers_live WHERE is_leader) AS leader_id,
       now() AS at

-- name: stats_minutes :many
-- The last hour by minute: runs started and their start lateness (p50/p95/p99, in
-- seconds), runs finished succeeded and failed. Runs due more than a day ago are left
-- out so that only the recent partitions are read.
WITH recent AS (
    SELECT due_at, started_at, finished_at, state
      FROM pgsched.runs
     WHERE due_at > now() - interval '1 day'
       AND owner_id = coalesce(%(owner_id)s::bigint, owner_id)
       AND (started_at > now() - interval '1 hour' OR finished_at > now() - interval '1 hour')
), started AS (
    SELECT date_trunc('minute', started_at) AS minute,
           count(*) AS started,
           percentile_cont(0.5) WITHIN GROUP (ORDER BY extract(epoch FROM started_at - due_at))
               AS p50,
           percentile_cont(0.95) WITHIN GROUP (ORDER BY extract(epoch FROM started_at - due_at))
               AS p95,
           percentile_cont(0.99) WITHIN GROUP (ORDER BY extract(epoch FROM started_at - due_at))
               AS p99
      FROM recent
     WHERE started_at > now() - interval '1 hour'
     GROUP BY 1
), finished AS (
    SELECT date_trunc('minute', finished_at) AS minute,
           count(*) FILTER (WHERE state = 'succeeded') AS succeeded,
           count(*) FILTER (WHERE state IN ('failed', 'timed_out', 'lost')) AS failed
      FROM recent
     WHERE finished_at > now() - interval '1 hour'
     GROUP BY 1
)
SELECT m.minute, coalesce(s.started, 0) AS started, s.p50, s.p95, s.p99,
       coalesce(f.succeeded, 0) AS succeeded, coalesce(f.failed, 0) AS failed
  FROM generate_series(date_trunc('minute', now()) - interval '59 minutes',
                       date_trunc('minute', now()), interval '1 minute') AS m(minute)
  LEFT JOIN started AS s USING (minute)
  LEFT JOIN finished AS f USING (minute)
 ORDER BY m.minute

-- name: stats_workers :many
-- Live workers, the leader first.
SELECT worker_id, hostname, pid, concurrency, running, started_at, heartbeat_at,
       extract(epoch FROM heartbeat_age)::float8 AS heartbeat_age_seconds, is_leader
  FROM pgsched.workers_live
 ORDER BY is_leader DESC, worker_id
