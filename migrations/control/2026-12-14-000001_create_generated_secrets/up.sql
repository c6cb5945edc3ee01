-- Secrets generated once per deployment, so that a fresh stack has its own without anyone
-- typing one and none is published in the repository: a server started with
-- ADMIN_TOKEN=generated or SESSION_SECRET=generated reads them here, and
-- `bookmarks admin-token` prints the admin token for its operator. gen_random_uuid() draws
-- from the server's strong random source; two of them give 244 random bits.
CREATE TABLE _autumn_secrets (
    name TEXT PRIMARY KEY,
    value TEXT NOT NULL,
    created_at TIMESTAMPTZ NOT NULL DEFAULT now()
);

INSERT INTO _autumn_secrets (name, value)
SELECT name, replace(gen_random_uuid()::text || gen_random_uuid()::text, '-', '')
FROM (VALUES ('admin_token'), ('session_secret')) AS generated (name);
