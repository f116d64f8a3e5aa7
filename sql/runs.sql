-- Runs: the queue and the history. Every write after the claim is fenced by
-- (id, due_at, attempt, worker_id, state = 'running'): a worker that lost its lease
-- updates nothing. `%(now)s` is NULL in production (the database clock decides) and a
-- fixed time in tests.

-- name: runs_claim :many
-- Claim up to `limit` due runs for one worker, in claim order, and lease them.
-- The CTE exists because UPDATE has no ORDER BY/LIMIT: it picks and locks the rows, with
-- SKIP LOCKED so concurrent claimers pass over each other's rows instead of waiting, and
-- the UPDATE takes exactly those. [floor, ceiling) is the worker's cached window around
-- the queued due times (runs_queue_window): as parameters, not now(), they let the
-- planner prune every other partition before planning them, on both sides of the join,
-- so the claim costs the same with 2 or 500 partitions present. runs_claim_idx serves
-- the order.
WITH picked AS (
    SELECT id, due_at
      FROM pgsched.runs
     WHERE state = 'queued'
       AND due_at <= coalesce(%(now)s::timestamptz, now())
       AND due_at >= %(floor)s::timestamptz
       AND due_at < %(ceiling)s::timestamptz
     ORDER BY priority DESC, vft, due_at
     LIMIT %(limit)s::int
       FOR UPDATE SKIP LOCKED
), claimed AS (
    UPDATE pgsched.runs AS r
       SET state = 'running',
           worker_id = %(worker_id)s::text,
           started_at = coalesce(%(now)s::timestamptz, now()),
           lease_expires_at = coalesce(%(now)s::timestamptz, now()) + %(lease)s::interval
      FROM picked, pgsched.jobs AS j
     WHERE r.id = picked.id
       AND r.due_at = picked.due_at
       AND r.due_at >= %(floor)s::timestamptz
       AND r.due_at < %(ceiling)s::timestamptz
       AND j.id = r.job_id
    RETURNING r.id, r.due_at, r.attempt, r.job_id, r.owner_id, r.slot_at, r.started_at,
              r.vft, j.executor::text, j.task, j.payload, j.message, j.timeout_seconds,
              j.max_attempts, j.backoff_base_seconds, j.backoff_max_seconds, j.overlap::text
), ticked AS (
    -- Fair share: system virtual time follows the work being served (one row write per
    -- claim statement, and none when it would not move).
    UPDATE pgsched.fair_clock
       SET v = (SELECT max(vft) FROM claimed)
     WHERE id = 1
       AND v < (SELECT max(vft) FROM claimed)
)
SELECT * FROM claimed

-- name: runs_heartbeat :many
-- Renew the leases of the runs one worker holds, in one statement; returns those still
-- held (a missing one was reclaimed: its execution must stop) and their cancel flag.
UPDATE pgsched.runs AS r
   SET lease_expires_at = coalesce(%(now)s::timestamptz, now()) + %(lease)s::interval
  FROM unnest(%(ids)b::bigint[], %(due_ats)b::timestamptz[], %(attempts)b::int[])
       AS h(id, due_at, attempt)
 WHERE r.id = h.id
   AND r.due_at = h.due_at
   AND r.attempt = h.attempt
   AND r.worker_id = %(worker_id)s::text
   AND r.state = 'running'
RETURNING r.id, r.cancel_requested

