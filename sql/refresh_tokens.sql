-- Refresh tokens: long-lived, opaque, stored hashed, used once (rotated).

-- name: refresh_tokens_insert :exec
-- Issue a refresh token.
INSERT INTO pgsched.refresh_tokens (user_id, token_hash, expires_at)
VALUES (%(user_id)s::bigint, %(token_hash)s::text, now() + %(ttl)s::interval)

-- name: refresh_tokens_consume :one
-- Use a refresh token: it is deleted (rotation) and its user returned if unexpired.
DELETE FROM pgsched.refresh_tokens
 WHERE token_hash = %(token_hash)s::text
RETURNING user_id, expires_at > now() AS valid
