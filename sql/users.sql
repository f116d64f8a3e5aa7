-- Users: owners of jobs, with their fair-share weight.

-- name: users_ensure :one
-- The id of the named user, created on first use (the CLI's local operator account).
INSERT INTO pgsched.users (username, is_admin, shell_allowed)
VALUES (%(username)s::text, true, true)
ON CONFLICT (username) DO UPDATE SET username = excluded.username
RETURNING id, username, is_admin, shell_allowed, job_weight

-- name: users_insert :one
-- Sign up (or an operator creating an account); a clash of names returns no row.
INSERT INTO pgsched.users (username, password_hash, job_weight, is_admin, shell_allowed,
                           webhook_secret)
VALUES (%(username)s::text, %(password_hash)s::text, %(job_weight)s::float8,
        %(is_admin)s::bool, %(shell_allowed)s::bool, %(webhook_secret)s::text)
ON CONFLICT (username) DO NOTHING
RETURNING id, username, job_weight, is_admin, shell_allowed, created_at

-- name: users_get_for_login :one
-- The password hash of a user, to check a login.
SELECT id, username, job_weight, is_admin, shell_allowed, password_hash
  FROM pgsched.users
 WHERE username = %(username)s::text

-- name: users_get :one
-- One user by id (token and API-key checks load the caller this way).
SELECT id, username, job_weight, is_admin, shell_allowed, webhook_secret, created_at
  FROM pgsched.users
 WHERE id = %(id)s::bigint

-- name: users_list :many
-- Every user, for admins.
SELECT id, username, job_weight, is_admin, shell_allowed, created_at
  FROM pgsched.users
 ORDER BY id
 LIMIT %(limit)s::int

-- name: users_update :one
-- An admin changes a user's weight or rights (NULL keeps the value).
UPDATE pgsched.users
   SET job_weight = coalesce(%(job_weight)s::float8, job_weight),
       is_admin = coalesce(%(is_admin)s::bool, is_admin),
       shell_allowed = coalesce(%(shell_allowed)s::bool, shell_allowed)
 WHERE id = %(id)s::bigint
RETURNING id, username, job_weight, is_admin, shell_allowed, created_at

-- name: users_delete :exec
-- Delete a user and, by cascade, their jobs, keys and tokens.
DELETE FROM pgsched.users WHERE id = %(id)s::bigint
