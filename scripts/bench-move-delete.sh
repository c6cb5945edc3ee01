#!/usr/bin/env bash
# What a move's delete costs the source shard's other tenants, before and after the delete
# and the reindexer were paced (benches/move_delete.rs says what it runs and prints).
# BENCH_ROWS (100000), BENCH_RATE (200), BENCH_COTENANTS (20), BENCH_AFTER (30 s) and
# BENCH_VARIANTS (before,after) change it. Not part of CI: run it by hand on an otherwise
# idle machine. Without a registry, build the stand-in image first
# (scripts/build-offline-images.sh) and this script uses it.
set -euo pipefail
cd "$(dirname "$0")/.."
if [ -z "${BOOKMARKS_POSTGRES_IMAGE:-}" ] && docker image inspect bookmarks-offline/postgres:15 >/dev/null 2>&1; then
	export BOOKMARKS_POSTGRES_IMAGE=bookmarks-offline/postgres:15
fi
exec cargo bench --bench move_delete "$@"
