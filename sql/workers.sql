-- Workers: live worker processes, for operators and the dashboard.

-- name: workers_register :exec
-- Announce a worker at start.
INSERT INTO pgsched.workers (id, hostname, pid, concurrency)
VALUES (%(id)s::text, %(hostname)s::text, %(pid)s::int, %(concurrency)s::int)
ON CONFLICT (id) DO UPDATE SET heartbeat_at = now()

-- name: workers_heartbeat :exec
-- A worker is alive and running this many executions.
INSERT INTO pgsched.workers (id, hostname, pid, concurrency, running, heartbeat_at)
VALUES (%(id)s::text, %(hostname)s::text, %(pid)s::int, %(concurrency)s::int,
        %(running)s::int, now())
ON CONFLICT (id) DO UPDATE SET running = excluded.running, heartbeat_at = now()

-- name: workers_deregister :exec
-- A worker stopped cleanly.
DELETE FROM pgsched.workers WHERE id = %(id)s::text

-- name: workers_prune :exec
-- Leader only: forget workers silent for longer than `stale`.
DELETE FROM pgsched.workers
 WHERE heartbeat_at < coalesce(%(now)s::timestamptz, now()) - %(stale)s::interval
