-- Where each shard's WAL stood when tenants last arrived on it by a move: the position, on
-- the destination's primary, that contains every row the move copied there. A replica of
-- that shard serves the moved tenants only once it has replayed this far (before then it
-- would show them absent), and a consistency token minted on their old shard is honoured
-- by it. `epoch` grows with every arrival anywhere, so a process can tell a token minted
-- after routes it has not heard of yet. Written by a move at its re-pin, before routing
-- changes; read with the slot map and with each directory lookup.
CREATE SEQUENCE _autumn_arrival_epoch;

CREATE TABLE _autumn_shard_arrivals (
    shard_name  TEXT        PRIMARY KEY CHECK (shard_name <> ''),
    arrival_lsn PG_LSN      NOT NULL,
    epoch       BIGINT      NOT NULL,
    arrived_at  TIMESTAMPTZ NOT NULL DEFAULT now()
);
