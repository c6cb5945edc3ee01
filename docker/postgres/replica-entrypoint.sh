#!/bin/bash
# Replica half of the streaming-replication setup: the command of a replica service running the
# official postgres:15 image or bookmarks-offline/postgres:15 (both have bash, gosu, pg_isready,
# pg_basebackup and postgres on PATH). The image's entrypoint execs it as-is because its first
# argument is not "postgres". On first start it clones the primary into the empty PGDATA with
# `pg_basebackup -R`, which leaves standby.signal and primary_conninfo behind, so the server comes
# up as a hot standby that streams from the primary; later starts reuse PGDATA. Arguments are
# passed to postgres (e.g. -c max_connections=200).
#   env: PRIMARY_HOST (required), PRIMARY_PORT (5432), POSTGRES_REPLICATION_USER (replicator),
#        POSTGRES_REPLICATION_PASSWORD or POSTGRES_REPLICATION_PASSWORD_FILE (a file whose
#        first line is it; one is required on first start), PGDATA,
#        REPLICA_WAIT_SECONDS (how long to wait for the primary, default 120)
set -Eeuo pipefail

: "${PGDATA:=/var/lib/postgresql/data}"
export PGDATA
log() { printf 'replica-entrypoint.sh: %s\n' "$*"; }

if [ "$(id -u)" = 0 ]; then
	mkdir -p "$PGDATA" /var/run/postgresql
	find "$PGDATA" /var/run/postgresql \! -user postgres -exec chown postgres:postgres '{}' +
	chmod 700 "$PGDATA"
	chmod 3775 /var/run/postgresql
	exec gosu postgres "${BASH_SOURCE[0]}" "$@"
fi

if [ ! -s "$PGDATA/PG_VERSION" ]; then
	primary_host="${PRIMARY_HOST:?PRIMARY_HOST must name the primary}"
	primary_port="${PRIMARY_PORT:-5432}"
	repl_user="${POSTGRES_REPLICATION_USER:-replicator}"
	PGPASSWORD="${POSTGRES_REPLICATION_PASSWORD:-}"
	if [ -z "$PGPASSWORD" ] && [ -n "${POSTGRES_REPLICATION_PASSWORD_FILE:-}" ]; then
		PGPASSWORD="$(head -n1 "$POSTGRES_REPLICATION_PASSWORD_FILE")"
	fi
	export PGPASSWORD="${PGPASSWORD:?POSTGRES_REPLICATION_PASSWORD or _FILE must be set}"

	# The primary's init phase runs a socket-only server, so a TCP answer means it is fully set up.
	deadline=$((SECONDS + ${REPLICA_WAIT_SECONDS:-120}))
	until pg_isready -q -h "$primary_host" -p "$primary_port" -t 2; do
		if [ "$SECONDS" -ge "$deadline" ]; then
			log "primary $primary_host:$primary_port not ready after ${REPLICA_WAIT_SECONDS:-120} s"
			exit 1
		fi
		sleep 1
	done

	log "cloning $primary_host:$primary_port into $PGDATA as '$repl_user'"
	pg_basebackup --pgdata="$PGDATA" --host="$primary_host" --port="$primary_port" \
		--username="$repl_user" --no-password --wal-method=stream --checkpoint=fast \
		--write-recovery-conf --progress
	unset PGPASSWORD
	log "base backup complete; starting as a standby"
else
	log "$PGDATA already holds a cluster; starting it"
fi

# hot_standby_feedback: tenant reads run here, an export's snapshot among them for as long as
# the export streams; without it the primary's vacuum could remove rows that snapshot still
# sees, and the standby would cancel the export mid-way (a recovery conflict).
exec postgres -c hot_standby_feedback=on "$@"
