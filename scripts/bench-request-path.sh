#!/usr/bin/env bash
# What the app's request path costs over the database's ceiling and over a bare handler on
# the same stack, in one run on one machine. Not a test and not in CI: run it by hand, on
# an otherwise idle machine (it prints the load average before each measurement).
#
#   scripts/bench-request-path.sh              # builds (release), then measures
#   SKIP_BUILD=1 scripts/bench-request-path.sh # reuse target/release as it is
#
# It starts a throwaway Postgres 15 (Debian's binaries, initdb into a temp dir, loopback
# only, fsync off as in the tests), creates the control and shard databases, migrates them
# with `bookmarks migrate`, seeds one tenant with ROWS bookmarks, starts the real app
# (`bookmarks serve`, one shard plus control, directory routing on, API keys, default
# logging; every request carries the tenant's key, so each pays a cached key check) and
# the bare handler (examples/bare_list.rs: axum + deadpool + diesel-async, the app's own
# `store` queries and JSON shapes, no middleware, same pool size and recycling method),
# and measures on loopback with `wrk -t$THREADS -c$CONNS -d$DURATION --latency`, after a
# warm-up of each:
#   a) pgbench running the SQL the app sends for GET /api/bookmarks (captured from the
#      server's statement log, same parameters), `-M prepared`: the ceiling;
#   b) the bare handler: list, get by id, create;
#   c) the app: the same three;
#   d) the same app build in `trusted_header` mode (the tenant header alone, no key), the
#      same three: c) against d) is what the cached key check costs;
#   e) a small tenant's list (SMALL_ROWS, 20 bookmarks: the common case) on all of them and
#      pgbench;
#   f) latency the way users feel it: `loadgen` open loop at 50 % and 80 % of each
#      endpoint's saturation throughput found by c) (and a mix of them, 6 lists, 3 gets and
#      a create in ten), against the app and against the bare handler at the same rates,
#      with the app's reindexer and job worker running; p50, p99 and p99.9 of each side by
#      side, and the targets (at 50 %: p99 ≤ 5 ms for list and get, ≤ 10 ms for create;
#      app p99 ≤ 1.5× bare's).
# Both servers run throughout, so background work caused by the writes (the app's
# reindexer) loads both runs alike; each measurement starts with the search backlog empty.
# Prints requests/s, p99 and the server's CPU time per request of each, app/bare and
# app/pgbench, and the app's peak RSS (VmHWM) after the load. Everything it started is
# stopped and removed on exit (KEEP=1 keeps the temp dir with the logs; with PERF=1 and
# KEEP=1 it also keeps a `perf record` of the app during each of its runs).
#
# Other knobs: DURATION, WARMUP, CONNS, THREADS, ROWS, SMALL_ROWS, POOL_SIZE;
# OPEN_DURATION (20s) and LOADS ("0.5 0.8") for f), SKIP_OPEN_LOOP=1 to leave it out;
# ENDPOINTS="get create" and SKIP_PGBENCH=1 for quicker comparisons; APP_BIN/BARE_BIN to measure other builds;
# APP_RUST_LOG/APP_LOG_FORMAT to run the app with other logging; HOLD=1 to set everything
# up and wait (profiling by hand).
#
# Needs: postgresql-15 (initdb, pg_ctl, pgbench: Debian's postgresql-15 package ships them
# in /usr/lib/postgresql/15/bin), postgresql-client (psql), wrk, curl, jq. As root, missing
# ones are installed with apt-get.
set -euo pipefail
cd "$(dirname "$0")/.."
ROOT=$PWD

DURATION=${DURATION:-10s}
WARMUP=${WARMUP:-3s}
CONNS=${CONNS:-16}
THREADS=${THREADS:-2}
ROWS=${ROWS:-5000}
SMALL_ROWS=${SMALL_ROWS:-20}
POOL_SIZE=${POOL_SIZE:-8}
OPEN_DURATION=${OPEN_DURATION:-20s}
LOADS=${LOADS:-0.5 0.8}
PGBIN=${PGBIN:-/usr/lib/postgresql/15/bin}
# loadgen's own names, so that its open-loop runs (f) can address them: `--tenants 1` is
# the big tenant.
TENANT=tenant-0001
SMALL_TENANT=small-tenant
# For quicker comparisons: a subset of endpoints, or SKIP_PGBENCH=1.
ENDPOINTS=${ENDPOINTS:-list get create list-small}

