#!/usr/bin/env bash
# What a fleet of logical shards costs: the same service and the same load at 2, 16 and 64
# shards, in one run on one machine. Not a test and not in CI: run it by hand on an
# otherwise idle machine; docs/performance.md keeps its figures.
#
#   scripts/bench-fleet.sh                   # builds (release), then measures
#   SKIP_BUILD=1 SHARDS="2 64" scripts/bench-fleet.sh
#
# For each shard count N it starts fresh Postgres 15 servers (Debian's binaries, initdb in
# a temp dir, loopback only, fsync off, the default max_connections of 100): 2 of them for
# N=2, SERVERS (4) otherwise, each holding its share of the N shard databases round robin
# (shard i on server i mod S), and the control database on the first. Shards own even slot
# ranges in order; none has a replica. Then, for that topology:
#   migrate   `bookmarks migrate` of the fresh databases, timed;
#   ready     `bookmarks serve` from its start to the first 200 of /ready;
#   4 shards  LOAD4 (60 s) of loadgen on 4 tenants, which live on at most 4 shards, then the
#             connections the app holds on each server (pg_stat_activity);
#   idle      the app's CPU over 10 s of doing nothing;
#   load      loadgen, open loop, RATE requests/s for DURATION on TENANTS tenants with
#             PREFILL bookmarks each, twice (pools cold on most shards, then warm): list,
#             get and create p99 (and their ratio to the first shard count's);
#   rss       the app's resident memory after the load, and its peak;
#   /ready    wrk flooding /ready for 10 s: requests/s and the probes they caused;
#   fan-out   the admin page and /api/stats, each asked 5 times (the slowest is printed),
#             then again with the last server stopped (a partial answer);
#   moves     (N ≥ 2 × servers) a 16-slot range move between two shards on one server and
#             the next 16 slots between two servers, `move_slot run --slots … --confirm`,
#             timed (with the tenants the load wrote in them).
# The app runs with `[database] processes = 1` and POOL (2) connections per shard primary:
# at 16 shards a server, the connection budget (app/sharding/budget.rs) refuses the default
# pool of 8 on a server that allows 100 connections, which is the first thing a fleet meets.
#
# Knobs: SHARDS ("2 16 64"), SERVERS (4), POOL (2), TENANTS (100), PREFILL (5), RATE (200),
# DURATION (30s), LOAD4 (60s), KEEP=1 keeps the temp dir with the logs.
# Needs postgresql-15 and postgresql-client (psql), wrk, curl, jq; as root, missing ones are
# installed with apt-get.
set -euo pipefail
cd "$(dirname "$0")/.."
ROOT=$PWD

SHARDS=${SHARDS:-2 16 64}
SERVERS=${SERVERS:-4}
POOL=${POOL:-2}
TENANTS=${TENANTS:-100}
PREFILL=${PREFILL:-5}
RATE=${RATE:-200}
DURATION=${DURATION:-30s}
LOAD4=${LOAD4:-60s}
PGBIN=${PGBIN:-/usr/lib/postgresql/15/bin}
ADMIN_TOKEN=$(head -c 32 /dev/urandom | od -An -tx1 | tr -d ' \n')
export ADMIN_TOKEN

log() { printf '== %s\n' "$*" >&2; }
die() { printf 'error: %s\n' "$*" >&2; exit 1; }