-- name: runs_complete :many
-- Record a batch of outcomes in one round trip and one transaction: the fenced state
-- change, the next attempt of each retriable failure (due after its backoff, in database
-- time), the captured log lines, and the final state of one-off jobs. Returns the runs
-- whose outcome was taken; a fenced-out run is simply absent.
WITH outcome AS (
    SELECT *
      FROM unnest(%(ids)b::bigint[], %(due_ats)b::timestamptz[], %(attempts)b::int[],
                  %(states)b::pgsched.run_state[], %(errors)b::text[],
                  %(retry_in)b::float8[])
           AS o(id, due_at, attempt, state, error, retry_in)
),
done AS (
    UPDATE pgsched.runs AS r
       SET state = o.state,
           finished_at = coalesce(%(now)s::timestamptz, now()),
           error = o.error,
           lease_expires_at = NULL,
           dead = (o.state IN ('failed', 'timed_out') AND o.retry_in IS NULL)
      FROM outcome AS o
     WHERE r.id = o.id
       AND r.due_at = o.due_at
       AND r.attempt = o.attempt
       AND r.worker_id = %(worker_id)s::text
       AND r.state = 'running'
    RETURNING r.id, r.due_at, r.job_id, r.owner_id, r.slot_at, r.attempt, r.priority, r.vft,
              r.state, r.dead, r.error, r.finished_at, o.retry_in
),
retried AS (
    INSERT INTO pgsched.runs (due_at, job_id, owner_id, slot_at, attempt, priority, vft)
    SELECT coalesce(%(now)s::timestamptz, now()) + make_interval(secs => d.retry_in),
           d.job_id, d.owner_id, d.slot_at, d.attempt + 1, d.priority, d.vft
      FROM done AS d
     WHERE d.retry_in IS NOT NULL
       AND d.state IN ('failed', 'timed_out')
    ON CONFLICT DO NOTHING
    RETURNING id
),
logged AS (
    INSERT INTO pgsched.run_logs (run_id, run_due_at, seq, at, stream, line)
    SELECT l.run_id, l.run_due_at, l.seq, l.at, l.stream, l.line
      FROM unnest(%(log_run_ids)b::bigint[], %(log_due_ats)b::timestamptz[],
                  %(log_seqs)b::int[], %(log_ats)b::timestamptz[],
                  %(log_streams)b::pgsched.log_stream[], %(log_lines)b::text[])
           AS l(run_id, run_due_at, seq, at, stream, line)
      JOIN done AS d ON d.id = l.run_id AND d.due_at = l.run_due_at
    ON CONFLICT DO NOTHING
    RETURNING 1
),
ended_jobs AS (
    UPDATE pgsched.jobs AS j
       SET state = CASE WHEN d.dead THEN 'dead' ELSE 'completed' END::pgsched.job_state,
           updated_at = coalesce(%(now)s::timestamptz, now())
      FROM done AS d
     WHERE j.id = d.job_id
       AND j.schedule_kind = 'once'
       AND j.state = 'active'
       AND (d.state = 'succeeded' OR d.dead)
    RETURNING j.id
),
outbox AS (
    -- Webhooks go out through the outbox, committed with the final state they report.
    INSERT INTO pgsched.notifications (owner_id, job_id, run_id, event, url, payload)
    SELECT d.owner_id, d.job_id, d.id, e.event, j.notify_url,
           jsonb_build_object('event', e.event, 'job_id', d.job_id, 'run_id', d.id,
                              'attempt', d.attempt, 'state', d.state, 'slot_at', d.slot_at,
                              'finished_at', d.finished_at, 'error', d.error)
      FROM done AS d
      JOIN pgsched.jobs AS j ON j.id = d.job_id
      CROSS JOIN LATERAL (SELECT CASE WHEN d.state = 'succeeded' THEN 'run.succeeded'
                                      ELSE 'run.failed' END AS event) AS e
     WHERE j.notify_url IS NOT NULL
       AND ((d.state = 'succeeded' AND j.notify_on_success)
            OR (d.dead AND j.notify_on_failure))
    ON CONFLICT DO NOTHING
    RETURNING 1
)
SELECT d.id, d.job_id, d.attempt, d.state::text, d.dead,
       (SELECT count(*) FROM retried) AS retried,
       (SELECT count(*) FROM logged) AS logged,
       (SELECT count(*) FROM ended_jobs) AS ended_jobs,
       (SELECT count(*) FROM outbox) AS notified,
       -- live event streams (SSE) learn which owners' runs changed; identical payloads
       -- in one transaction are sent once
       pg_notify('pgsched_events', (SELECT string_agg(DISTINCT owner_id::text, ',') FROM done))
           AS events
  FROM done AS d

-- name: runs_release :one
-- Give runs back to the queue (graceful shutdown past its grace period) and wake the
-- workers that can take them. The attempt is unchanged: nothing failed.
WITH released AS (
    UPDATE pgsched.runs AS r
       SET state = 'queued',
           worker_id = NULL,
           lease_expires_at = NULL,
           started_at = NULL
      FROM unnest(%(ids)b::bigint[], %(due_ats)b::timestamptz[], %(attempts)b::int[])
           AS h(id, due_at, attempt)
     WHERE r.id = h.id
       AND r.due_at = h.due_at
       AND r.attempt = h.attempt
       AND r.worker_id = %(worker_id)s::text
       AND r.state = 'running'
    RETURNING r.due_at
)
SELECT count(*) AS released,
       pg_notify('pgsched_runs', coalesce(extract(epoch FROM min(due_at))::text, '0')) AS notified
  FROM released

