#!/usr/bin/env bash
# Measures how far the search index trails writes, at a steady trickle and after a burst
# (benches/index_lag.rs), against Postgres in Docker. Not part of CI: run it by hand on an
# otherwise idle machine. Without a registry, build the stand-in image first
# (scripts/build-offline-images.sh) and this script uses it.
set -euo pipefail
cd "$(dirname "$0")/.."
if [ -z "${BOOKMARKS_POSTGRES_IMAGE:-}" ] && docker image inspect bookmarks-offline/postgres:15 >/dev/null 2>&1; then
	export BOOKMARKS_POSTGRES_IMAGE=bookmarks-offline/postgres:15
fi
exec cargo bench --bench index_lag "$@"
