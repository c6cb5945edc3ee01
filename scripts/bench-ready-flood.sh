#!/usr/bin/env bash
# What a flood of /ready costs a replica's databases and its tenants. Not a test and not in
# CI: run it by hand to check that readiness stays cheap to ask.
#
#   scripts/bench-ready-flood.sh                 # target/release as it is
#   FLOOD_CONNS="1 3 64" scripts/bench-ready-flood.sh
#
# It sets up the app with scripts/bench-request-path.sh (HOLD=1: a throwaway Postgres, one
# tenant, `bookmarks serve` with the default READY_MAX_AGE_MS of 1 000), then, for each
# flood size, measures a tenant's `GET /api/bookmarks/{id}` (wrk, 8 connections, 10 s,
# with its API key) three ways in one run: quiet; beside a flood of /health (the floor:
# the same number of requests competing for the same two cores, no database work); and
# beside a flood of /ready on FLOOD_CONNS connections. It prints each flood's rate, the
# tenant's p99 beside the quiet one, and how many probes the /ready flood caused
# (`ready_probes_total`), which the cache holds to about one a second whatever the rate.
set -euo pipefail
cd "$(dirname "$0")/.."
FLOOD_CONNS=${FLOOD_CONNS:-"3 64"}
DURATION=${DURATION:-10}
command -v wrk >/dev/null || { echo "missing: wrk (apt-get install wrk)" >&2; exit 1; }
[ -x target/release/bookmarks ] && [ -x target/release/examples/bare_list ] || {
	echo "build first: cargo build --release --bin bookmarks --example bare_list" >&2
	exit 1
}

log="$(mktemp /tmp/bench-ready-flood.XXXXXX)"
HOLD=1 SKIP_BUILD=1 SKIP_PGBENCH=1 scripts/bench-request-path.sh 2>"$log" &
bench=$!
trap 'kill "$bench" 2>/dev/null; wait "$bench" 2>/dev/null; rm -f "$log"' EXIT
for _ in $(seq 1 600); do
	grep -q '== HOLD:' "$log" && break
	kill -0 "$bench" 2>/dev/null || { cat "$log" >&2; exit 1; }
	sleep 0.5
done
app=$(grep -o 'app http://[0-9.:]*' "$log" | head -1 | cut -d' ' -f2)
id=$(grep -o ' id [0-9a-f-]*,' "$log" | tail -1 | tr -d ' ,' | sed 's/^id//')
key=$(grep -o 'Bearer bks_[0-9a-f]*' "$log" | tail -1 | cut -d' ' -f2)
[ -n "$app" ] && [ -n "$id" ] && [ -n "$key" ] || { cat "$log" >&2; exit 1; }

probes() { curl -s "$app/metrics" | awk '/^ready_probes_total /{print $2 + 0}'; }
# The tenant's p99 over DURATION seconds, as wrk prints it.
tenant_p99() {
	wrk -t1 -c8 -d"${DURATION}s" --latency -H "Authorization: Bearer $key" "$app/api/bookmarks/$id" |
		awk '$1 == "99%" {print $2}'
}
wrk -t1 -c8 -d3s -H "Authorization: Bearer $key" "$app/api/bookmarks/$id" >/dev/null

printf '%-7s %-8s %12s %12s %12s %8s\n' conns flood flood_rps tenant_p99 quiet_p99 probes
for conns in $FLOOD_CONNS; do
	quiet=$(tenant_p99)
	for path in health ready; do
		before=$(probes)
		out="$(mktemp)"
		wrk -t1 -c"$conns" -d"$((DURATION + 1))s" "$app/$path" >"$out" &
		flood=$!
		sleep 0.5
		p99=$(tenant_p99)
		wait "$flood"
		rate=$(awk '/Requests\/sec/ {print $2}' "$out")
		rm -f "$out"
		printf '%-7s %-8s %12s %12s %12s %8s\n' "$conns" "/$path" "$rate" "$p99" "$quiet" \
			"$(($(probes) - before))"
	done
done
