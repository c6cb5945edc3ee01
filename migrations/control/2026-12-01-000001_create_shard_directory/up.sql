-- The tenant directory: runtime placement that beats config pins and the hash
-- (directory -> pin -> hash). One row places one tenant key on a shard by name; the name
-- is checked against the topology when it is used, not here, because the topology is
-- configuration the database cannot see.
CREATE TABLE _autumn_shard_directory (
    tenant_key TEXT        PRIMARY KEY,
    shard_name TEXT        NOT NULL,
    updated_at TIMESTAMPTZ NOT NULL DEFAULT now(),
    note       TEXT,
    -- The key travels as a NOTIFY payload (under 8000 bytes); empty payloads mean "flush".
    CONSTRAINT directory_tenant_key_length CHECK (octet_length(tenant_key) BETWEEN 1 AND 1024),
    CONSTRAINT directory_shard_name_nonempty CHECK (shard_name <> '')
);

-- Every change, from the CLI or from psql, tells every web process to forget that key.
-- Postgres delivers NOTIFY at commit, so a process never evicts before the new row is
-- visible, and a rolled-back change notifies nobody.
CREATE FUNCTION _autumn_shard_directory_notify() RETURNS trigger
LANGUAGE plpgsql AS $$
BEGIN
    IF TG_OP = 'TRUNCATE' THEN
        PERFORM pg_notify('autumn_shard_directory', '');
        RETURN NULL;
    END IF;
    IF TG_OP IN ('UPDATE', 'DELETE') THEN
        PERFORM pg_notify('autumn_shard_directory', OLD.tenant_key);
    END IF;
    IF TG_OP IN ('INSERT', 'UPDATE') THEN
        PERFORM pg_notify('autumn_shard_directory', NEW.tenant_key);
    END IF;
    RETURN NULL;
END
$$;

CREATE TRIGGER _autumn_shard_directory_changed
    AFTER INSERT OR UPDATE OR DELETE ON _autumn_shard_directory
    FOR EACH ROW EXECUTE FUNCTION _autumn_shard_directory_notify();

CREATE TRIGGER _autumn_shard_directory_truncated
    AFTER TRUNCATE ON _autumn_shard_directory
    FOR EACH STATEMENT EXECUTE FUNCTION _autumn_shard_directory_notify();
