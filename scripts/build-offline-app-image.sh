#!/usr/bin/env bash
# Builds bookmarks-sharded:offline, the app image compose/offline.yml runs: the
# release binaries (bookmarks, move_slot) are compiled on the host (the official Rust image
# cannot be pulled here) and copied onto the local Debian stand-in built by
# scripts/build-offline-images.sh.
set -euo pipefail
cd "$(dirname "$0")/.."

if ! docker image inspect bookmarks-offline/debian:bookworm-slim >/dev/null 2>&1; then
	scripts/build-offline-images.sh debian
fi
cargo build --release --locked -p bookmarks-sharded --bins
docker build --quiet -f docker/offline/app.Dockerfile -t bookmarks-sharded:offline . >/dev/null
echo "build-offline-app-image: bookmarks-sharded:offline ($(docker image inspect -f '{{.Size}}' bookmarks-sharded:offline) bytes)"
