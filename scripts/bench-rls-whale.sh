#!/usr/bin/env bash
# What row-level security costs a whale's filtered reads: the same app, the same rows, the
# same requests, with the tenant tables' policies on and then off (ALTER TABLE … DISABLE ROW
# LEVEL SECURITY, which leaves the app's own tenant filters as the only ones), alternating,
# in one run. Also prints how the narrow search's index step is planned either way. Prints requests/s and p99 per request kind and mode, and the ratio.
#
# It starts a throwaway Postgres 15 (Debian's binaries, loopback only, removed at exit),
# seeds a whale of ROWS bookmarks and a minnow beside it on one shard, lets the app's
# reindexer index them, and runs wrk against a release build of the app.
#   env: ROWS (100000), DURATION (10s per run), ROUNDS (2), CONNECTIONS (8),
#        APP_BIN (target/release/bookmarks), PGBIN (/usr/lib/postgresql/15/bin), KEEP
# Needs: postgresql-15, wrk (apt-get install postgresql-15 wrk).
set -euo pipefail
cd "$(dirname "$0")/.."

ROWS=${ROWS:-100000}
DURATION=${DURATION:-10s}
ROUNDS=${ROUNDS:-2}
CONNECTIONS=${CONNECTIONS:-8}
APP_BIN=${APP_BIN:-target/release/bookmarks}
log() { printf 'bench-rls-whale: %s\n' "$*" >&2; }
die() { log "$*"; exit 1; }
[ -x "${PGBIN:-/usr/lib/postgresql/15/bin}/initdb" ] || die "no initdb in \$PGBIN (apt-get install postgresql-15)"
command -v wrk >/dev/null || die "no wrk (apt-get install wrk)"
[ -x "$APP_BIN" ] || die "no $APP_BIN (cargo build --release --bin bookmarks)"

WORK=$(mktemp -d)
chmod 755 "$WORK"   # the postgres user reads its data folder in it
APP_PID=
# shellcheck source=scripts/lib/throwaway-postgres.sh
. scripts/lib/throwaway-postgres.sh
cleanup() {
	set +e
	[ -n "$APP_PID" ] && kill "$APP_PID" 2>/dev/null && wait "$APP_PID" 2>/dev/null
	stop_servers
	if [ -n "${KEEP:-}" ]; then log "kept $WORK"; else rm -rf "$WORK"; fi
}
trap cleanup EXIT
trap 'exit 130' INT TERM
PGPORT=$(free_port 26432)
APP_PORT=$(free_port 24000)

log "starting Postgres 15 on 127.0.0.1:$PGPORT"
start_server "$WORK/pg" "$PGPORT"
psql_as() {
	local user=$1 db=$2
	shift 2
	psql -X -q -v ON_ERROR_STOP=1 -h 127.0.0.1 -p "$PGPORT" -U "$user" -d "$db" "$@"
}
psql_as postgres postgres <<-SQL
	CREATE DATABASE bookmarks_control OWNER bookmarks;
	CREATE DATABASE bookmarks_shard OWNER bookmarks;
SQL
shard_sql() { psql_as bookmarks bookmarks_shard -At -c "$1"; }

DB=postgres://bookmarks:bookmarks@127.0.0.1:$PGPORT
CONFIG=$WORK/autumn.toml
cat >"$CONFIG" <<-TOML
	[database]
	primary_url = "$DB/bookmarks_control?connect_timeout=2"

	[[database.shards]]
	name = "shard0"
	primary_url = "$DB/bookmarks_shard?connect_timeout=2"
	slots = ["0-16383"]

	[tenancy]
	enabled = true
	source = "header"
	header = "X-Tenant-Id"
	auth = "trusted_header"
	max_in_flight_per_tenant = 4096
TOML
APP_ENV=(env -u RUST_LOG -u LOG_FORMAT -u AUTUMN_ENV -u ADMIN_TOKEN)
while IFS= read -r var; do APP_ENV+=(-u "$var"); done < <(env | sed -n 's/^\(AUTUMN_[A-Z0-9_]*\)=.*/\1/p')
"${APP_ENV[@]}" "$APP_BIN" --config "$CONFIG" migrate >"$WORK/migrate.log" 2>&1 ||
	{ cat "$WORK/migrate.log" >&2; die "migrate failed"; }

# 50 tags (each on 2 % of the whale's rows), titles of three words from a list of 200 (each
# word in about 1.5 % of the titles), one word ("shared") in every title: a narrow and a
# broad search. UUIDv7-shaped ids, as the app mints them.
log "seeding $ROWS bookmarks for the whale and 1000 for a minnow"
shard_sql "
INSERT INTO bookmarks (tenant_id, id, url, title, notes, tags, created_at, updated_at)
SELECT w.tenant,
       (lpad(to_hex(x.ms), 12, '0') || '7' || substr(x.h, 1, 3) || '8' || substr(x.h, 4, 15))::uuid,
       'https://example.com/' || w.tenant || '/' || i,
       'shared w' || (i % 200) || ' w' || ((i * 7) % 200) || ' w' || ((i * 13) % 200),
       '', ARRAY['t' || (i % 50), 'all'], t.ts, t.ts
FROM (VALUES ('whale', $ROWS), ('minnow', 1000)) AS w(tenant, n),
     generate_series(1, w.n) AS i,
     LATERAL (SELECT now() - make_interval(secs => w.n - i) AS ts) AS t,
     LATERAL (SELECT (extract(epoch FROM t.ts) * 1000)::bigint AS ms, md5(w.tenant || i) AS h) AS x;
