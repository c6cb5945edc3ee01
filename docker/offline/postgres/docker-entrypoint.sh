#!/usr/bin/env bash
# Entrypoint of bookmarks-offline/postgres:15. It keeps the contract of the official postgres:15
# image's entrypoint, so that compose files, init scripts and testcontainers treat both images alike:
#   - POSTGRES_USER / POSTGRES_PASSWORD / POSTGRES_DB / POSTGRES_INITDB_ARGS /
#     POSTGRES_INITDB_WALDIR / POSTGRES_HOST_AUTH_METHOD / PGDATA (and *_FILE variants);
#   - an empty PGDATA is initialised once: initdb, host auth for everyone, the database, then
#     /docker-entrypoint-initdb.d/* (*.sh run if executable, sourced otherwise; *.sql[.gz|.xz|.zst]
#     fed to psql) against a socket-only temporary server whose log goes to STDOUT;
#   - then `exec postgres "$@"` as user postgres, logging to STDERR; a first argument that is not
#     `postgres` (or an option) is exec'ed as-is, as root.
# pg_hba.conf is the official image's: initdb's defaults plus `host all all all <method>`, so
# replication from other hosts is admitted only by an init script (ours is
# docker/postgres/primary-init/10-replication.sh), exactly as on the official image.
# Addition over the official image: when PGDATA was already initialised a background watcher
# copies the "ready to accept connections" line to STDOUT (see mirror_ready_line_to_stdout).
set -Eeo pipefail

# file_env VAR [DEFAULT]: VAR may instead be given as a path in VAR_FILE (docker secrets).
file_env() {
	local var="$1" file_var="${1}_FILE" def="${2:-}" val
	if [ -n "${!var:-}" ] && [ -n "${!file_var:-}" ]; then
		printf >&2 'error: both %s and %s are set (but are exclusive)\n' "$var" "$file_var"
		exit 1
	fi
	val="$def"
	if [ -n "${!var:-}" ]; then
		val="${!var}"
	elif [ -n "${!file_var:-}" ]; then
		val="$(<"${!file_var}")"
	fi
	export "$var"="$val"
	unset "$file_var"
}

setup_env() {
	: "${PGDATA:=/var/lib/postgresql/data}"
	export PGDATA
	file_env POSTGRES_PASSWORD
	file_env POSTGRES_USER postgres
	file_env POSTGRES_DB "$POSTGRES_USER"
	file_env POSTGRES_INITDB_ARGS
	: "${POSTGRES_HOST_AUTH_METHOD:=}"
	DATABASE_ALREADY_EXISTS=
	if [ -s "$PGDATA/PG_VERSION" ]; then
		DATABASE_ALREADY_EXISTS=true
	fi
}

create_directories() {
	mkdir -p "$PGDATA"
	chmod 00700 "$PGDATA" || :
	mkdir -p /var/run/postgresql || :
	chmod 03775 /var/run/postgresql || :
	if [ -n "${POSTGRES_INITDB_WALDIR:-}" ]; then
		mkdir -p "$POSTGRES_INITDB_WALDIR"
		if [ "$(id -u)" = 0 ]; then
			find "$POSTGRES_INITDB_WALDIR" \! -user postgres -exec chown postgres '{}' +
		fi
		chmod 700 "$POSTGRES_INITDB_WALDIR"
	fi
	if [ "$(id -u)" = 0 ]; then
		find "$PGDATA" \! -user postgres -exec chown postgres '{}' +
		find /var/run/postgresql \! -user postgres -exec chown postgres '{}' +
	fi
}

verify_minimum_env() {
	if [ -z "$POSTGRES_PASSWORD" ] && [ "$POSTGRES_HOST_AUTH_METHOD" != trust ]; then
		cat >&2 <<-'EOE'
			Error: Database is uninitialized and superuser password is not specified.
			       You must specify POSTGRES_PASSWORD to a non-empty value for the
			       superuser. For example, "-e POSTGRES_PASSWORD=password" on "docker run".

			       You may also use "POSTGRES_HOST_AUTH_METHOD=trust" to allow all
			       connections without a password. This is *not* recommended.
		EOE
		exit 1
	fi
	if [ "$POSTGRES_HOST_AUTH_METHOD" = trust ]; then
		echo >&2 'WARNING: POSTGRES_HOST_AUTH_METHOD=trust lets anyone who reaches the port in without a password.'
	fi
}

init_database_dir() {
	if [ -n "${POSTGRES_INITDB_WALDIR:-}" ]; then
		set -- --waldir "$POSTGRES_INITDB_WALDIR" "$@"
	fi
	# initdb refuses an empty --pwfile, hence the trailing newline; POSTGRES_INITDB_ARGS is
	# word-split on purpose (it holds several options), exactly like the official image.
	eval 'initdb --username="$POSTGRES_USER" --pwfile=<(printf "%s\n" "$POSTGRES_PASSWORD") '"$POSTGRES_INITDB_ARGS"' "$@"'
}

# Password (or POSTGRES_HOST_AUTH_METHOD) authentication for ordinary TCP sessions from anywhere,
# as the official image writes it. Arguments: the postgres server arguments.
setup_hba_conf() {
	if [ "${1:-}" = postgres ]; then shift; fi
	local auth
	auth="$(postgres -C password_encryption "$@")"
	: "${POSTGRES_HOST_AUTH_METHOD:=$auth}"
	{
		printf '\n# added by docker-entrypoint.sh\n'
		printf 'host all all all %s\n' "$POSTGRES_HOST_AUTH_METHOD"
	} >>"$PGDATA/pg_hba.conf"
}

