#!/usr/bin/env bash
# Deploys and a third shard under load, on a compose stack of its own: loadgen drives nginx
# open-loop at RATE requests/s over TENANTS tenants (spread over every slot) through four
# phases, and the figures of each are printed (requests, errors by kind, p50/p99 per shard,
# and what `--verify` found when it read every tenant back after the phase):
#
#   1. before: the steady load alone;
#   2. worker: only the worker restarted: docker's work for one restart on these cores,
#              with no replica of the request path touched (the floor for phase 3);
#   3. roll:   scripts/rolling-restart.sh restarts web1, web2 and the worker;
#   4. add:    docs/deploys.md's "Adding a shard": shard2 started and migrated, then a rolling
#              restart with shard2 (drained) in every replica's topology;
#   5. move:   `move_slot run --slots 3072-8191`, about a third of all tenants, onto shard2;
#   6. after:  the steady load again, with three shards.
#
# Then every 5xx that nginx logged, with the upstream it tried.
#
# Each phase is one loadgen run while the phase's action runs beside it; the action's own
# time is printed too. Knobs (environment): RATE (default 300), TENANTS (default 300),
# STEADY (seconds of phases 1 and 6, default 20), WINDOW (seconds of phases 2-5, default
# 60: longer than the action). Not part of CI (tests/stack/ runs the same steps under a
# lighter load and asserts no request fails). Offline machines: build the stand-ins first
# (scripts/build-offline-images.sh and scripts/build-offline-app-image.sh).
set -euo pipefail
cd "$(dirname "$0")/.."

RATE=${RATE:-300}
TENANTS=${TENANTS:-300}
STEADY=${STEADY:-20}
WINDOW=${WINDOW:-60}
OUT=${OUT:-$(mktemp -d)}
mkdir -p "$OUT"
export COMPOSE_PROJECT_NAME=bookmarks-bench-rolling
export BOOKMARKS_HTTP_PORT=${BOOKMARKS_HTTP_PORT:-18082}
# shellcheck source=scripts/lib/compose-stack.sh
. scripts/lib/compose-stack.sh
trap 'COMPOSE_PROFILES=shard2 docker compose down -v >/dev/null 2>&1' EXIT

cargo build --release --locked --bin loadgen
loadgen=target/release/loadgen
docker compose up -d --wait >/dev/null 2>&1 || docker compose up -d >/dev/null
until curl -sf -o /dev/null "$base/ready"; do sleep 1; done

load() { # name seconds: one recorded run
	"$loadgen" --base-url "$base" --admin-token "$ADMIN_TOKEN" --tenants "$TENANTS" --seed 11 \
		--rate "$RATE" --duration "${2}s" --quiet --verify --json "$OUT/$1.json" >/dev/null \
		|| echo "$1: loadgen exited $? (3: the checker found a lost, phantom or misplaced write)"
}
timed() { # label command…: runs it, prints how long it took
	local started=$SECONDS
	"${@:2}" >"$OUT/$1.log" 2>&1 || { echo "$1 failed:"; cat "$OUT/$1.log"; exit 1; }
	echo "$1: $((SECONDS - started)) s"
}
phase() { # name action…: the load for WINDOW seconds, the action 2 s into it
	load "$1" "$WINDOW" &
	local pid=$!
	sleep 2
	timed "$1" "${@:2}"
	wait "$pid"
}
add_shard() {
	docker compose up -d --wait postgres-shard-2 postgres-shard-2-replica
	docker compose run --rm migrate migrate --shard shard2
	scripts/rolling-restart.sh
}

echo "== warm-up (tenants, prefill, 10 s unrecorded)"
"$loadgen" --base-url "$base" --admin-token "$ADMIN_TOKEN" --tenants "$TENANTS" --seed 11 --prefill 5 \
	--rate "$RATE" --duration 10s --quiet >/dev/null
load 1-before "$STEADY"
phase 2-worker scripts/rolling-restart.sh worker
phase 3-roll scripts/rolling-restart.sh
export COMPOSE_FILE="$COMPOSE_FILE:docker-compose.shard2.yml"
phase 4-add add_shard
phase 5-move docker compose run --rm -T move_slot run --from shard0 --to shard2 --slots 3072-8191 --confirm --grace 5s
load 6-after "$STEADY"
echo "left on shard0: $(docker compose exec -T postgres-shard-0 psql -U bookmarks -d bookmarks_shard -tAc \
	'select count(*) from bookmarks where _autumn_slot(tenant_id) between 3072 and 8191')"
tail -1 "$OUT/5-move.log"
echo "nginx's 5xx answers and upstream errors, if any:"
docker compose logs --no-log-prefix nginx 2>/dev/null | grep -E '" 5[0-9][0-9] |\[(error|crit)\]' | grep -v 'no live upstreams' | tail -20 || true
echo "(no live upstreams: $(docker compose logs nginx 2>/dev/null | grep -c 'no live upstreams' || true))"

echo "== summary (RATE=$RATE TENANTS=$TENANTS, reports in $OUT)"
python3 - "$OUT" <<'PY'
import json, sys
out = sys.argv[1]
def ms(r, key):
    return "-" if r is None or r[key] is None else f"{r[key]:.1f}"
def errors(r):
    return " ".join(f"{k}:{v}" for k, v in sorted(r["errors"].items())) or "0"
print("| phase | requests | errors | p50 / p99 ms | shard0 p50 / p99 | shard1 p50 / p99 | shard2 p50 / p99 | writes acked | lost / phantom / misplaced |")
print("|---|---|---|---|---|---|---|---|---|")
for name in ["1-before", "2-worker", "3-roll", "4-add", "5-move", "6-after"]:
    rep = json.load(open(f"{out}/{name}.json"))
    by = {r["name"]: r for r in rep["shards"]}
    t = rep["total"]
    cells = [f"{ms(by.get(s), 'p50_ms')} / {ms(by.get(s), 'p99_ms')}" for s in ["shard0", "shard1", "shard2"]]
    checked = f"{rep['lost']} / {rep['phantom']} / {rep['misplaced']}"
    print(f"| {name} | {t['requests']} | {errors(t)} | {ms(t, 'p50_ms')} / {ms(t, 'p99_ms')} | "
          + " | ".join(cells) + f" | {rep['writes'].get('acked', 0)} | {checked} |")
PY
