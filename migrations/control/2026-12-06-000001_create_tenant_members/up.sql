-- The people of a tenant. Identity lives on the control database, never on a shard: a
-- request's member and role are known before anything is routed, without a shard round trip.
CREATE TABLE tenant_members (
    id          UUID        PRIMARY KEY DEFAULT gen_random_uuid(),
    tenant_key  TEXT        NOT NULL,
    name        TEXT        NOT NULL,
    email       TEXT        NOT NULL,
    role        TEXT        NOT NULL,
    created_at  TIMESTAMPTZ NOT NULL DEFAULT now(),
    updated_at  TIMESTAMPTZ NOT NULL DEFAULT now(),
    -- A disabled member stays (its keys and its authorship keep naming it) but acts no more.
    disabled_at TIMESTAMPTZ,
    CONSTRAINT tenant_members_role CHECK (role IN ('viewer', 'editor', 'admin')),
    CONSTRAINT tenant_members_tenant_length CHECK (octet_length(tenant_key) BETWEEN 1 AND 64),
    -- The target of the keys' composite foreign key: a key's member is of the key's tenant.
    CONSTRAINT tenant_members_tenant_id UNIQUE (tenant_key, id)
);

CREATE UNIQUE INDEX tenant_members_email ON tenant_members (tenant_key, lower(email));

-- Every existing key keeps working with the rights it had (all of them): each tenant that has
-- keys gets an admin member, its owner, and its keys become that member's.
ALTER TABLE tenant_api_keys ADD COLUMN member_id UUID;

INSERT INTO tenant_members (tenant_key, name, email, role)
SELECT DISTINCT tenant_key, 'Owner', 'owner@' || tenant_key || '.invalid', 'admin'
FROM tenant_api_keys;

UPDATE tenant_api_keys k SET member_id = m.id
FROM tenant_members m
WHERE m.tenant_key = k.tenant_key;

ALTER TABLE tenant_api_keys
    ALTER COLUMN member_id SET NOT NULL,
    ADD CONSTRAINT tenant_api_keys_member
        FOREIGN KEY (tenant_key, member_id) REFERENCES tenant_members (tenant_key, id);

CREATE INDEX tenant_api_keys_by_member ON tenant_api_keys (member_id);

-- A key acts with its member's role, and not at all once the member is disabled: a change
-- of either tells every web process to forget what it cached for each of the member's keys
-- (the key table's channel), so it takes effect on every replica at once.
CREATE FUNCTION tenant_members_notify() RETURNS trigger
LANGUAGE plpgsql AS $$
BEGIN
    IF NEW.role IS DISTINCT FROM OLD.role
        OR NEW.disabled_at IS DISTINCT FROM OLD.disabled_at
        OR NEW.tenant_key IS DISTINCT FROM OLD.tenant_key
        OR NEW.name IS DISTINCT FROM OLD.name THEN
        PERFORM pg_notify('tenant_api_keys', encode(key_hash, 'hex'))
        FROM tenant_api_keys WHERE member_id = OLD.id;
    END IF;
    RETURN NULL;
END
$$;

CREATE TRIGGER tenant_members_changed
    AFTER UPDATE ON tenant_members
    FOR EACH ROW EXECUTE FUNCTION tenant_members_notify();

-- A key given to another member changes its rights: that notifies too.
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