-- name: runs_reclaim :many
-- Leader only: runs whose lease expired become `lost`; each gets its next attempt, due
-- now, or, with no attempts left, is a dead letter (and a one-off job is dead). Expiry is
-- re-checked inside the UPDATE: a heartbeat that committed after the pick wins.
WITH expired AS (
    SELECT id, due_at
      FROM pgsched.runs
     WHERE state = 'running'
       AND lease_expires_at < coalesce(%(now)s::timestamptz, now())
     ORDER BY lease_expires_at
     LIMIT %(limit)s::int
       FOR UPDATE SKIP LOCKED
),
lost AS (
    UPDATE pgsched.runs AS r
       SET state = 'lost',
           finished_at = coalesce(%(now)s::timestamptz, now()),
           error = 'lease expired: worker ' || coalesce(r.worker_id, '?') || ' stopped renewing',
           lease_expires_at = NULL,
           dead = (r.attempt >= j.max_attempts)
      FROM expired AS e, pgsched.jobs AS j
     WHERE r.id = e.id
       AND r.due_at = e.due_at
       AND j.id = r.job_id
       AND r.state = 'running'
       AND r.lease_expires_at < coalesce(%(now)s::timestamptz, now())
    RETURNING r.id, r.job_id, r.owner_id, r.slot_at, r.attempt, r.priority, r.vft,
              r.worker_id, r.dead
),
retried AS (
    INSERT INTO pgsched.runs (due_at, job_id, owner_id, slot_at, attempt, priority, vft)
    SELECT coalesce(%(now)s::timestamptz, now()), l.job_id, l.owner_id, l.slot_at,
           l.attempt + 1, l.priority, l.vft
      FROM lost AS l
     WHERE NOT l.dead
    ON CONFLICT DO NOTHING
    RETURNING id
),
dead_jobs AS (
    UPDATE pgsched.jobs AS j
       SET state = 'dead', updated_at = coalesce(%(now)s::timestamptz, now())
      FROM lost AS l
     WHERE j.id = l.job_id
       AND l.dead
       AND j.schedule_kind = 'once'
       AND j.state = 'active'
    RETURNING j.id
),
outbox AS (
    INSERT INTO pgsched.notifications (owner_id, job_id, run_id, event, url, payload)
    SELECT l.owner_id, l.job_id, l.id, 'run.failed', j.notify_url,
           jsonb_build_object('event', 'run.failed', 'job_id', l.job_id, 'run_id', l.id,
                              'attempt', l.attempt, 'state', 'lost', 'slot_at', l.slot_at,
                              'error', 'lease expired')
      FROM lost AS l
      JOIN pgsched.jobs AS j ON j.id = l.job_id
     WHERE l.dead AND j.notify_url IS NOT NULL AND j.notify_on_failure
    ON CONFLICT DO NOTHING
    RETURNING 1
)
SELECT l.id, l.job_id, l.attempt, l.worker_id, l.dead,
       (SELECT count(*) FROM retried) AS retried,
       (SELECT count(*) FROM outbox) AS notified
  FROM lost AS l

-- name: runs_next_due :one
-- The earliest future due time of a queued run, and the database's clock, so an idle
-- worker can sleep exactly until then. runs_due_idx serves it.
SELECT min(due_at) AS due_at, coalesce(%(now)s::timestamptz, now()) AS db_now
  FROM pgsched.runs
 WHERE state = 'queued'
   AND due_at > coalesce(%(now)s::timestamptz, now())

-- name: runs_queue_window :one
-- The claim's window: `floor` is a lower bound of every queued run's due time (new runs
-- are never inserted due earlier than now() - margin: runs_insert_slots clamps), and
-- `ceiling` lies far enough ahead to stay above now() until the worker refreshes it.
SELECT least(min(due_at), coalesce(%(now)s::timestamptz, now()) - %(margin)s::interval)
       AS floor,
       coalesce(%(now)s::timestamptz, now()) + %(ahead)s::interval AS ceiling
  FROM pgsched.runs
 WHERE state = 'queued'