log() { printf '== %s\n' "$*" >&2; }
die() { printf 'error: %s\n' "$*" >&2; exit 1; }

# HOLD=1 sets everything up, prints where it is, and waits (for profiling by hand).

# --- tools ---------------------------------------------------------------------------------
missing=()
[ -x "$PGBIN/initdb" ] && [ -x "$PGBIN/pgbench" ] || missing+=(postgresql-15)
command -v psql >/dev/null || missing+=(postgresql-client-15)
for tool in wrk curl jq; do command -v "$tool" >/dev/null || missing+=("$tool"); done
if [ ${#missing[@]} -gt 0 ]; then
	[ "$(id -u)" = 0 ] || die "missing: ${missing[*]} (apt-get install -y ${missing[*]})"
	log "installing ${missing[*]}"
	apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq "${missing[@]}" >/dev/null
fi

if [ -z "${SKIP_BUILD:-}" ]; then
	log "building (release)"
	flock /tmp/cargo-build.lock cargo build --release --bin bookmarks --example bare_list --bin loadgen
fi
LOADGEN_BIN=${LOADGEN_BIN:-$ROOT/target/release/loadgen}
# APP_BIN / BARE_BIN: measure other builds (say, copies of an earlier commit's) instead.
APP_BIN=${APP_BIN:-$ROOT/target/release/bookmarks}
BARE_BIN=${BARE_BIN:-$ROOT/target/release/examples/bare_list}
[ -x "$APP_BIN" ] && [ -x "$BARE_BIN" ] || die "build first: cargo build --release --bin bookmarks --example bare_list"

# --- temp dir, ports, cleanup --------------------------------------------------------------
WORK=$(mktemp -d /tmp/bench-request-path.XXXXXX)
chmod 755 "$WORK"
PGDATA=$WORK/pgdata
APP_PID=
BARE_PID=
TRUSTED_PID=
PG_STARTED=

# Postgres refuses to run as root: run its binaries as `postgres` then.
as_pg() {
	if [ "$(id -u)" = 0 ]; then runuser -u postgres -- "$@"; else "$@"; fi
}

cleanup() {
	set +e
	[ -n "$APP_PID" ] && kill "$APP_PID" 2>/dev/null && wait "$APP_PID" 2>/dev/null
	[ -n "$BARE_PID" ] && kill "$BARE_PID" 2>/dev/null && wait "$BARE_PID" 2>/dev/null
	[ -n "$TRUSTED_PID" ] && kill "$TRUSTED_PID" 2>/dev/null && wait "$TRUSTED_PID" 2>/dev/null
	[ -n "$PG_STARTED" ] && as_pg "$PGBIN/pg_ctl" -D "$PGDATA" -m immediate stop >/dev/null 2>&1
	if [ -n "${KEEP:-}" ]; then
		log "kept $WORK"
	else
		rm -rf "$WORK"
	fi
}
trap cleanup EXIT
trap 'exit 130' INT TERM

free_port() {
	local p
	for p in $(seq "$1" $(($1 + 500))); do
		if ! ss -Hltn "sport = :$p" | grep -q .; then
			echo "$p"
			return
		fi
	done
	die "no free port from $1"
}
PGPORT=$(free_port 25432)
APP_PORT=$(free_port 23000)
BARE_PORT=$(free_port $((APP_PORT + 1)))
TRUSTED_PORT=$(free_port $((BARE_PORT + 1)))

# --- Postgres ------------------------------------------------------------------------------
log "starting Postgres 15 on 127.0.0.1:$PGPORT"
mkdir -p "$PGDATA" "$WORK/sock"
[ "$(id -u)" = 0 ] && chown postgres: "$PGDATA" "$WORK/sock"
as_pg "$PGBIN/initdb" -D "$PGDATA" -U postgres --auth=trust -E UTF8 --locale=C.UTF-8 >/dev/null
as_pg touch "$WORK/sock/postgres.log" 2>/dev/null || true
as_pg "$PGBIN/pg_ctl" -D "$PGDATA" -l "$WORK/sock/postgres.log" -w -o "\
 -c listen_addresses=127.0.0.1 -c port=$PGPORT -c unix_socket_directories=$WORK/sock \
 -c max_connections=100 -c fsync=off -c log_line_prefix='%m [%p] '" start >/dev/null
PG_STARTED=1
PG_LOG=$WORK/sock/postgres.log
psql_as() {
	local user=$1 db=$2
	shift 2
	psql -X -q -v ON_ERROR_STOP=1 -h 127.0.0.1 -p "$PGPORT" -U "$user" -d "$db" "$@"
}
psql_as postgres postgres <<-SQL
	CREATE ROLE bookmarks LOGIN SUPERUSER PASSWORD 'bookmarks';
	CREATE DATABASE bookmarks_control OWNER bookmarks;
	CREATE DATABASE bookmarks_shard OWNER bookmarks;
SQL
shard_sql() { psql_as bookmarks bookmarks_shard -At -c "$1"; }

# --- the app's configuration and schema -----------------------------------------------------
DB=postgres://bookmarks:bookmarks@127.0.0.1:$PGPORT
CONFIG=$WORK/autumn.toml
cat >"$CONFIG" <<-TOML
	[database]
	primary_url = "$DB/bookmarks_control?connect_timeout=2"
	pool_size = 8
	primary_pool_size = $POOL_SIZE
	replica_pool_size = 4
	replica_fallback = "primary"
	connect_timeout_ms = 2000
	acquire_timeout_ms = 3000

	[[database.shards]]
	name = "shard0"
	primary_url = "$DB/bookmarks_shard?connect_timeout=2"
	slots = ["0-16383"]

	[tenancy]
	enabled = true
	source = "header"
	header = "X-Tenant-Id"
	auth = "api_key"
	# One tenant takes all the load here: its bulkhead (16 by default, fairness between
	# tenants, measured by the whale experiment) would refuse the open loop's bursts.
	max_in_flight_per_tenant = 4096

	[sharding]
	pins = {}
	directory_router = true
	directory_cache_ttl_ms = 30000
TOML
# The same app, trusting the tenant header instead of checking a key.
sed 's/^auth = "api_key"$/auth = "trusted_header"/' "$CONFIG" >"$WORK/autumn-trusted.toml"
grep -q '^auth = "trusted_header"$' "$WORK/autumn-trusted.toml" || die "no trusted_header config"
# The app's own environment overrides must not leak into the run.
APP_ENV=(env -u RUST_LOG -u LOG_FORMAT -u AUTUMN_ENV -u ADMIN_TOKEN)
# APP_RUST_LOG / APP_LOG_FORMAT: run the app with other logging than the default (info, text).
[ -z "${APP_RUST_LOG:-}" ] || APP_ENV+=("RUST_LOG=$APP_RUST_LOG")
[ -z "${APP_LOG_FORMAT:-}" ] || APP_ENV+=("LOG_FORMAT=$APP_LOG_FORMAT")
while IFS= read -r var; do APP_ENV+=(-u "$var"); done < <(env | sed -n 's/^\(AUTUMN_[A-Z0-9_]*\)=.*/\1/p')

log "migrating"
"${APP_ENV[@]}" "$APP_BIN" --config "$CONFIG" migrate >"$WORK/migrate.log" 2>&1 ||
	{ cat "$WORK/migrate.log" >&2; die "migrate failed"; }

log "seeding $ROWS bookmarks for tenant $TENANT"
# UUIDv7-shaped ids (time-ordered), as the app mints them.
shard_sql "
INSERT INTO bookmarks (tenant_id, id, url, title, notes, tags, created_at, updated_at)
SELECT '$TENANT',
       (lpad(to_hex(x.ms), 12, '0') || '7' || substr(x.h, 1, 3) || '8' || substr(x.h, 4, 15))::uuid,
       'https://example.com/seed/' || i, 'Seeded bookmark ' || i,
       'Notes of seeded bookmark ' || i, ARRAY['bench', 'tag' || (i % 10)], t.ts, t.ts
FROM generate_series(1, $ROWS) AS i,
     LATERAL (SELECT now() - make_interval(secs => $ROWS - i) AS ts) AS t,
     LATERAL (SELECT (extract(epoch FROM t.ts) * 1000)::bigint AS ms, md5(i::text) AS h) AS x;
" >/dev/null
shard_sql "
INSERT INTO bookmarks (tenant_id, id, url, title, notes, tags)
SELECT '$SMALL_TENANT', gen_random_uuid(), 'https://example.com/small/' || i, 'Small ' || i,
       '', ARRAY['bench'] FROM generate_series(1, $SMALL_ROWS) AS i;
" >/dev/null
shard_sql "VACUUM ANALYZE" >/dev/null
GET_ID=$(shard_sql "SELECT id FROM bookmarks WHERE tenant_id = '$TENANT' ORDER BY id OFFSET $((ROWS / 2)) LIMIT 1")
KEY=$("${APP_ENV[@]}" "$APP_BIN" --config "$CONFIG" keys create "$TENANT" --note bench --key-only)
SMALL_KEY=$("${APP_ENV[@]}" "$APP_BIN" --config "$CONFIG" keys create "$SMALL_TENANT" --note bench --key-only)
# Both servers get the same headers; the bare handler ignores the key.
AUTH="Authorization: Bearer $KEY"
# The admin API (loadgen makes its keys there in f).
ADMIN_TOKEN=$(head -c 24 /dev/urandom | od -An -tx1 | tr -d ' \n')

# --- servers -------------------------------------------------------------------------------
log "starting the app on 127.0.0.1:$APP_PORT and the bare handler on 127.0.0.1:$BARE_PORT"
"${APP_ENV[@]}" ADMIN_TOKEN="$ADMIN_TOKEN" "$APP_BIN" --config "$CONFIG" serve --bind "127.0.0.1:$APP_PORT" \
	--instance-name bench >"$WORK/app.log" 2>&1 &
APP_PID=$!
"${APP_ENV[@]}" "$APP_BIN" --config "$WORK/autumn-trusted.toml" serve --bind "127.0.0.1:$TRUSTED_PORT" \
	--instance-name bench-trusted >"$WORK/trusted.log" 2>&1 &
TRUSTED_PID=$!
DATABASE_URL="$DB/bookmarks_shard?connect_timeout=2" BIND="127.0.0.1:$BARE_PORT" \
	POOL_SIZE=$POOL_SIZE SHARD=shard0 "$BARE_BIN" >"$WORK/bare.log" 2>&1 &
BARE_PID=$!

wait_up() {
	local url=$1 pid=$2 name=$3 i
	for i in $(seq 1 100); do
		kill -0 "$pid" 2>/dev/null || { tail -20 "$WORK/$name.log" >&2; die "$name exited"; }
		curl -fs -o /dev/null "$url" -H "X-Tenant-Id: $TENANT" -H "$AUTH" && return
		sleep 0.1
	done
	die "$name did not answer at $url"
}
wait_up "http://127.0.0.1:$APP_PORT/api/bookmarks" "$APP_PID" app
wait_up "http://127.0.0.1:$BARE_PORT/api/bookmarks" "$BARE_PID" bare
wait_up "http://127.0.0.1:$TRUSTED_PORT/api/bookmarks" "$TRUSTED_PID" trusted
# Without its key the app refuses the tenant: the key check is really on the path.
code=$(curl -s -o /dev/null -w '%{http_code}' "http://127.0.0.1:$APP_PORT/api/bookmarks" -H "X-Tenant-Id: $TENANT")
[ "$code" = 401 ] || die "the app answered $code without a key, not 401"

# Both answer the same shapes.
for port in "$APP_PORT" "$BARE_PORT" "$TRUSTED_PORT"; do
	n=$(curl -fs "http://127.0.0.1:$port/api/bookmarks" -H "X-Tenant-Id: $TENANT" -H "$AUTH" | jq '.items | length')
	[ "$n" = 20 ] || die "list on port $port returned $n items, not 20"
	id=$(curl -fs "http://127.0.0.1:$port/api/bookmarks/$GET_ID" -H "X-Tenant-Id: $TENANT" -H "$AUTH" | jq -r .id)
	[ "$id" = "$GET_ID" ] || die "get on port $port returned id $id"
done

# The reindexer indexes the seeded rows (and later the created ones): measure without a
# backlog being worked off.
wait_backlog() {
	local i n
	for i in $(seq 1 600); do
		n=$(shard_sql "SELECT count(*) FROM search_pending")
		[ "$n" = 0 ] && return
		sleep 0.2
	done
	log "warning: search backlog still $n rows"
}

# --- the list SQL, as the app sends it -----------------------------------------------------
log "capturing the list SQL"
psql_as postgres postgres -c "ALTER SYSTEM SET log_statement = 'all'" -c "SELECT pg_reload_conf()" >/dev/null
sleep 0.5
curl -fs -o /dev/null "http://127.0.0.1:$APP_PORT/api/bookmarks" -H "X-Tenant-Id: $TENANT" -H "$AUTH"
sleep 0.5
psql_as postgres postgres -c "ALTER SYSTEM RESET log_statement" -c "SELECT pg_reload_conf()" >/dev/null
# `LOG:  execute <name>: SELECT … FROM "bookmarks" … ORDER BY "bookmarks"."id" DESC …`
# followed by `DETAIL:  parameters: $1 = '…', $2 = '…'`.
stmt_line=$(grep -n 'execute [^:]*: SELECT .*FROM "bookmarks".*ORDER BY "bookmarks"."id" DESC' "$PG_LOG" | tail -1)
[ -n "$stmt_line" ] || die "the list statement was not found in $PG_LOG"
line_no=${stmt_line%%:*}
LIST_SQL=$(sed -n "${line_no}p" "$PG_LOG" | sed 's/.*execute [^:]*: //')
PARAMS=$(sed -n "$((line_no + 1))p" "$PG_LOG")
case $PARAMS in *"DETAIL:  parameters:"*) ;; *) die "no parameters after the list statement" ;; esac
PGBENCH_VARS=()
while IFS= read -r p; do
	n=${p%% =*}
	n=${n#\$}
	v=${p#*= \'}
	v=${v%\'}
	PGBENCH_VARS+=(-D "p$n=$v")
done < <(grep -o "\$[0-9]* = '[^']*'" <<<"$PARAMS")
# `$1` becomes `:p1`, which pgbench -M prepared sends as a parameter again.
sed -E 's/\$([0-9]+)/:p\1/g' <<<"$LIST_SQL;" >"$WORK/list.sql"
printf '   %s\n   params: %s\n' "$LIST_SQL" "${PARAMS#*parameters: }" >&2

if [ -n "${HOLD:-}" ]; then
	log "HOLD: app http://127.0.0.1:$APP_PORT (pid $APP_PID), bare http://127.0.0.1:$BARE_PORT (pid $BARE_PID),"
	log "      trusted http://127.0.0.1:$TRUSTED_PORT (pid $TRUSTED_PID, trusted_header),"
	log "      postgres 127.0.0.1:$PGPORT (user bookmarks), tenant $TENANT, id $GET_ID, dir $WORK; Ctrl-C ends"
	log "      $AUTH"
	# Without a terminal of its own, so it holds no caller's pipe open, and ended with us.
	sleep infinity </dev/null >/dev/null 2>&1 &
	HOLD_PID=$!
	trap 'kill "$HOLD_PID" 2>/dev/null; exit 130' INT TERM
	wait "$HOLD_PID" || true
	exit 0
fi

load() { printf 'load average %s' "$(cut -d' ' -f1-3 /proc/loadavg)"; }

# --- a) pgbench ----------------------------------------------------------------------------
secs() { local d=$1; case $d in *s) echo "${d%s}" ;; *m) echo $((${d%m} * 60)) ;; *) echo "$d" ;; esac; }
# pgbench_run DURATION LOG-PREFIX [TENANT]: the list SQL for the big tenant, or TENANT.
pgbench_run() {
	local dur=$1 logp=$2 vars=("${PGBENCH_VARS[@]}")
	[ -z "${3:-}" ] || vars+=(-D "p1=$3")
	PGPASSWORD=bookmarks "$PGBIN/pgbench" -n -c "$CONNS" -j "$THREADS" -T "$(secs "$dur")" -M prepared \
		-f "$WORK/list.sql" "${vars[@]}" ${logp:+-l --log-prefix="$logp"} \
		-h 127.0.0.1 -p "$PGPORT" -U bookmarks bookmarks_shard 2>&1
}
PGB_RPS=0
PGB_P99=-
PGB_SMALL_RPS=0
if [ -z "${SKIP_PGBENCH:-}" ]; then
	log "pgbench warm-up ($WARMUP)"
	pgbench_run "$WARMUP" "" >/dev/null
	log "pgbench ($DURATION, $(load))"
	out=$(pgbench_run "$DURATION" "$WORK/pgbench")
	if ! grep -q "^number of failed transactions: 0 " <<<"$out"; then
		printf '%s\n' "$out" >&2
		die "pgbench failed"
	fi
	PGB_RPS=$(sed -n 's/^tps = \([0-9.]*\) .*/\1/p' <<<"$out" | tail -1 | xargs printf '%.2f')
	# Per-transaction log: the third column is the latency in microseconds.
	PGB_P99=$(cat "$WORK"/pgbench.* | awk '{print $3}' | sort -n |
		awk '{a[NR]=$1} END {i=int(NR*0.99); if (i<1) i=1; printf "%.2fms", a[i]/1000}')
	rm -f "$WORK"/pgbench.*
	log "pgbench, the small tenant ($DURATION, $(load))"
	PGB_SMALL_RPS=$(pgbench_run "$DURATION" "" "$SMALL_TENANT" | sed -n 's/^tps = \([0-9.]*\) .*/\1/p' | tail -1 | xargs printf '%.2f')