missing=()
[ -x "$PGBIN/initdb" ] || missing+=(postgresql-15)
command -v psql >/dev/null || missing+=(postgresql-client-15)
for tool in wrk curl jq; do command -v "$tool" >/dev/null || missing+=("$tool"); done
if [ ${#missing[@]} -gt 0 ]; then
	[ "$(id -u)" = 0 ] || die "missing: ${missing[*]} (apt-get install -y ${missing[*]})"
	log "installing ${missing[*]}"
	apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq "${missing[@]}" >/dev/null
fi
if [ -z "${SKIP_BUILD:-}" ]; then
	log "building (release)"
	cargo build --release --bin bookmarks --bin move_slot --bin loadgen
fi
BIN=$ROOT/target/release
for b in bookmarks move_slot loadgen; do [ -x "$BIN/$b" ] || die "build first: cargo build --release --bin $b"; done

WORK=$(mktemp -d /tmp/bench-fleet.XXXXXX)
chmod 755 "$WORK"
APP_PID=
# shellcheck source=scripts/lib/throwaway-postgres.sh
. scripts/lib/throwaway-postgres.sh
stop_app() {
	[ -n "$APP_PID" ] || return 0
	kill "$APP_PID" 2>/dev/null || true
	wait "$APP_PID" 2>/dev/null || true
	APP_PID=
}
cleanup() {
	set +e
	stop_app
	stop_servers
	if [ -n "${KEEP:-}" ]; then log "kept $WORK"; else rm -rf "$WORK"; fi
}
trap cleanup EXIT
trap 'exit 130' INT TERM

now() { date +%s.%N; }
since() { echo "$(now) - $1" | bc -l | xargs printf '%.2f'; }

psql_on() { psql -X -q -At -h 127.0.0.1 -p "$1" -U postgres -d postgres -c "$2"; }
app_connections() { psql_on "$1" "SELECT count(*) FROM pg_stat_activity WHERE usename = 'bookmarks'"; }

# p99 OPERATION FILE: the operation's p99 in a loadgen report.
p99() { jq -r --arg op "$1" '.operations[] | select(.name == $op) | .p99_ms // "n/a"' "$2"; }
ratio() { [ "$2" = n/a ] || [ "$1" = n/a ] && { echo n/a; return; }; echo "$1 / $2" | bc -l | xargs printf '%.2f'; }
slowest_of_5() {
	local url=$1 auth=$2 worst=0 t code
	for _ in 1 2 3 4 5; do
		read -r code t < <(curl -s -o /dev/null -w '%{http_code} %{time_total}\n' -H "$auth" "$url")
		worst=$(echo "if ($t > $worst) $t else $worst" | bc -l)
	done
	printf '%.0f ms (%s)' "$(echo "$worst * 1000" | bc -l)" "$code"
}

RESULTS=$WORK/results.txt
: >"$RESULTS"
result() { printf '%s\n' "$*" | tee -a "$RESULTS" >&2; }
declare -A BASE_P99

for n in $SHARDS; do
	servers=$SERVERS
	[ "$n" -lt "$SERVERS" ] && servers=$n
	log "$n shards on $servers servers"
	dir=$WORK/n$n
	ports=()
	base=$(free_port 26432)
	for s in $(seq 0 $((servers - 1))); do
		port=$(free_port $((base + s)))
		ports+=("$port")
		start_server "$dir/pg$s" "$port"
	done
	psql_on "${ports[0]}" "CREATE DATABASE control OWNER bookmarks" >/dev/null
	config=$dir/autumn.toml
	{
		echo "[database]"
		echo "primary_url = \"postgres://bookmarks:bookmarks@127.0.0.1:${ports[0]}/control?connect_timeout=2\""
		echo "pool_size = 8"
		echo "primary_pool_size = $POOL"
		echo "processes = 1"
		echo
	} >"$config"
	for i in $(seq 0 $((n - 1))); do
		port=${ports[$((i % servers))]}
		psql_on "$port" "CREATE DATABASE shard$i OWNER bookmarks" >/dev/null
		first=$((i * 16384 / n))
		last=$(((i + 1) * 16384 / n - 1))
		printf '[[database.shards]]\nname = "shard%d"\nprimary_url = "postgres://bookmarks:bookmarks@127.0.0.1:%s/shard%d?connect_timeout=2"\nslots = ["%d-%d"]\n\n' \
			"$i" "$port" "$i" "$first" "$last" >>"$config"
	done
	cat >>"$config" <<-TOML
		[tenancy]
		enabled = true
		source = "header"
		header = "X-Tenant-Id"
		auth = "api_key"
		max_in_flight_per_tenant = 64

		[sharding]
		pins = {}
		directory_router = true
	TOML
	export AUTUMN_CONFIG=$config

	started=$(now)
	"$BIN/bookmarks" migrate >"$dir/migrate.log" 2>&1 || { cat "$dir/migrate.log" >&2; die "migrate failed"; }
	result "n=$n servers=$servers migrate_s=$(since "$started")"

	app_port=$(free_port 24000)
	app=http://127.0.0.1:$app_port
	started=$(now)
	env -u RUST_LOG BIND=127.0.0.1:$app_port "$BIN/bookmarks" serve >"$dir/app.log" 2>&1 &
	APP_PID=$!
	until curl -sf -o /dev/null "$app/ready"; do
		kill -0 "$APP_PID" 2>/dev/null || { cat "$dir/app.log" >&2; die "serve exited"; }
		sleep 0.05
	done
	result "n=$n ready_s=$(since "$started")"
	# What the process costs doing nothing: its background loops (per shard: the reindexer,
	# the liveness monitor; per process: the listener, the job worker).
	ticks() { awk '{print $14 + $15}' "/proc/$APP_PID/stat"; }
	before=$(ticks)
	sleep 10
	result "n=$n idle_cpu_pct=$(echo "($(ticks) - $before) / $(getconf CLK_TCK) * 10" | bc -l | xargs printf '%.1f')"

	"$BIN/loadgen" --base-url "$app" --tenants 4 --prefill 1 --mix list=60,get=20,create=20 \
		--rate 40 --duration "$LOAD4" --quiet --json "$dir/load4.json" >/dev/null
	held=()
	for port in "${ports[@]}"; do held+=("$(app_connections "$port")"); done
	shards_hit=$(jq -r '[.shards[] | select(.name != "none")] | length' "$dir/load4.json")
	result "n=$n load_4_tenants shards_touched=$shards_hit connections_per_server=${held[*]}"

	# Twice: the first run meets pools that are not open yet on most shards, the second
	# the steady state.
	busy() { awk '/^cpu /{print $2 + $3 + $4 + $7 + $8}' /proc/stat; }
	for run in first second; do
		app_before=$(ticks)
		busy_before=$(busy)
		"$BIN/loadgen" --base-url "$app" --tenants "$TENANTS" --prefill "$PREFILL" \
			--mix list=60,get=20,create=20 --rate "$RATE" --duration "$DURATION" --seed 7 \
			--quiet --json "$dir/load-$run.json" >/dev/null
		line="n=$n load_$run rate=$RATE tenants=$TENANTS errors=$(jq -r '[.total.errors[]] | add // 0' "$dir/load-$run.json")"
		for op in list get create; do
			v=$(p99 "$op" "$dir/load-$run.json")
			[ -z "${BASE_P99[$run$op]:-}" ] && BASE_P99[$run$op]=$v
			line+=" ${op}_p99_ms=$v (x$(ratio "$v" "${BASE_P99[$run$op]}"))"
		done
		result "$line"
		# CPU per request: the app's own, and the whole machine's (the app, Postgres and
		# loadgen, prefill included): which side grows with the shard count.
		requests=$(jq -r '.total.requests + .prefill.requests' "$dir/load-$run.json")
		hz=$(getconf CLK_TCK)
		result "n=$n load_$run cpu_us_per_request app=$(echo "($(ticks) - $app_before) * 1000000 / $hz / $requests" | bc -l | xargs printf '%.0f') machine=$(echo "($(busy) - $busy_before) * 1000000 / $hz / $requests" | bc -l | xargs printf '%.0f')"
	done
	rss=$(awk '/VmRSS/{print $2}' "/proc/$APP_PID/status")
	hwm=$(awk '/VmHWM/{print $2}' "/proc/$APP_PID/status")
	held=()
	for port in "${ports[@]}"; do held+=("$(app_connections "$port")"); done
	result "n=$n rss_mib=$((rss / 1024)) peak_mib=$((hwm / 1024)) connections_per_server=${held[*]}"

	probes() { curl -s "$app/metrics" | awk '/^ready_probes_total /{print $2 + 0}'; }
	before=$(probes)
	rps=$(wrk -t2 -c4 -d10s "$app/ready" | awk '/Requests\/sec/{print $2}')
	after=$(probes)
	result "n=$n ready_flood rps=$rps probes_per_s=$(echo "($after - $before) / 10" | bc -l | xargs printf '%.1f')"

	admin="Authorization: Bearer $ADMIN_TOKEN"
	result "n=$n fanout admin_page=$(slowest_of_5 "$app/admin" "$admin") stats=$(slowest_of_5 "$app/api/stats" "$admin")"

	if [ "$n" -ge $((2 * servers)) ]; then
		# shard1 and shard(1 + servers) share a server; shard1 and shard2 do not.
		for pair in "1 $((1 + servers)) same_server 0" "1 2 across_servers 16"; do
			read -r from to what offset <<<"$pair"
			first=$((from * 16384 / n + offset))
			started=$(now)
			if "$BIN/move_slot" run --from "shard$from" --to "shard$to" --slots "$first-$((first + 15))" \
				--confirm --grace 1s >"$dir/move-$what.log" 2>&1; then
				result "n=$n move_16_slots $what shard$from->shard$to s=$(since "$started")"
			else
				result "n=$n move_16_slots $what shard$from->shard$to FAILED (see $dir/move-$what.log)"
				KEEP=1
			fi
		done
	fi

	as_pg "$PGBIN/pg_ctl" -D "$dir/pg$((servers - 1))/data" -m immediate stop >/dev/null
	sleep 1.2 # /api/stats answers from a result up to 1 s old: let it lapse
	result "n=$n fanout_server_down admin_page=$(slowest_of_5 "$app/admin" "$admin") stats=$(slowest_of_5 "$app/api/stats" "$admin")"

	stop_app
	stop_servers
done
log "results"
cat "$RESULTS"
