-- Partitions of runs and run_logs (the functions are made by migration 0001). Both take
-- the database clock, which decides every time in pgsched.

-- name: partitions_ensure :one
-- Make the partitions that cover [now - behind, now + ahead), aligned to the span.
SELECT pgsched.ensure_partitions(coalesce(%(now)s::timestamptz, now()) - %(behind)s::interval,
                                 coalesce(%(now)s::timestamptz, now()) + %(ahead)s::interval,
                                 %(minutes)s::int) AS made

-- name: partitions_drop_expired :many
-- Drop partitions that ended more than `retention` ago and hold no queued or running run.
SELECT suffix
  FROM pgsched.drop_partitions(coalesce(%(now)s::timestamptz, now()) - %(retention)s::interval)
       AS suffix
