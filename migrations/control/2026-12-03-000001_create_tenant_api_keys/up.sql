-- Tenants' API keys. Only each key's SHA-256 is kept: the key itself is shown once, when it
-- is created (`bookmarks keys create`, the admin page), and never again.
CREATE TABLE tenant_api_keys (
    id           BIGSERIAL   PRIMARY KEY,
    tenant_key   TEXT        NOT NULL,
    key_hash     BYTEA       NOT NULL UNIQUE,
    note         TEXT,
    created_at   TIMESTAMPTZ NOT NULL DEFAULT now(),
    -- Kept at most a minute stale: each web replica writes it at most once a minute a key.
    last_used_at TIMESTAMPTZ,
    revoked_at   TIMESTAMPTZ,
    CONSTRAINT tenant_api_keys_tenant_length CHECK (octet_length(tenant_key) BETWEEN 1 AND 64),
    CONSTRAINT tenant_api_keys_hash_length CHECK (octet_length(key_hash) = 32)
);

CREATE INDEX tenant_api_keys_by_tenant ON tenant_api_keys (tenant_key, id);

-- A change that decides whether a key works (revoked, deleted, moved to another tenant)
-- tells every web process to forget its cached answer for that key's hash. A new key
-- notifies nobody: no process can have cached an answer for a key nobody knew before it
-- was stored. last_used_at changes notify nobody either: they happen every minute and
-- decide nothing.
CREATE FUNCTION tenant_api_keys_notify() RETURNS trigger
LANGUAGE plpgsql AS $$
BEGIN
    IF TG_OP = 'TRUNCATE' THEN
        PERFORM pg_notify('tenant_api_keys', '');
        RETURN NULL;
    END IF;
    IF TG_OP = 'UPDATE' AND NEW.revoked_at IS NOT DISTINCT FROM OLD.revoked_at
        AND NEW.tenant_key = OLD.tenant_key AND NEW.key_hash = OLD.key_hash THEN
        RETURN NULL;
    END IF;
    IF TG_OP IN ('UPDATE', 'DELETE') THEN
        PERFORM pg_notify('tenant_api_keys', encode(OLD.key_hash, 'hex'));
    END IF;
    IF TG_OP = 'UPDATE' AND NEW.key_hash <> OLD.key_hash THEN
        PERFORM pg_notify('tenant_api_keys', encode(NEW.key_hash, 'hex'));
    END IF;
    RETURN NULL;
END
$$;

CREATE TRIGGER tenant_api_keys_changed
    AFTER UPDATE OR DELETE ON tenant_api_keys
    FOR EACH ROW EXECUTE FUNCTION tenant_api_keys_notify();

CREATE TRIGGER tenant_api_keys_truncated
    AFTER TRUNCATE ON tenant_api_keys
    FOR EACH STATEMENT EXECUTE FUNCTION tenant_api_keys_notify();
