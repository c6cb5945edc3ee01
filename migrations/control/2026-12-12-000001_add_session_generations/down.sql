-- Back to the trigger function of the members migration.
CREATE OR REPLACE FUNCTION tenant_api_keys_notify() RETURNS trigger
LANGUAGE plpgsql AS $$
BEGIN
    IF TG_OP = 'TRUNCATE' THEN
        PERFORM pg_notify('tenant_api_keys', '');
        RETURN NULL;
    END IF;
    IF TG_OP = 'UPDATE' AND NEW.revoked_at IS NOT DISTINCT FROM OLD.revoked_at
        AND NEW.tenant_key = OLD.tenant_key AND NEW.key_hash = OLD.key_hash
        AND NEW.member_id IS NOT DISTINCT FROM OLD.member_id THEN
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

ALTER TABLE tenant_api_keys DROP COLUMN session_generation;
