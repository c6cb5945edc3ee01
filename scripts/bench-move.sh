#!/usr/bin/env bash
# Moves a tenant of 100 000 and one of 1 000 000 bookmarks between two local shards
# (Postgres in Docker) while a writer and readers keep using it, and prints per size the
# copy rate, the fence window, the writer's latency during the move and every error a
# client saw. BENCH_ROWS=N[,M…] picks the sizes, BENCH_WRITES_PER_SEC the writer's rate,
# BENCH_READERS and BENCH_READS_PER_SEC the readers, BENCH_VERIFY=full compares every row
# inside the fence (`move_slot --full`). Not part of CI: run it by hand on an otherwise
# idle machine. Without a registry, build the stand-in image first
# (scripts/build-offline-images.sh) and this script uses it.
set -euo pipefail
cd "$(dirname "$0")/.."
if [ -z "${BOOKMARKS_POSTGRES_IMAGE:-}" ] && docker image inspect bookmarks-offline/postgres:15 >/dev/null 2>&1; then
	export BOOKMARKS_POSTGRES_IMAGE=bookmarks-offline/postgres:15
fi
exec cargo bench --bench move_tenant "$@"
