#!/usr/bin/env bash
# The whale experiment of docs/load-testing.md, rerunnable: on a compose stack of its own,
# loadgen sends the same open-loop load four times and writes each run's report, JSON and
# plot under docs/load-testing/ (or $OUT), then prints the summary table the document shows.
#
#   1. baseline: uniform tenants, no whale;
#   2. whale:    one tenant (whale-corp) takes half of all requests, on a shard it shares;
#   3. bulkhead: the same, with MAX_IN_FLIGHT_PER_TENANT=4 (of a shard pool of 8);
#   4. moved:    the same as 2 after `move_slot` moved whale-corp to the other shard and
#                SETTLE seconds of unrecorded load (the source shard's aftermath).
#
# On one machine every container shares the same cores, so a busy shard would slow the
# other one down as much as itself, which is not what separate shard servers do. Each shard
# primary is therefore held to SHARD_CPUS cores (`docker update --cpus`), standing in for a
# server of its own with a fixed capacity; the web replicas, nginx and loadgen share the rest.
#
# Knobs (environment): RATE (requests/s, default 700), DURATION (default 30s), TENANTS
# (default 100), PREFILL (bookmarks per tenant, default 20), SHARD_CPUS (default 0.2),
# SETTLE (seconds, default 20; 0 measures right after the move), OUT. Not part of CI.
# Offline machines: build the stand-ins first (scripts/build-offline-images.sh and
# scripts/build-offline-app-image.sh); they are used when present.
set -euo pipefail
cd "$(dirname "$0")/.."

RATE=${RATE:-700}
SHARD_CPUS=${SHARD_CPUS:-0.2}
DURATION=${DURATION:-30s}
TENANTS=${TENANTS:-100}
PREFILL=${PREFILL:-20}
OUT=${OUT:-docs/load-testing}
WHALE=whale-corp
export COMPOSE_PROJECT_NAME=bookmarks-whale
export BOOKMARKS_HTTP_PORT=${BOOKMARKS_HTTP_PORT:-18081}
# shellcheck source=scripts/lib/compose-stack.sh
. scripts/lib/compose-stack.sh
mkdir -p "$OUT"

cargo build --release --locked --bin loadgen
loadgen=target/release/loadgen

# (Re)starts the stack with a bulkhead limit; waits until nginx serves.
up() {
	MAX_IN_FLIGHT_PER_TENANT=$1 docker compose up -d --wait >/dev/null 2>&1 \
		|| MAX_IN_FLIGHT_PER_TENANT=$1 docker compose up -d >/dev/null
	until curl -sf -o /dev/null "$base/ready"; do sleep 1; done
	# shellcheck disable=SC2046 # one container id per word
	docker update --cpus "$SHARD_CPUS" $(docker compose ps -q postgres-shard-0 postgres-shard-1) >/dev/null
}
# One measured run: name, then extra loadgen flags.
run() {
	local name=$1
	shift
	echo "== $name"
	"$loadgen" --base-url "$base" --admin-token "$ADMIN_TOKEN" --tenants "$TENANTS" --seed 7 --prefill "$PREFILL" \
		--rate "$RATE" --duration "$DURATION" --quiet \
		--json "$OUT/$name.json" --plot "$OUT/$name.svg" "$@" | tee "$OUT/$name.txt"
}
shard_of() { docker compose exec -T web1 bookmarks route "$1" | sed -E 's/.*"shard":"([^"]+)".*/\1/'; }

up 16
# Prefill and a short unrecorded run first, so that the baseline does not pay for cold pools,
# caches and the first writes.
echo "== warm-up (prefill and 10 s)"
"$loadgen" --base-url "$base" --admin-token "$ADMIN_TOKEN" --tenants "$TENANTS" --seed 7 --prefill "$PREFILL" \
	--whale "$WHALE=0.5" --rate "$RATE" --duration 10s --quiet >/dev/null
run 1-baseline
run 2-whale --whale "$WHALE=0.5"
up 4
run 3-bulkhead --whale "$WHALE=0.5"
up 16
from=$(shard_of "$WHALE")
to=$([ "$from" = shard0 ] && echo shard1 || echo shard0)
echo "== moving $WHALE from $from to $to"
docker compose run --rm -T move_slot run --from "$from" --to "$to" --tenant "$WHALE" --confirm | tail -3
# The move ends by deleting the whale's rows from the source; the source shard then spends
# a while on dead rows and the reindexer's backlog. Measure the settled state after an
# unrecorded run, and report the transient separately (SETTLE=0 to see it in the table).
if [ "${SETTLE:-20}" != 0 ]; then
	echo "== settling (${SETTLE:-20}s of the same load, unrecorded)"
	"$loadgen" --base-url "$base" --admin-token "$ADMIN_TOKEN" --tenants "$TENANTS" --seed 7 --whale "$WHALE=0.5" \
		--rate "$RATE" --duration "${SETTLE:-20}s" --quiet --json "$OUT/4-moved-settling.json" \
		| grep -A4 'by class, home shard'
fi
run 4-moved --whale "$WHALE=0.5"

echo "== summary (RATE=$RATE DURATION=$DURATION TENANTS=$TENANTS SHARD_CPUS=$SHARD_CPUS, whale on $from, then moved to $to)"
python3 - "$OUT" "$from" <<'PY'
import json, sys
out, whale_shard = sys.argv[1], sys.argv[2]
other = "shard1" if whale_shard == "shard0" else "shard0"
def row(rows, name):
    return next((r for r in rows if r["name"] == name), None)
def ms(r, key):
    return "-" if r is None or r[key] is None else f"{r[key]:.1f}"
def errors(r):
    if r is None or not r["errors"]:
        return "0"
    return " ".join(f"{k}:{v}" for k, v in sorted(r["errors"].items()))
print(f"| run | minnows on {whale_shard}: p50 / p99 ms | minnows on {other}: p50 / p99 ms | whale p99 ms | whale errors | total req/s |")
print("|---|---|---|---|---|---|")
for name in ["1-baseline", "2-whale", "3-bulkhead", "4-moved"]:
    rep = json.load(open(f"{out}/{name}.json"))
    by = rep["class_shards"]
    near, far = row(by, f"others on {whale_shard}"), row(by, f"others on {other}")
    whale = row(rep["classes"], "whales")
    print(f"| {name} | {ms(near, 'p50_ms')} / {ms(near, 'p99_ms')} | {ms(far, 'p50_ms')} / {ms(far, 'p99_ms')} "
          f"| {ms(whale, 'p99_ms')} | {errors(whale)} | {rep['total']['rate']:.0f} |")
PY
