#!/bin/bash
# Primary half of the streaming-replication setup: mounted into /docker-entrypoint-initdb.d of the
# primary (official postgres:15 or bookmarks-offline/postgres:15), it runs once on first start and
# creates the role replicas connect as, and lets that role connect for replication from any host
# with a password (the official image's pg_hba.conf only admits ordinary sessions).
#   env: POSTGRES_REPLICATION_USER (default replicator), POSTGRES_REPLICATION_PASSWORD or
#        POSTGRES_REPLICATION_PASSWORD_FILE (a file whose first line is it; one is required)
# The body runs in a subshell so that it behaves the same whether the entrypoint executes it or,
# when the file lost its exec bit, sources it.
(
	set -euo pipefail
	repl_user="${POSTGRES_REPLICATION_USER:-replicator}"
	repl_password="${POSTGRES_REPLICATION_PASSWORD:-}"
	if [ -z "$repl_password" ] && [ -n "${POSTGRES_REPLICATION_PASSWORD_FILE:-}" ]; then
		repl_password="$(head -n1 "$POSTGRES_REPLICATION_PASSWORD_FILE")"
	fi
	: "${repl_password:?POSTGRES_REPLICATION_PASSWORD or _FILE must be set on the primary}"
	auth="${POSTGRES_HOST_AUTH_METHOD:-scram-sha-256}"

	echo "10-replication.sh: creating replication role '$repl_user'"
	psql -v ON_ERROR_STOP=1 --no-psqlrc --username "$POSTGRES_USER" --dbname postgres \
		--set repl_user="$repl_user" --set repl_password="$repl_password" <<-'EOSQL'
		CREATE ROLE :"repl_user" WITH LOGIN REPLICATION PASSWORD :'repl_password';
	EOSQL

	hba="$PGDATA/pg_hba.conf"
	if grep -Eq "^[[:space:]]*host[[:space:]]+replication[[:space:]]+(all|$repl_user)[[:space:]]+all[[:space:]]" "$hba"; then
		echo "10-replication.sh: pg_hba.conf already admits replication connections"
	else
		printf '\n# added by 10-replication.sh\nhost replication %s all %s\n' "$repl_user" "$auth" >>"$hba"
		echo "10-replication.sh: pg_hba.conf now admits replication as '$repl_user' ($auth)"
	fi
)
