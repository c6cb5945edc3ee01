-- Signing out ends every session signed in with the key, on every web replica: a session
-- cookie carries the key's generation at sign-in, sign-out increments it, and a session
-- whose generation is older is refused. The change notifies like a revocation, so every
-- replica's key cache drops the key and reads the new generation on its next use.
ALTER TABLE tenant_api_keys ADD COLUMN session_generation INTEGER NOT NULL DEFAULT 0;

-- The trigger function as the members migration left it, plus the generation.
CREATE OR REPLACE FUNCTION tenant_api_keys_notify() RETURNS trigger
LANGUAGE plpgsql AS $$
BEGIN
    IF TG_OP = 'TRUNCATE' THEN
        PERFORM pg_notify('tenant_api_keys', '');
        RETURN NULL;
    END IF;
    IF TG_OP = 'UPDATE' AND NEW.revoked_at IS NOT DISTINCT FROM OLD.revoked_at
        AND NEW.tenant_key = OLD.tenant_key AND NEW.key_hash = OLD.key_hash
        AND NEW.member_id IS NOT DISTINCT FROM OLD.member_id
        AND NEW.session_generation = OLD.session_generation THEN
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