fi

# --- b) and c) wrk -------------------------------------------------------------------------
cat >"$WORK/create.lua" <<-'LUA'
	-- POST /api/bookmarks with a URL no other request of any run uses.
	local threads = {}
	function setup(thread)
	    table.insert(threads, thread)
	    thread:set("tid", #threads)
	end
	function init(args)
	    prefix = args[1]
	    tenant = args[2]
	    auth = args[3]
	    counter = 0
	end
	function request()
	    counter = counter + 1
	    local body = string.format(
	        '{"url":"https://example.com/%s/%d/%d","title":"wrk %d","tags":["bench","wrk"]}',
	        prefix, tid, counter, counter)
	    return wrk.format("POST", "/api/bookmarks",
	        {["Content-Type"] = "application/json", ["X-Tenant-Id"] = tenant,
	         ["Authorization"] = auth}, body)
	end
LUA

# wrk_run NAME PORT ENDPOINT DURATION -> "req/s p99" (and the full output in $WORK/wrk-NAME.txt)
wrk_run() {
	local name=$1 port=$2 endpoint=$3 dur=$4 url args=() tenant=$TENANT auth=$AUTH
	case $endpoint in
	list) url=/api/bookmarks ;;
	list-small)
		url=/api/bookmarks
		tenant=$SMALL_TENANT auth="Authorization: Bearer $SMALL_KEY"
		;;
	get) url=/api/bookmarks/$GET_ID ;;
	create)
		url=/api/bookmarks
		args=(-s "$WORK/create.lua")
		;;
	esac
	local out=$WORK/wrk-$name.txt
	wrk -t"$THREADS" -c"$CONNS" -d"$dur" --latency -H "X-Tenant-Id: $tenant" -H "$auth" "${args[@]}" \
		"http://127.0.0.1:$port$url" ${args:+-- "$name-$$-$(date +%s%N)" "$TENANT" "Bearer $KEY"} >"$out" 2>&1
	if grep -q -e 'Non-2xx' -e 'Socket errors' "$out"; then
		log "warning: $name: $(grep -e 'Non-2xx' -e 'Socket errors' "$out" | tr -s ' ')"
	fi
	local rps p99
	rps=$(awk '/^Requests\/sec:/ {print $2}' "$out")
	p99=$(awk '$1 == "99%" {print $2}' "$out")
	echo "$rps $p99"
}

