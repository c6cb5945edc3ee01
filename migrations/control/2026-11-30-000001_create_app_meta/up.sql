-- The control database holds state that is never sharded. Its first table records which
-- shards this deployment has seen, so an operator can tell a renamed or dropped shard from
-- a new one; directory pins and the job queue arrive with their own migrations.
CREATE TABLE known_shards (
    name       TEXT        PRIMARY KEY,
    first_seen TIMESTAMPTZ NOT NULL DEFAULT now(),
    last_seen  TIMESTAMPTZ NOT NULL DEFAULT now()
);
