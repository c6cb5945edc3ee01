#!/usr/bin/env bash
# The whale experiment of docs/load-testing.md, rerunnable: on a compose stack of its own,
# loadgen sends the same open-loop load four times and writes each run's report, JSON and
# plot under docs/results/load-testing/ (or $OUT), then prints the summary table the
# document shows.
#
#   1. baseline: uniform tenants, no whale;
#   2. whale:    one tenant (whale-corp) takes half of all requests, on a shard it shares;
#   3. bulkhead: the same, with MAX_IN_FLIGHT_PER_TENANT=4 (of a shard pool of 8);
#   4. moved:    the same as 2 after `move_slot` moved whale-corp to the other shard and
#                SETTLE seconds of unrecorded load (the source shard's aftermath);
#   5. own shard: the same after a third shard (postgres-shard-2, capped like the others)
#                joined as in docs/deploys.md's "Adding a shard" and whale-corp moved onto it by
#                itself while the load ran (recorded as 5-moving), then SETTLE seconds.
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
OUT=${OUT:-docs/results/load-testing}
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
	# The app containers were all recreated at once and may have swapped addresses; nginx
	# resolves the replicas' names only when it starts (or reloads).
	docker compose exec -T nginx nginx -s reload >/dev/null 2>&1
	sleep 1
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

echo "== adding shard2 (drained; docs/deploys.md, \"Adding a shard\")"
export COMPOSE_FILE="$COMPOSE_FILE:docker-compose.shard2.yml"
docker compose up -d --wait postgres-shard-2 postgres-shard-2-replica >/dev/null 2>&1
docker update --cpus "$SHARD_CPUS" "$(docker compose ps -q postgres-shard-2)" >/dev/null
docker compose run --rm -T migrate migrate --shard shard2 >/dev/null 2>&1
scripts/rolling-restart.sh >/dev/null 2>&1
echo "== moving $WHALE from $to to shard2 while the load runs"
"$loadgen" --base-url "$base" --admin-token "$ADMIN_TOKEN" --tenants "$TENANTS" --seed 7 --whale "$WHALE=0.5" \
	--rate "$RATE" --duration "${MOVE_WINDOW:-40}s" --quiet --json "$OUT/5-moving.json" >"$OUT/5-moving.txt" &
moving=$!
sleep 2
docker compose run --rm -T move_slot run --from "$to" --to shard2 --tenant "$WHALE" --confirm | tail -1
wait "$moving"
if [ "${SETTLE:-20}" != 0 ]; then
	echo "== settling (${SETTLE:-20}s of the same load, unrecorded)"
	"$loadgen" --base-url "$base" --admin-token "$ADMIN_TOKEN" --tenants "$TENANTS" --seed 7 --whale "$WHALE=0.5" \
		--rate "$RATE" --duration "${SETTLE:-20}s" --quiet >/dev/null
fi
run 5-own-shard --whale "$WHALE=0.5"

echo "== summary (RATE=$RATE DURATION=$DURATION TENANTS=$TENANTS SHARD_CPUS=$SHARD_CPUS, whale on $from, then moved to $to, then to shard2)"
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
for name in ["1-baseline", "2-whale", "3-bulkhead", "4-moved", "5-own-shard"]:
    rep = json.load(open(f"{out}/{name}.json"))
    by = rep["class_shards"]
    near, far = row(by, f"others on {whale_shard}"), row(by, f"others on {other}")
    whale = row(rep["classes"], "whales")
    print(f"| {name} | {ms(near, 'p50_ms')} / {ms(near, 'p99_ms')} | {ms(far, 'p50_ms')} / {ms(far, 'p99_ms')} "
          f"| {ms(whale, 'p99_ms')} | {errors(whale)} | {rep['total']['rate']:.0f} |")
base = json.load(open(f"{out}/1-baseline.json"))["class_shards"]
own = json.load(open(f"{out}/5-own-shard.json"))["class_shards"]
for shard in [whale_shard, other]:
    b, o = row(base, f"others on {shard}"), row(own, f"others on {shard}")
    print(f"own shard: minnows on {shard} p99 {ms(o, 'p99_ms')} ms = {o['p99_ms'] / b['p99_ms']:.2f}x the baseline's {ms(b, 'p99_ms')} (target <= 1.3x)")
moving = json.load(open(f"{out}/5-moving.json"))
minnows = row(moving["classes"], "others")
print(f"during the move to shard2: minnows {minnows['requests']} requests, errors {errors(minnows)}, p99 {ms(minnows, 'p99_ms')} ms; "
      f"whale errors {errors(row(moving['classes'], 'whales'))}")
PY