# The server's own CPU time (user + system) per request: steadier than req/s on a busy machine.
cpu_ticks() { awk '{print $14 + $15}' "/proc/$1/stat"; }
declare -A RPS P99 CPU
for endpoint in $ENDPOINTS; do
	for server in bare trusted app; do
		case $server in
		bare) port=$BARE_PORT pid=$BARE_PID ;;
		trusted) port=$TRUSTED_PORT pid=$TRUSTED_PID ;;
		app) port=$APP_PORT pid=$APP_PID ;;
		esac
		wait_backlog
		wrk_run "$server-$endpoint-warmup" "$port" "$endpoint" "$WARMUP" >/dev/null
		wait_backlog
		log "$server $endpoint ($DURATION, $(load))"
		perf_pid=
		if [ -n "${PERF:-}" ] && [ $server = app ]; then
			perf record -q -e cpu-clock -F 999 -g -p "$APP_PID" -o "$WORK/perf-app-$endpoint.data" \
				-- sleep "$(secs "$DURATION")" >/dev/null 2>&1 &
			perf_pid=$!
		fi
		cpu_before=$(cpu_ticks "$pid")
		read -r rps p99 < <(wrk_run "$server-$endpoint" "$port" "$endpoint" "$DURATION")
		n=$(awk '/requests in/ {print $1}' "$WORK/wrk-$server-$endpoint.txt")
		CPU[$server-$endpoint]=$(awk -v t="$(($(cpu_ticks "$pid") - cpu_before))" -v hz="$(getconf CLK_TCK)" -v n="$n" \
			'BEGIN { if (n > 0) printf "%.0f", t * 1e6 / hz / n; else print "-" }')
		[ -z "$perf_pid" ] || wait "$perf_pid" || true
		RPS[$server-$endpoint]=$rps
		P99[$server-$endpoint]=$p99
	done