-- name: runs_insert_slots :execrows
-- Materialise slots as runs (first attempts), in one statement for any number of jobs.
-- Fair share (stride scheduling): each owner is charged 1/job_weight of virtual time per
-- queued run, starting from max(its last finish, the system's virtual time), and each
-- run carries its virtual finish time (vft), which the claim orders by. Owners' rows are
-- locked in id order first, so concurrent batches cannot deadlock. A slot long past is
-- made due at now() - margin so its row lands in a partition that exists; ON CONFLICT on
-- (job, slot, attempt, due) makes planning a slot twice a no-op. With `wake` 'deferred'
-- the insert trigger's NOTIFY is left to the caller, to send after the commit
-- (app.store.waker); the setting lasts until the transaction ends. No RETURNING: its
-- callers need only the count (returning 10,000 rows cost a tenth of a bulk insert).
WITH wake AS MATERIALIZED (
    SELECT set_config('pgsched.wake', %(wake)s::text, true)
), s AS (
    SELECT u.*,
           row_number() OVER (PARTITION BY owner_id, state ORDER BY slot_at, n) AS k
      FROM unnest(%(job_ids)b::bigint[], %(owner_ids)b::bigint[], %(slot_ats)b::timestamptz[],
                  %(priorities)b::smallint[], %(states)b::pgsched.run_state[],
                  %(errors)b::text[])
           WITH ORDINALITY AS u(job_id, owner_id, slot_at, priority, state, error, n),
           wake
), owners AS MATERIALIZED (
    SELECT u.id
      FROM pgsched.users AS u
     WHERE u.id IN (SELECT owner_id FROM s WHERE state = 'queued')
     ORDER BY u.id
       FOR UPDATE
), charged AS (
    UPDATE pgsched.users AS u
       SET vfinish = greatest(u.vfinish, c.v) + q.cnt / u.job_weight
      FROM (SELECT owner_id, count(*) AS cnt FROM s WHERE state = 'queued' GROUP BY owner_id)
           AS q,
           pgsched.fair_clock AS c,
           owners AS o
     WHERE u.id = q.owner_id
       AND o.id = u.id
    RETURNING u.id, u.vfinish - q.cnt / u.job_weight AS start, u.job_weight
)
INSERT INTO pgsched.runs (due_at, job_id, owner_id, slot_at, priority, state, error,
                          finished_at, vft)
SELECT greatest(s.slot_at, coalesce(%(now)s::timestamptz, now()) - %(margin)s::interval),
       s.job_id, s.owner_id, s.slot_at, s.priority, s.state, s.error,
       CASE WHEN s.state = 'queued' THEN NULL ELSE coalesce(%(now)s::timestamptz, now()) END,
       CASE WHEN s.state = 'queued' THEN c.start + s.k / c.job_weight ELSE 0 END
  FROM s
  LEFT JOIN charged AS c ON c.id = s.owner_id
ON CONFLICT DO NOTHING

-- name: runs_insert_one :one
-- One queued first attempt: runs_insert_slots for a single run, without the arrays, the
-- window and the grouping that many runs need (a third of its cost for one run, measured
-- from four clients). The charge is the same: vft = max(the owner's last finish, the
-- system's virtual time) + 1/job_weight, and that is the owner's new last finish.
WITH wake AS MATERIALIZED (
    SELECT set_config('pgsched.wake', %(wake)s::text, true)
), charged AS (
    UPDATE pgsched.users AS u
       SET vfinish = greatest(u.vfinish, c.v) + 1 / u.job_weight
      FROM pgsched.fair_clock AS c, wake
     WHERE u.id = %(owner_id)s::bigint
    RETURNING u.vfinish AS vft
)
INSERT INTO pgsched.runs (due_at, job_id, owner_id, slot_at, priority, state, vft)
SELECT greatest(%(slot_at)s::timestamptz, now() - %(margin)s::interval),
       %(job_id)s::bigint, %(owner_id)s::bigint, %(slot_at)s::timestamptz,
       %(priority)s::smallint, 'queued', c.vft
  FROM charged AS c
ON CONFLICT DO NOTHING
RETURNING id, job_id, due_at, state

-- name: runs_wake :exec
-- Wake the workers for runs that deferred their trigger's NOTIFY (see runs_insert_slots).
SELECT pg_notify('pgsched_runs', extract(epoch FROM now())::text)

-- name: runs_skip_misfired :many
-- Apply misfire policies to recurring jobs' first attempts still queued longer than the
-- threshold after their slot (workers were down or overloaded): `skip` skips them all,
-- `run_once` keeps only the latest per job, `run_all` keeps the latest `cap`; a slot past
-- the job's starting deadline is skipped whatever the policy. Skips are recorded with the
-- reason. SKIP LOCKED: a run a worker is claiming right now is left to it.
WITH late AS MATERIALIZED (
    SELECT r.id, r.due_at, r.job_id, r.slot_at
      FROM pgsched.runs AS r
     WHERE r.state = 'queued'
       AND r.attempt = 1
       AND r.due_at < coalesce(%(now)s::timestamptz, now()) - %(threshold)s::interval
       AND r.due_at >= %(floor)s::timestamptz
       FOR UPDATE SKIP LOCKED
), ranked AS (
    SELECT l.*, j.misfire, j.starting_deadline_seconds,
           row_number() OVER (PARTITION BY l.job_id ORDER BY l.slot_at DESC) AS recent
      FROM late AS l
      JOIN pgsched.jobs AS j ON j.id = l.job_id
     WHERE j.schedule_kind <> 'once'
), doomed AS (
    SELECT id, due_at,
           CASE
             WHEN starting_deadline_seconds IS NOT NULL
              AND due_at < coalesce(%(now)s::timestamptz, now())
                           - make_interval(secs => starting_deadline_seconds)
               THEN 'missed its starting deadline'
             WHEN misfire = 'skip' THEN 'misfired (policy skip)'
             WHEN misfire = 'run_once' AND recent > 1 THEN 'coalesced (policy run_once)'
             WHEN misfire = 'run_all' AND recent > %(run_all_cap)s::int
               THEN 'beyond the catch-up cap (policy run_all)'
           END AS reason
      FROM ranked
)
UPDATE pgsched.runs AS r
   SET state = 'skipped', finished_at = coalesce(%(now)s::timestamptz, now()),
       error = d.reason
  FROM doomed AS d
 WHERE r.id = d.id
   AND r.due_at = d.due_at
   AND d.reason IS NOT NULL
RETURNING r.id, r.job_id, r.slot_at, r.error

-- name: runs_delete_queued_for_job :one
-- Forget the slots a job has materialised but not started (pause, schedule edit): the
-- planner makes them again from the job's new cursor. Retries in flight stay.
WITH gone AS (
    DELETE FROM pgsched.runs
     WHERE job_id = %(job_id)s::bigint
       AND state = 'queued'
       AND attempt = 1
    RETURNING id
)
SELECT count(*) AS deleted FROM gone

-- name: runs_list_for_job :many
-- A job's runs (its execution history), newest first, keyset-paginated by id and
-- filtered by state and slot time.
SELECT r.id, r.job_id, r.slot_at, r.due_at, r.attempt, r.state, r.worker_id,
       r.started_at, r.finished_at, r.error, r.dead,
       extract(epoch FROM r.started_at - r.due_at) AS lateness_seconds
  FROM pgsched.runs AS r
  JOIN pgsched.jobs AS j ON j.id = r.job_id
 WHERE r.job_id = %(job_id)s::bigint
   AND j.owner_id = coalesce(%(owner_id)s::bigint, j.owner_id)
   AND (%(state)s::pgsched.run_state IS NULL OR r.state = %(state)s::pgsched.run_state)
   AND r.slot_at >= coalesce(%(since)s::timestamptz, '-infinity')
   AND r.slot_at < coalesce(%(until)s::timestamptz, 'infinity')
   AND r.id < coalesce(%(before_id)s::bigint, 9223372036854775807)
 ORDER BY r.id DESC
 LIMIT %(limit)s::int

-- name: runs_get :one
-- One run by id (any partition), if the owner may see it.
SELECT r.id, r.job_id, r.slot_at, r.due_at, r.attempt, r.state, r.worker_id,
       r.started_at, r.finished_at, r.error, r.dead
  FROM pgsched.runs AS r
  JOIN pgsched.jobs AS j ON j.id = r.job_id
 WHERE r.id = %(id)s::bigint
   AND j.owner_id = coalesce(%(owner_id)s::bigint, j.owner_id)

-- name: runs_cancel_for_job :one
-- Cancel what a job still has in flight: queued runs end `cancelled` now; running runs
-- are flagged, and their workers are told at once (NOTIFY) and by the next heartbeat.
WITH queued AS (
    UPDATE pgsched.runs
       SET state = 'cancelled', finished_at = coalesce(%(now)s::timestamptz, now()),
           error = 'cancelled'
     WHERE job_id = %(job_id)s::bigint
       AND state = 'queued'
    RETURNING id
),
running AS (
    UPDATE pgsched.runs
       SET cancel_requested = true
     WHERE job_id = %(job_id)s::bigint
       AND state = 'running'
    RETURNING id
)
SELECT (SELECT count(*) FROM queued) AS queued_cancelled,
       (SELECT count(*) FROM running) AS running_signalled,
       pg_notify('pgsched_cancel', coalesce((SELECT string_agg(id::text, ',') FROM running), ''))
           AS notified

-- name: runs_cancel :one
-- Cancel one run: a queued one ends now, a running one is told to stop (flag + NOTIFY).
WITH target AS (
    SELECT r.id, r.due_at, r.state
      FROM pgsched.runs AS r
      JOIN pgsched.jobs AS j ON j.id = r.job_id
     WHERE r.id = %(id)s::bigint
       AND j.owner_id = coalesce(%(owner_id)s::bigint, j.owner_id)
), changed AS (
    UPDATE pgsched.runs AS r
       SET state = CASE WHEN t.state = 'queued' THEN 'cancelled'::pgsched.run_state
                        ELSE r.state END,
           finished_at = CASE WHEN t.state = 'queued' THEN now() ELSE r.finished_at END,
           error = CASE WHEN t.state = 'queued' THEN 'cancelled' ELSE r.error END,
           cancel_requested = true
      FROM target AS t
     WHERE r.id = t.id AND r.due_at = t.due_at AND r.state IN ('queued', 'running')
    RETURNING r.id, t.state AS was
)
SELECT (SELECT state::text FROM target) AS state,
       (SELECT was::text FROM changed) AS was,
       pg_notify('pgsched_cancel', coalesce(
           (SELECT id::text FROM changed WHERE was = 'running'), '')) AS notified

-- name: runs_dead_list :many
-- Dead letters: final failed attempts whose slot exhausted its retries, newest first.
SELECT r.id, r.job_id, r.slot_at, r.due_at, r.attempt, r.state, r.worker_id,
       r.started_at, r.finished_at, r.error, r.dead, j.name AS job_name
  FROM pgsched.runs AS r
  JOIN pgsched.jobs AS j ON j.id = r.job_id
 WHERE r.dead
   AND j.owner_id = coalesce(%(owner_id)s::bigint, j.owner_id)
   AND r.id < coalesce(%(before_id)s::bigint, 9223372036854775807)
 ORDER BY r.id DESC
 LIMIT %(limit)s::int

-- name: runs_redrive :one
-- Give a dead letter one more attempt, due now; it leaves the dead-letter list and a
-- dead one-off job is active again.
WITH letter AS (
    UPDATE pgsched.runs AS r
       SET dead = false
      FROM pgsched.jobs AS j
     WHERE r.id = %(id)s::bigint
       AND r.dead
       AND j.id = r.job_id
       AND j.owner_id = coalesce(%(owner_id)s::bigint, j.owner_id)
    RETURNING r.job_id, r.owner_id, r.slot_at, r.attempt, r.priority, r.vft
), revived AS (
    UPDATE pgsched.jobs AS j
       SET state = 'active', updated_at = now()
      FROM letter AS l
     WHERE j.id = l.job_id AND j.state = 'dead'
    RETURNING j.id
)
INSERT INTO pgsched.runs (due_at, job_id, owner_id, slot_at, attempt, priority, vft)
SELECT now(), l.job_id, l.owner_id, l.slot_at, l.attempt + 1, l.priority, l.vft
  FROM letter AS l
RETURNING id, job_id, due_at, attempt, (SELECT count(*) FROM revived) AS revived

-- name: runs_finished_since :many
-- One owner's runs that reached a final state after `since` (the live event stream),
-- bounded to the last day of partitions.
SELECT r.id, r.job_id, r.attempt, r.state, r.slot_at, r.started_at, r.finished_at, r.error
  FROM pgsched.runs AS r
 WHERE r.owner_id = %(owner_id)s::bigint
   AND r.finished_at > %(since)s::timestamptz
   AND r.due_at >= now() - interval '1 day'
 ORDER BY r.finished_at
 LIMIT 100