" >/dev/null

log "starting the app on 127.0.0.1:$APP_PORT; its reindexer indexes the seeded rows"
"${APP_ENV[@]}" "$APP_BIN" --config "$CONFIG" serve --bind "127.0.0.1:$APP_PORT" \
	--instance-name bench >"$WORK/app.log" 2>&1 &
APP_PID=$!
until [ "$(shard_sql "SELECT count(*) FROM search_pending")" = 0 ] &&
	[ "$(shard_sql "SELECT count(*) FROM bookmark_search")" -ge "$((ROWS + 1000))" ]; do
	kill -0 "$APP_PID" 2>/dev/null || { tail -20 "$WORK/app.log" >&2; die "the app exited"; }
	sleep 1
done
shard_sql "VACUUM ANALYZE" >/dev/null

TABLES=$(shard_sql "SELECT string_agg(c.relname, ' ') FROM pg_class c WHERE c.relrowsecurity")
[ -n "$TABLES" ] || die "no table has row-level security: is the shard migrated?"
policies() {
	local t
	for t in $TABLES; do shard_sql "ALTER TABLE $t $1 ROW LEVEL SECURITY" >/dev/null; done
}

# How the narrow search's index step is planned for the app's role, policies on and off.
explain() {
	psql_as bookmarks bookmarks_shard -At <<-SQL | grep -E "Index Cond|Filter|Recheck|Execution Time" | sed 's/^/    /'
		SET ROLE bookmarks_app;
		SELECT set_config('app.tenant_id', 'whale', false) \g /dev/null
		EXPLAIN (ANALYZE, COSTS OFF) SELECT s.bookmark_id FROM bookmark_search s
		WHERE s.tenant_id = 'whale' AND s.document @@ websearch_to_tsquery('english', 'w17');
	SQL
}
log "the narrow search's index step, policies on:"
explain >&2
policies DISABLE
log "and off:"
explain >&2
policies ENABLE

base="http://127.0.0.1:$APP_PORT/api/bookmarks"
declare -A PATHS=(
	[list]="$base?limit=20"
	[tag]="$base?limit=20&tag=t7"
	[search-narrow]="$base?limit=20&q=w17"
	[search-broad]="$base?limit=20&q=shared"
)
KINDS=(list tag search-narrow search-broad)
for kind in "${KINDS[@]}"; do
	code=$(curl -s -o "$WORK/$kind.json" -w '%{http_code}' -H 'X-Tenant-Id: whale' "${PATHS[$kind]}")
	[ "$code" = 200 ] || { cat "$WORK/$kind.json" >&2; die "$kind answered $code"; }
done

declare -A RPS P99
run() {
	local mode=$1 kind=$2 out
	out=$(wrk -t2 -c"$CONNECTIONS" -d"$DURATION" --latency -H 'X-Tenant-Id: whale' "${PATHS[$kind]}")
	grep -q "Non-2xx" <<<"$out" && { echo "$out" >&2; die "$kind ($mode): non-2xx answers"; }
	RPS[$mode.$kind]="${RPS[$mode.$kind]:-} $(awk '/^Requests\/sec/ {print $2}' <<<"$out")"
	P99[$mode.$kind]="${P99[$mode.$kind]:-} $(awk '$1 == "99%" {print $2}' <<<"$out")"
}
# Each round swaps the order, so that neither mode always runs on a colder server.
for round in $(seq 1 "$ROUNDS"); do
	order="on off"
	[ $((round % 2)) = 0 ] && order="off on"
	for mode in $order; do
		policies "$([ "$mode" = on ] && echo ENABLE || echo DISABLE)"
		log "round $round, policies $mode"
		for kind in "${KINDS[@]}"; do run "$mode" "$kind"; done
	done
done
policies ENABLE

median() { tr ' ' '\n' | grep . | sort -g | awk '{v[NR]=$1} END {print (NR % 2) ? v[(NR+1)/2] : (v[NR/2] + v[NR/2+1]) / 2}'; }
ms() { sed -E 's/([0-9.]+)us/\1 0.001/; s/([0-9.]+)ms/\1 1/; s/([0-9.]+)s$/\1 1000/' | awk '{printf "%.2f", $1 * $2}'; }
printf '\nwhale of %s rows, %s × %s per kind and mode, %s connections (medians)\n' "$ROWS" "$ROUNDS" "$DURATION" "$CONNECTIONS"
printf '| request | req/s, policies on | req/s, off | on/off | p99 on (ms) | p99 off (ms) |\n|---|---|---|---|---|---|\n'
for kind in "${KINDS[@]}"; do
	on=$(median <<<"${RPS[on.$kind]}")
	off=$(median <<<"${RPS[off.$kind]}")
	p_on=$(for v in ${P99[on.$kind]}; do ms <<<"$v"; echo; done | median)
	p_off=$(for v in ${P99[off.$kind]}; do ms <<<"$v"; echo; done | median)
	printf '| %s `%s` | %s | %s | %.3f | %s | %s |\n' "$kind" "${PATHS[$kind]#"$base"}" "$on" "$off" \
		"$(awk -v a="$on" -v b="$off" 'BEGIN {print a / b}')" "$p_on" "$p_off"
done
