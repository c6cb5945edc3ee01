#!/usr/bin/env bash
# The fault-injection run (docs/reliability.md): on a compose stack of its own, `loadgen
# --verify` sends a fixed rate of requests over a few hundred tenants while
# scripts/nemesis.sh kills, pauses, stops and moves things on a schedule drawn from a seed.
# Once the nemesis has healed the stack, loadgen reads every tenant back, through nginx and
# straight from each shard primary, and reports what each fault window cost the clients
# (requests, errors by kind, p99) and whether any acknowledged write was lost, any refused
# one appeared, or any row sits on the wrong shard.
#
#   scripts/fault-run.sh [--seed N] [--duration SECONDS] [--rate R] [--tenants N] [--out DIR]
#                        [--plan full|short]
#
# Defaults: seed 1, 300 s, 150 requests/s, 300 tenants, the nemesis's full plan (its
# short plan is the stack test's minute), the figures in a new temporary
# directory (report.txt, report.json, run.svg, timeline.jsonl, events.jsonl, schedule.txt,
# nemesis.log and compose.log, every service's log). Exit status:
# loadgen's (3 when the checker found anything), or the nemesis's if it failed. Offline
# machines: build the stand-ins first (scripts/build-offline-images.sh and
# scripts/build-offline-app-image.sh). Not part of CI: the stack test runs a one-minute
# version (the nemesis's short plan) and fails on any finding.
set -euo pipefail
cd "$(dirname "$0")/.."

SEED=1 DURATION=300 RATE=150 TENANTS=300 OUT= PLAN=full
while [ $# -gt 0 ]; do
	case $1 in
	--seed) SEED=$2 && shift ;;
	--duration) DURATION=$2 && shift ;;
	--rate) RATE=$2 && shift ;;
	--tenants) TENANTS=$2 && shift ;;
	--out) OUT=$2 && shift ;;
	--plan) PLAN=$2 && shift ;;
	-h | --help) sed -n '11,12p' "$0" | sed 's/^# //' && exit 0 ;;
	*) echo "fault-run: unknown argument $1" >&2 && exit 2 ;;
	esac
	shift
done
OUT=${OUT:-$(mktemp -d)}
mkdir -p "$OUT"
rm -f "$OUT/timeline.jsonl"
# The nemesis refuses bad values before anything starts.
nemesis=(scripts/nemesis.sh --seed "$SEED" --duration "$DURATION" --tenants "$TENANTS" --plan "$PLAN")
"${nemesis[@]}" --dry-run >"$OUT/schedule.txt"

export COMPOSE_PROJECT_NAME=bookmarks-fault-run
export BOOKMARKS_HTTP_PORT=${BOOKMARKS_HTTP_PORT:-18084}
export BOOKMARKS_SHARD0_PORT=${BOOKMARKS_SHARD0_PORT:-18432}
export BOOKMARKS_SHARD1_PORT=${BOOKMARKS_SHARD1_PORT:-18433}
# shellcheck source=scripts/lib/compose-stack.sh
. scripts/lib/compose-stack.sh
export COMPOSE_FILE="$COMPOSE_FILE:docker-compose.verify.yml"
# Every service's log is kept with the figures (to explain an error the run saw).
trap 'docker compose logs --no-color --timestamps >"$OUT/compose.log" 2>&1; docker compose down -v >/dev/null 2>&1' EXIT
# The rows are read as the schema's owner (no tenant policy holds it), whose password the
# stack makes on its first start ($owner_password, read once it is up).
shard_url() { echo "postgres://bookmarks:$owner_password@127.0.0.1:$1/bookmarks_shard"; }

cargo build --release --locked --bin loadgen
docker compose up -d --wait >/dev/null 2>&1 || docker compose up -d >/dev/null
owner_password=$(docker compose exec -T postgres-shard-0 cat /run/secrets/db-owner/password)
until curl -sf -o /dev/null "$base/ready"; do sleep 1; done
echo "fault-run: seed $SEED, ${DURATION}s at $RATE requests/s over $TENANTS tenants; figures in $OUT"

# Keys first (loadgen makes one per tenant), so that the nemesis's schedule and the load
# start together.
target/release/loadgen --base-url "$base" --admin-token "$ADMIN_TOKEN" --tenants "$TENANTS" \
	--seed "$SEED" --prefill 2 --rate "$RATE" --duration 5s --quiet >/dev/null

"${nemesis[@]}" --timeline "$OUT/timeline.jsonl" 2>"$OUT/nemesis.log" &
nemesis=$!
status=0
target/release/loadgen --base-url "$base" --admin-token "$ADMIN_TOKEN" --tenants "$TENANTS" \
	--seed "$SEED" --rate "$RATE" --duration "${DURATION}s" --quiet \
	--verify --verify-shard "shard0=$(shard_url "$BOOKMARKS_SHARD0_PORT")" \
	--verify-shard "shard1=$(shard_url "$BOOKMARKS_SHARD1_PORT")" \
	--timeline "$OUT/timeline.jsonl" --events "$OUT/events.jsonl" \
	--json "$OUT/report.json" --plot "$OUT/run.svg" >"$OUT/report.txt" || status=$?
if ! wait "$nemesis"; then
	echo "fault-run: the nemesis failed (see $OUT/nemesis.log)" >&2
	[ "$status" != 0 ] || status=1
fi
cat "$OUT/report.txt"
echo "fault-run: figures in $OUT"
exit "$status"