# psql as the superuser over the Unix socket, stopping at the first error. Init scripts that are
# sourced may call it too (the official image offers the same function).
docker_process_sql() {
	local cmd=(psql -v ON_ERROR_STOP=1 --username "$POSTGRES_USER" --no-password --no-psqlrc)
	if [ -n "$POSTGRES_DB" ]; then
		cmd+=(--dbname "$POSTGRES_DB")
	fi
	PGHOST= PGHOSTADDR= "${cmd[@]}" "$@"
}

# Socket-only server for the init phase. pg_ctl without -l sends the server log to its own
# stdout, which is how the official image's init-time log (and its "ready" line) ends up on STDOUT.
temp_server_start() {
	if [ "${1:-}" = postgres ]; then shift; fi
	set -- "$@" -c listen_addresses='' -p "${PGPORT:-5432}"
	PGUSER="${PGUSER:-$POSTGRES_USER}" pg_ctl -D "$PGDATA" -o "$(printf '%q ' "$@")" -w start
}

temp_server_stop() {
	PGUSER="${PGUSER:-postgres}" pg_ctl -D "$PGDATA" -m fast -w stop
}

setup_db() {
	local exists
	exists="$(POSTGRES_DB= docker_process_sql --dbname postgres --set db="$POSTGRES_DB" --tuples-only <<-'EOSQL'
		SELECT 1 FROM pg_database WHERE datname = :'db' ;
	EOSQL
	)"
	if [ -z "$exists" ]; then
		POSTGRES_DB= docker_process_sql --dbname postgres --set db="$POSTGRES_DB" <<-'EOSQL'
			CREATE DATABASE :"db" ;
		EOSQL
		echo
	fi
}

process_init_files() {
	local f
	echo
	for f; do
		case "$f" in
			*.sh)
				if [ -x "$f" ]; then
					printf '%s: running %s\n' "$0" "$f"
					"$f"
				else
					printf '%s: sourcing %s\n' "$0" "$f"
					# shellcheck disable=SC1090
					. "$f"
				fi
				;;
			*.sql) printf '%s: running %s\n' "$0" "$f"; docker_process_sql -f "$f"; echo ;;
			*.sql.gz) printf '%s: running %s\n' "$0" "$f"; gunzip -c "$f" | docker_process_sql; echo ;;
			*.sql.xz) printf '%s: running %s\n' "$0" "$f"; xzcat "$f" | docker_process_sql; echo ;;
			*.sql.zst) printf '%s: running %s\n' "$0" "$f"; zstd -dc "$f" | docker_process_sql; echo ;;
			*) printf '%s: ignoring %s\n' "$0" "$f" ;;
		esac
		echo
	done
}

# On a fresh PGDATA the init-time server prints "database system is ready to accept connections"
# on STDOUT and the final server prints it on STDERR; testcontainers' Postgres module waits for
# both. On an already-initialised PGDATA there is no init-time server, so (unlike the official
# image) a watcher copies the line to STDOUT once the real server reports ready. It reads the
# same postmaster.pid status line that `pg_ctl -w` polls, so it needs no port or socket. The
# watcher becomes a child of the postmaster (exec keeps this PID): the postmaster treats an
# unknown child that exits with status 0 as harmless, anything else as a crashed backend, so
# every path out of the watcher is `exit 0`.
mirror_ready_line_to_stdout() {
	local postmaster_pid=$$
	(
		set +Eeo pipefail
		trap 'exit 0' HUP INT QUIT TERM PIPE USR1 USR2 ERR
		exec </dev/null 2>/dev/null
		while kill -0 "$postmaster_pid"; do
			if [ -r "$PGDATA/postmaster.pid" ]; then
				mapfile -t pid_file <"$PGDATA/postmaster.pid"
				if [ "${pid_file[0]:-}" = "$postmaster_pid" ]; then
					case "${pid_file[7]:-}" in
						ready*) what="database system is ready to accept connections" ;;
						standby*) what="database system is ready to accept read-only connections" ;;
						*) what="" ;;
					esac
					if [ -n "$what" ]; then
						printf '%s [%s] LOG:  %s (copied to stdout by docker-entrypoint.sh)\n' \
							"$(date -u '+%Y-%m-%d %H:%M:%S.%3N UTC')" "$postmaster_pid" "$what"
						exit 0
					fi
				fi
			fi
			sleep 0.2
		done
		exit 0
	) &
}

want_help() {
	local arg
	for arg; do
		case "$arg" in
			-'?' | --help | --describe-config | -V | --version) return 0 ;;
		esac
	done
	return 1
}

main() {
	if [ "${1:0:1}" = - ]; then
		set -- postgres "$@"
	fi

	if [ "$1" = postgres ] && ! want_help "$@"; then
		setup_env
		create_directories
		if [ "$(id -u)" = 0 ]; then
			exec gosu postgres "${BASH_SOURCE[0]}" "$@"
		fi

		if [ -z "$DATABASE_ALREADY_EXISTS" ]; then
			verify_minimum_env
			ls /docker-entrypoint-initdb.d/ >/dev/null
			init_database_dir
			setup_hba_conf "$@"
			export PGPASSWORD="${PGPASSWORD:-$POSTGRES_PASSWORD}"
			temp_server_start "$@"
			setup_db
			process_init_files /docker-entrypoint-initdb.d/*
			temp_server_stop
			unset PGPASSWORD
			printf '\nPostgreSQL init process complete; ready for start up.\n\n'
		else
			printf '\nPostgreSQL Database directory appears to contain a database; Skipping initialization\n\n'
			mirror_ready_line_to_stdout
		fi
	fi

	exec "$@"
}

main "$@"
