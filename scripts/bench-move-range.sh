#!/usr/bin/env bash
# Moves the slot range 0-4095 (1 000 tenants, 100 000 bookmarks, one whale with half) between
# two local shards while writers (new tenants too) keep writing to it through two servers, and
# prints the copy rate, the fence window and how soon both servers route the range. Not part of
# CI: run it by hand on an otherwise idle machine. Without a registry, build the stand-in
# image first (scripts/build-offline-images.sh) and this script uses it.
set -euo pipefail
cd "$(dirname "$0")/.."
if [ -z "${BOOKMARKS_POSTGRES_IMAGE:-}" ] && docker image inspect bookmarks-offline/postgres:15 >/dev/null 2>&1; then
	export BOOKMARKS_POSTGRES_IMAGE=bookmarks-offline/postgres:15
fi
exec cargo bench --bench move_range "$@"
