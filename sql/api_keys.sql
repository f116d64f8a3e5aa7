-- API keys: for services; only a hash is stored, the key is shown once.

-- name: api_keys_insert :one
-- A new key for a user.
INSERT INTO pgsched.api_keys (user_id, name, prefix, key_hash)
VALUES (%(user_id)s::bigint, %(name)s::text, %(prefix)s::text, %(key_hash)s::text)
RETURNING id, name, prefix, created_at, last_used_at

-- name: api_keys_list :many
-- A user's keys (never the keys themselves).
SELECT id, name, prefix, created_at, last_used_at
  FROM pgsched.api_keys
 WHERE user_id = %(user_id)s::bigint
 ORDER BY id

-- name: api_keys_delete :one
-- Revoke one of the user's keys.
DELETE FROM pgsched.api_keys
 WHERE id = %(id)s::bigint AND user_id = %(user_id)s::bigint
RETURNING id

-- name: api_keys_authenticate :one
-- The user a key belongs to, noting its use.
UPDATE pgsched.api_keys
   SET last_used_at = now()
 WHERE key_hash = %(key_hash)s::text
RETURNING user_id