done

# --- f) open loop at shares of saturation -------------------------------------------------
# loadgen_run NAME PORT MIX RATE -> "p50 p99 p99.9" in ms (its report in $WORK/loadgen-NAME.json)
loadgen_run() {
	local name=$1 port=$2 mix=$3 rate=$4 keys=()
	[ "$port" != "$APP_PORT" ] || keys=(--admin-token "$ADMIN_TOKEN")
	local common=(--base-url "http://127.0.0.1:$port" "${keys[@]}" --tenants 1 --seed 5
		--mix "$mix" --rate "$rate" --quiet)
	# A warm-up at the same rate first, as for wrk: connections, caches, the planner.
	"$LOADGEN_BIN" "${common[@]}" --duration "$WARMUP" >/dev/null 2>&1
	"$LOADGEN_BIN" "${common[@]}" --duration "$OPEN_DURATION" \
		--json "$WORK/loadgen-$name.json" >/dev/null 2>"$WORK/loadgen-$name.err" ||
		{ cat "$WORK/loadgen-$name.err" >&2; die "loadgen $name failed"; }
	jq -r '.total | "\(.p50_ms) \(.p99_ms) \(.p999_ms) \(.requests - .ok)"' "$WORK/loadgen-$name.json"
}
declare -A OPEN MIXES=([list]="list=1" [get]="get=1" [create]="create=1" [mix]="list=6,get=3,create=1")
OPEN_ENDPOINTS=()
if [ -z "${SKIP_OPEN_LOOP:-}" ]; then
	for endpoint in list get create; do
		[ -n "${RPS[app-$endpoint]:-}" ] && OPEN_ENDPOINTS+=("$endpoint")
	done
	# The mix saturates where its parts' times per request add up.
	if [ ${#OPEN_ENDPOINTS[@]} = 3 ]; then
		RPS[app-mix]=$(awk -v l="${RPS[app-list]}" -v g="${RPS[app-get]}" -v c="${RPS[app-create]}" \
			'BEGIN { printf "%.0f", 1 / (0.6 / l + 0.3 / g + 0.1 / c) }')
		OPEN_ENDPOINTS+=(mix)
	fi
	# Which server goes first alternates, and each measurement starts from a checkpoint, so
	# that the aftermath of what ran before (dirty pages, vacuum) lands on neither alone.
	order=(app bare)
	for endpoint in "${OPEN_ENDPOINTS[@]}"; do
		for share in $LOADS; do
			rate=$(awk -v r="${RPS[app-$endpoint]}" -v s="$share" 'BEGIN { printf "%.0f", r * s }')
			order=("${order[1]}" "${order[0]}")
			for server in "${order[@]}"; do
				port=$APP_PORT
				[ $server = app ] || port=$BARE_PORT
				wait_backlog
				psql_as postgres postgres -c CHECKPOINT >/dev/null
				log "open loop: $server $endpoint at $rate/s ($share of the app's saturation, $(load))"
				OPEN[$server-$endpoint-$share]=$(loadgen_run "$server-$endpoint-$share" "$port" "${MIXES[$endpoint]}" "$rate")
				OPEN[rate-$endpoint-$share]=$rate
			done
		done
	done
fi

APP_HWM=$(awk '/^VmHWM/ {printf "%.1f", $2/1024}' "/proc/$APP_PID/status")
APP_RSS=$(awk '/^VmRSS/ {printf "%.1f", $2/1024}' "/proc/$APP_PID/status")
BARE_HWM=$(awk '/^VmHWM/ {printf "%.1f", $2/1024}' "/proc/$BARE_PID/status")

# --- report --------------------------------------------------------------------------------
pct() { awk -v a="$1" -v b="$2" 'BEGIN { if (b > 0) printf "%.1f%%", 100 * a / b; else print "-" }'; }
echo
echo "request path: wrk -t$THREADS -c$CONNS -d$DURATION on loopback, $(nproc) cores, pool $POOL_SIZE, $ROWS bookmarks"
echo "(bare: the bare handler; no key: the app with auth = \"trusted_header\"; app: the app checking the request's API key)"
printf '%-8s %11s %9s %8s %11s %9s %8s %11s %9s %8s %9s %9s %9s\n' endpoint "bare req/s" "bare p99" "bare cpu" \
	"nokey req/s" "nokey p99" "nokey cpu" "app req/s" "app p99" "app cpu" "app/bare" "app/nokey" "key cpu"
for endpoint in $ENDPOINTS; do
	printf '%-8s %11s %9s %6sus %11s %9s %6sus %11s %9s %6sus %9s %9s %7sus\n' "$endpoint" \
		"${RPS[bare-$endpoint]}" "${P99[bare-$endpoint]}" "${CPU[bare-$endpoint]}" \
		"${RPS[trusted-$endpoint]}" "${P99[trusted-$endpoint]}" "${CPU[trusted-$endpoint]}" \
		"${RPS[app-$endpoint]}" "${P99[app-$endpoint]}" "${CPU[app-$endpoint]}" \
		"$(pct "${RPS[app-$endpoint]}" "${RPS[bare-$endpoint]}")" \
		"$(pct "${RPS[app-$endpoint]}" "${RPS[trusted-$endpoint]}")" \
		"$(awk -v a="${CPU[app-$endpoint]}" -v b="${CPU[trusted-$endpoint]}" 'BEGIN { printf "%+d", a - b }')"
done
echo "(cpu: the server process's CPU time per request, user + system)"
printf '%-8s %12s %10s   (pgbench -M prepared, the list SQL)\n' pgbench "$PGB_RPS" "$PGB_P99"
[ -z "${RPS[app-list]:-}" ] || echo "app list / pgbench: $(pct "${RPS[app-list]}" "$PGB_RPS"); bare list / pgbench: $(pct "${RPS[bare-list]}" "$PGB_RPS")"
[ -z "${RPS[app-list-small]:-}" ] || echo "small tenant ($SMALL_ROWS bookmarks) list: app $(pct "${RPS[app-list-small]}" "${RPS[bare-list-small]}") of bare, app $(pct "${RPS[app-list-small]}" "$PGB_SMALL_RPS") of pgbench ($PGB_SMALL_RPS/s)"
echo "app peak RSS (VmHWM): $APP_HWM MiB (RSS now $APP_RSS MiB); bare peak RSS: $BARE_HWM MiB"
if [ ${#OPEN_ENDPOINTS[@]} -gt 0 ]; then
	echo
	echo "open loop (loadgen, $OPEN_DURATION each, latency from each request's intended send time; reindexer and job worker running):"
	printf '%-7s %5s %7s  %8s %8s %8s  %8s %8s %8s  %9s  %s\n' endpoint share "req/s" \
		"app p50" "app p99" "p99.9" "bare p50" "bare p99" "p99.9" "app/bare" "targets"
	for endpoint in "${OPEN_ENDPOINTS[@]}"; do
		for share in $LOADS; do
			read -r a50 a99 a999 afail <<<"${OPEN[app-$endpoint-$share]}"
			read -r b50 b99 b999 bfail <<<"${OPEN[bare-$endpoint-$share]}"
			ratio=$(awk -v a="$a99" -v b="$b99" 'BEGIN { printf "%.2f", a / b }')
			verdict="app/bare $(awk -v r="$ratio" 'BEGIN { print (r <= 1.5) ? "met" : "MISSED" }')"
			if [ "$share" = 0.5 ]; then
				limit=5
				[ "$endpoint" != create ] || limit=10
				[ "$endpoint" != mix ] || limit=
				[ -z "$limit" ] || verdict="p99 ≤ ${limit} ms $(awk -v a="$a99" -v l="$limit" 'BEGIN { print (a <= l) ? "met" : "MISSED" }'), $verdict"
			fi
			[ "$afail$bfail" = 00 ] || verdict="$verdict; failed: app $afail, bare $bfail"
			printf '%-7s %5s %7s  %8.2f %8.2f %8.2f  %8.2f %8.2f %8.2f  %9s  %s\n' "$endpoint" "$share" \
				"${OPEN[rate-$endpoint-$share]}" "$a50" "$a99" "$a999" "$b50" "$b99" "$b999" "$ratio" "$verdict"
		done
	done
fi
