#!/usr/bin/env bash
# Instructions per request, counted by callgrind: a figure that, unlike requests/s on a
# shared 2-core machine, does not move from run to run (the same build gives the same count
# to within a fraction of a percent). Not a test and not in CI: run it by hand to compare
# builds.
#
#   scripts/count-instructions.sh                               # target/release, both servers
#   APP_BIN=/tmp/old/target/release/bookmarks scripts/count-instructions.sh   # another build
#   KEEP=/tmp/profiles ENDPOINT=list scripts/count-instructions.sh  # keep the profiles
#   TOKEN=1:shard0:0:0 scripts/count-instructions.sh                # with a consistency token
#
# It sets everything up with scripts/bench-request-path.sh (HOLD=1: a throwaway Postgres,
# one tenant of ROWS bookmarks, the app, the same app in trusted_header mode, and the bare
# handler), with all three servers running
# under `valgrind --tool=callgrind`. For each server it sends REQUESTS warm-up
# `GET /api/bookmarks/{id}` (ENDPOINT=list: `GET /api/bookmarks`) over four keep-alive connections, zeroes the counters, sends
# REQUESTS more (each with the tenant's API key: the app checks it, from its cache after
# the first), and prints the user-space instructions per request (background work that
# runs meanwhile, such as the liveness checks, is counted too, as it is in every run).
#
# Needs what bench-request-path.sh needs, plus valgrind (installed with apt-get as root).
set -euo pipefail
cd "$(dirname "$0")/.."
ROOT=$PWD
REQUESTS=${REQUESTS:-2000}
# get: GET /api/bookmarks/{id}; list: GET /api/bookmarks (the newest 20).
ENDPOINT=${ENDPOINT:-get}
case $ENDPOINT in get | list) ;; *) echo "ENDPOINT must be get or list, not $ENDPOINT" >&2; exit 2 ;; esac
APP_BIN=${APP_BIN:-$ROOT/target/release/bookmarks}
BARE_BIN=${BARE_BIN:-$ROOT/target/release/examples/bare_list}
[ -x "$APP_BIN" ] && [ -x "$BARE_BIN" ] || {
	echo "build first: cargo build --release --bin bookmarks --example bare_list" >&2
	exit 1
}
if ! command -v valgrind >/dev/null; then
	[ "$(id -u)" = 0 ] || { echo "missing: valgrind" >&2; exit 1; }
	apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq valgrind >/dev/null
fi

WORK=$(mktemp -d /tmp/count-instructions.XXXXXX)
BENCH_PID=
cleanup() {
	set +e
	[ -n "$BENCH_PID" ] && kill "$BENCH_PID" 2>/dev/null && wait "$BENCH_PID" 2>/dev/null
	rm -rf "$WORK"
}
trap cleanup EXIT

# Wrappers that run a server under callgrind; the app's other commands (migrate) run as is.
wrapper() {
	local name=$1 real=$2
	cat >"$WORK/$name" <<-SH
		#!/bin/sh
		case " \$* " in
		*" migrate "* | *" keys "*) exec "$real" "\$@" ;;
		esac
		exec valgrind --tool=callgrind --callgrind-out-file="$WORK/$name.%p.out" "$real" "\$@"
	SH
	chmod +x "$WORK/$name"
}
wrapper app "$APP_BIN"
wrapper bare "$BARE_BIN"

HOLD=1 SKIP_BUILD=1 SKIP_PGBENCH=1 APP_BIN="$WORK/app" BARE_BIN="$WORK/bare" \
	scripts/bench-request-path.sh 2>"$WORK/bench.log" &
BENCH_PID=$!
for _ in $(seq 1 600); do
	grep -q '== HOLD:' "$WORK/bench.log" && break
	kill -0 "$BENCH_PID" 2>/dev/null || { cat "$WORK/bench.log" >&2; exit 1; }
	sleep 0.5
done
hold=$(grep '== HOLD:' "$WORK/bench.log") || { cat "$WORK/bench.log" >&2; exit 1; }
app_url=$(grep -o 'app http://[0-9.:]*' <<<"$hold" | cut -d' ' -f2)
bare_url=$(grep -o 'bare http://[0-9.:]*' <<<"$hold" | cut -d' ' -f2)
trusted_url=$(grep -o 'trusted http://[0-9.:]*' "$WORK/bench.log" | tail -1 | cut -d' ' -f2)
get_id=$(grep -o ' id [0-9a-f-]*,' "$WORK/bench.log" | tail -1 | tr -d ' ,' | sed 's/^id//')
tenant=$(grep -o 'tenant [a-z0-9-]*,' "$WORK/bench.log" | tail -1 | cut -d' ' -f2 | tr -d ',')
key=$(grep -o 'Bearer bks_[0-9a-f]*' "$WORK/bench.log" | tail -1 | cut -d' ' -f2)
[ -n "$get_id" ] && [ -n "$tenant" ] && [ -n "$key" ] || { cat "$WORK/bench.log" >&2; exit 1; }

# TOKEN=VALUE sends it as every request's X-Consistency-Token (the token check's cost).
token_header=()
[ -n "${TOKEN:-}" ] && token_header=(-H "X-Consistency-Token: $TOKEN")

# REQUESTS gets over four connections (one curl each, reusing its connection).
gets() {
	local url=$1 per=$((REQUESTS / 4)) i pids=()
	for _ in 1 2 3 4; do
		# shellcheck disable=SC2046
		curl -fs -H "X-Tenant-Id: $tenant" -H "Authorization: Bearer $key" "${token_header[@]}" $(for i in $(seq 1 "$per"); do
			if [ "$ENDPOINT" = get ]; then
				printf '%s/api/bookmarks/%s ' "$url" "$get_id"
			else
				printf '%s/api/bookmarks ' "$url"
			fi
		done) >/dev/null &
		pids+=($!)
	done
	wait "${pids[@]}"
}

# count NAME URL PATTERN: PATTERN finds the server's valgrind process by its command line.
count() {
	local name=$1 url=$2 pattern=$3 pid out total
	pid=$(pgrep -f -- "$pattern" | head -1)
	gets "$url"
	callgrind_control -z "$pid" >/dev/null 2>&1
	gets "$url"
	callgrind_control -d "$pid" >/dev/null 2>&1
	sleep 1
	out=$(ls -t "$WORK"/*."$pid".out* | head -1)
	total=$(sed -n 's/^summary: //p; s/^totals: //p' "$out" | head -1)
	echo "$name: $((total / REQUESTS)) instructions per $ENDPOINT ($total over $REQUESTS)"
	# KEEP=DIR keeps each server's profile, for callgrind_annotate.
	if [ -n "${KEEP:-}" ]; then
		local file
		file=$(printf %s "$name" | tr -cs 'a-zA-Z' '-')
		mkdir -p "$KEEP" && cp "$out" "$KEEP/${file%-}.out"
	fi
}
count bare "$bare_url" "callgrind-out-file=$WORK/bare"
count "app, no key (trusted_header)" "$trusted_url" "serve --bind ${trusted_url#http://} "
count "app, API key" "$app_url" "serve --bind ${app_url#http://} "
