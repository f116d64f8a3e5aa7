-- Users: owners of jobs, with their fair-share weight.

-- name: users_ensure :one
-- The id of the named user, created on first use (the CLI's local operator account).
INSERT INTO pgsched.users (username, is_admin, shell_allowed)
VALUES (%(username)s::text, true, true)
ON CONFLICT (username) DO UPDATE SET username = excluded.username
RETURNING id, username, is_admin, shell_allowed, job_weight

-- name: users_get_by_name :one
-- One user by name.
SELECT id, username, is_admin, shell_allowed, job_weight
  FROM pgsched.users
 WHERE username = %(username)s::text
