#!/usr/bin/env bash
# Replica reads on the compose stack (docs/replica-reads.md, "Results"): the same 90/10
# read/write load twice on a stack of its own with a streaming replica per shard.
#
#   1. with-replicas:  loadgen sends each tenant's latest consistency token with its reads,
#                      so a replica that has replayed the tenant's last write serves them;
#   2. primaries-only: the same load with --no-tokens; the stack's reads_without_token is
#                      `primary`, so every read goes to the shard primary, as before replica
#                      reads existed.
#
# Each Postgres server (primaries and replicas) is held to SHARD_CPUS cores (`docker update
# --cpus`), standing in for a server of its own: on one machine an unbounded replica would
# only take cores from its own primary. Prints the replicas' share of reads and the read
# (list, get) p50/p99 of both runs; reports go to docs/results/replica-reads/ (or $OUT).
#
# Knobs (environment): RATE (requests/s, default 400), DURATION (default 30s), TENANTS
# (default 50), PREFILL (default 20), SHARD_CPUS (default 0.2), OUT. Not part of CI.
# Offline machines: build the stand-ins first (scripts/build-offline-images.sh and
# scripts/build-offline-app-image.sh); they are used when present.
set -euo pipefail
cd "$(dirname "$0")/.."

RATE=${RATE:-400}
SHARD_CPUS=${SHARD_CPUS:-0.2}
DURATION=${DURATION:-30s}
TENANTS=${TENANTS:-50}
PREFILL=${PREFILL:-20}
OUT=${OUT:-docs/results/replica-reads}
MIX=list=45,get=45,create=8,update=2
export COMPOSE_PROJECT_NAME=bookmarks-replica-reads
export BOOKMARKS_HTTP_PORT=${BOOKMARKS_HTTP_PORT:-18082}
# shellcheck source=scripts/lib/compose-stack.sh
. scripts/lib/compose-stack.sh
mkdir -p "$OUT"

cargo build --release --locked --bin loadgen
loadgen=target/release/loadgen

docker compose up -d --wait >/dev/null 2>&1 || docker compose up -d >/dev/null
until curl -sf -o /dev/null "$base/ready"; do sleep 1; done
servers=(postgres-shard-0 postgres-shard-0-replica postgres-shard-1 postgres-shard-1-replica)
# shellcheck disable=SC2046 # one container id per word
docker update --cpus "$SHARD_CPUS" $(docker compose ps -q "${servers[@]}") >/dev/null

load() {
	"$loadgen" --base-url "$base" --admin-token "$ADMIN_TOKEN" --tenants "$TENANTS" --seed 7 \
		--mix "$MIX" --rate "$RATE" --quiet "$@"
}
echo "== warm-up (prefill and 10 s, unrecorded)"
load --prefill "$PREFILL" --duration 10s >/dev/null
echo "== with-replicas"
load --duration "$DURATION" --json "$OUT/with-replicas.json" | tee "$OUT/with-replicas.txt"
echo "== primaries-only"
load --duration "$DURATION" --no-tokens --json "$OUT/primaries-only.json" | tee "$OUT/primaries-only.txt"

echo "== summary (RATE=$RATE DURATION=$DURATION TENANTS=$TENANTS SHARD_CPUS=$SHARD_CPUS, mix $MIX)"
python3 - "$OUT" <<'PY'
import json, sys
out = sys.argv[1]
def ms(v):
    return "-" if v is None else f"{v:.1f}"
print("| run | reads on replicas | list p50 / p99 ms | get p50 / p99 ms | writes p99 ms | errors |")
print("|---|---|---|---|---|---|")
for name in ["with-replicas", "primaries-only"]:
    rep = json.load(open(f"{out}/{name}.json"))
    ops = {r["name"]: r for r in rep["operations"]}
    reads = rep["reads_from"]["replica"] + rep["reads_from"]["primary"]
    share = 100.0 * rep["reads_from"]["replica"] / reads if reads else 0.0
    writes = max((ops[o]["p99_ms"] or 0.0) for o in ("create", "update") if o in ops)
    errors = sum(rep["total"]["errors"].values())
    lst, get = ops.get("list", {}), ops.get("get", {})
    print(f"| {name} | {share:.1f} % | {ms(lst.get('p50_ms'))} / {ms(lst.get('p99_ms'))} "
          f"| {ms(get.get('p50_ms'))} / {ms(get.get('p99_ms'))} | {ms(writes)} | {errors} |")
PY
