-- Leadership: a lease row per duty, not a session advisory lock, so it works through
-- PgBouncer in transaction mode and survives a connection that is recycled.

-- name: leaders_attempt_elect :one
-- Take the lease if it is free or expired, or renew it if it is ours; returns a row only
-- to the process that holds the lease afterwards.
INSERT INTO pgsched.leaders (name, leader_id, elected_at, expires_at)
VALUES (%(name)s::text, %(leader_id)s::text, coalesce(%(now)s::timestamptz, now()),
        coalesce(%(now)s::timestamptz, now()) + %(ttl)s::interval)
ON CONFLICT (name) DO UPDATE
   SET leader_id = excluded.leader_id,
       elected_at = CASE WHEN pgsched.leaders.leader_id = excluded.leader_id
                         THEN pgsched.leaders.elected_at ELSE excluded.elected_at END,
       expires_at = excluded.expires_at
 WHERE pgsched.leaders.leader_id = excluded.leader_id
    OR pgsched.leaders.expires_at < coalesce(%(now)s::timestamptz, now())
RETURNING leader_id, elected_at, expires_at

-- name: leaders_resign :exec
-- Give the lease up at shutdown so another process takes over at once.
DELETE FROM pgsched.leaders
 WHERE name = %(name)s::text
   AND leader_id = %(leader_id)s::text
