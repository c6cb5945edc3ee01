-- The app acts as bookmarks_app on the control database too, as it does on the shards: it
-- reads and writes the framework's tables (directory, slot map, keys, members, jobs, moves)
-- and changes no schema. Only `bookmarks migrate` acts as the login of its URL.
--
-- Roles belong to a server, so a shard on the same server may have created it already.
DO $$
BEGIN
    CREATE ROLE bookmarks_app NOLOGIN NOSUPERUSER NOBYPASSRLS NOCREATEDB NOCREATEROLE;
EXCEPTION WHEN duplicate_object OR unique_violation THEN NULL;
END $$;

GRANT USAGE ON SCHEMA public TO bookmarks_app;
GRANT SELECT, INSERT, UPDATE, DELETE ON ALL TABLES IN SCHEMA public TO bookmarks_app;
GRANT USAGE, SELECT, UPDATE ON ALL SEQUENCES IN SCHEMA public TO bookmarks_app;
-- Readiness reads which migrations are applied and the servers read their generated
-- secrets; only the migrations write either.
REVOKE INSERT, UPDATE, DELETE ON __diesel_schema_migrations, _autumn_secrets FROM bookmarks_app;
-- Tables and sequences later migrations create get the same grants.
ALTER DEFAULT PRIVILEGES IN SCHEMA public GRANT SELECT, INSERT, UPDATE, DELETE ON TABLES
    TO bookmarks_app;
ALTER DEFAULT PRIVILEGES IN SCHEMA public GRANT USAGE, SELECT, UPDATE ON SEQUENCES
    TO bookmarks_app;
