-- Secrets generated once and shared by every replica.

-- name: secrets_get_or_create :one
-- The named secret, storing `value` first if there is none yet.
WITH made AS (
    INSERT INTO pgsched.secrets (name, value) VALUES (%(name)s::text, %(value)s::text)
    ON CONFLICT (name) DO NOTHING
    RETURNING value
)
SELECT value FROM made
UNION ALL
SELECT value FROM pgsched.secrets WHERE name = %(name)s::text
LIMIT 1
