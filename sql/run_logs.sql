-- Run logs: captured output and handler log lines, bounded per run by the worker.

-- name: run_logs_list :many
-- The log lines of one run, in order, if the owner may see the run.
SELECT l.seq, l.at, l.stream, l.line
  FROM pgsched.run_logs AS l
  JOIN pgsched.runs AS r ON r.id = l.run_id AND r.due_at = l.run_due_at
  JOIN pgsched.jobs AS j ON j.id = r.job_id
 WHERE l.run_id = %(run_id)s::bigint
   AND j.owner_id = coalesce(%(owner_id)s::bigint, j.owner_id)
 ORDER BY l.seq
 LIMIT %(limit)s::int
