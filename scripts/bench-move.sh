#!/usr/bin/env bash
# Moves a tenant of 100 000 bookmarks between two local shards (Postgres in Docker) while a
# writer keeps writing to it, and prints the copy rate and the fence window. Not part of
# CI: run it by hand on an otherwise idle machine. Without a registry, build the stand-in
# image first (scripts/build-offline-images.sh) and this script uses it.
set -euo pipefail
cd "$(dirname "$0")/.."
if [ -z "${BOOKMARKS_POSTGRES_IMAGE:-}" ] && docker image inspect bookmarks-offline/postgres:15 >/dev/null 2>&1; then
	export BOOKMARKS_POSTGRES_IMAGE=bookmarks-offline/postgres:15
fi
exec cargo bench --bench move_tenant "$@"
