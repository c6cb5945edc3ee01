# Sourced by the benchmarks that start Postgres servers of their own (bench-fleet.sh,
# bench-rls-whale.sh): Debian's Postgres 15 binaries ($PGBIN), loopback only, trust
# authentication, a `bookmarks` superuser; stopped by stop_servers (call it on exit).
# Needs the caller's `die`.
PGBIN=${PGBIN:-/usr/lib/postgresql/15/bin}
STARTED=()

# Postgres refuses to run as root: run its binaries as `postgres` then.
as_pg() { if [ "$(id -u)" = 0 ]; then runuser -u postgres -- "$@"; else "$@"; fi; }

# free_port FROM: the first port from FROM on that nothing listens on.
free_port() {
	local p
	for p in $(seq "$1" $(($1 + 500))); do
		ss -Hltn "sport = :$p" | grep -q . || { echo "$p"; return; }
	done
	die "no free port from $1"
}

# start_server DIR PORT: a fresh server on 127.0.0.1:PORT, its files in DIR.
start_server() {
	local dir=$1 port=$2
	mkdir -p "$dir/data" "$dir/sock"
	[ "$(id -u)" = 0 ] && chown -R postgres: "$dir"
	as_pg "$PGBIN/initdb" -D "$dir/data" -U postgres --auth=trust -E UTF8 --locale=C.UTF-8 >/dev/null
	as_pg "$PGBIN/pg_ctl" -D "$dir/data" -l "$dir/postgres.log" -w -o "\
 -c listen_addresses=127.0.0.1 -c port=$port -c unix_socket_directories=$dir/sock \
 -c max_connections=100 -c fsync=off -c synchronous_commit=off" start >/dev/null
	STARTED+=("$dir/data")
	psql -X -q -h 127.0.0.1 -p "$port" -U postgres -d postgres \
		-c "CREATE ROLE bookmarks LOGIN SUPERUSER PASSWORD 'bookmarks'"
}

stop_servers() {
	local dir
	for dir in "${STARTED[@]}"; do as_pg "$PGBIN/pg_ctl" -D "$dir" -m immediate stop >/dev/null 2>&1 || true; done
	STARTED=()
}
