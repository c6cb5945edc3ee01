#!/usr/bin/env bash
# Builds the app image the way `docker compose up --build` does, from the repository's own
# Dockerfile, and checks what a newcomer depends on. Without a registry the two base images
# are local stand-ins (scripts/build-offline-rust-image.sh, scripts/build-offline-images.sh),
# passed as the Dockerfile's build arguments; nothing else differs.
#
#   1. `docker compose config` declares one build, for the app image (the migrate service);
#   2. a cold `docker compose build` builds one image and runs cargo twice in it, once for the
#      dependencies and once for this crate;
#   3. after an edit under app/, a rebuild reuses the dependency layer and compiles only this
#      crate; after an edit to the README, nothing is rebuilt;
#   4. the image runs (`bookmarks check-config` on the repository's autumn.toml).
#
# Leaves the image as bookmarks-sharded:latest and prints the build and rebuild times.
set -euo pipefail
cd "$(dirname "$0")/.."
say() { echo "check-dockerfile: $*"; }
fail() { say "FAILED: $*" >&2; exit 1; }

scripts/build-offline-rust-image.sh
scripts/build-offline-images.sh debian
build_args=(
	--build-arg RUST_IMAGE=bookmarks-offline/rust:bookworm
	--build-arg RUNTIME_IMAGE=bookmarks-offline/debian:bookworm-slim
)
log="$(mktemp -d)"
trap 'rm -rf "$log"' EXIT
# Copies of the tracked files (what a clone holds), so that local build outputs and
# untracked files cannot change what is measured.
checkout() { mkdir -p "$1" && git ls-files -z | xargs -0 cp --parents -t "$1"; }
# Builds a copy's app image through Compose (BuildKit, so it shares the cold build's cache)
# under a throwaway tag; output to $2.
rebuild() {
	sed -i 's/bookmarks-sharded:latest/bookmarks-sharded:rebuild-check/' "$1/docker-compose.yml"
	docker compose -f "$1/docker-compose.yml" --progress plain build "${build_args[@]}" migrate >"$2" 2>&1 \
		|| { tail -40 "$2"; fail "docker compose build of $1"; }
	docker rmi bookmarks-sharded:rebuild-check >/dev/null
}
checkout "$log/clean"

# 1. One build in the file users run.
builds="$(docker compose -f "$log/clean/docker-compose.yml" config --format json | python3 -c '
import json, sys
services = json.load(sys.stdin)["services"]
print(" ".join(sorted(name for name, s in services.items() if "build" in s)))')"
[ "$builds" = migrate ] || fail "services with a build section: '$builds' (expected only migrate)"
say "docker compose config: one build (migrate); the other app services run its image"

# 2. A cold build: no cache, one image, cargo once for dependencies and once for the crate.
start=$(date +%s)
docker compose -f "$log/clean/docker-compose.yml" --progress plain build --no-cache "${build_args[@]}" \
	>"$log/cold" 2>&1 || { tail -40 "$log/cold"; fail "docker compose build"; }
cold=$(($(date +%s) - start))
built="$(grep -oE '^#[0-9]+ \[[a-z0-9_-]+ builder' "$log/cold" | awk '{print $2}' | sort -u | tr -d '[' | tr '\n' ' ')"
[ "$built" = "migrate " ] || fail "services that built: '$built' (expected migrate only)"
crate_builds="$(grep -c 'Compiling bookmarks-sharded v' "$log/cold" || true)"
finished="$(grep -c 'Finished `release` profile' "$log/cold" || true)"
[ "$crate_builds" = 2 ] && [ "$finished" = 2 ] \
	|| fail "expected two cargo runs (dependencies, then the crate); saw $finished, crate compiled $crate_builds times"
deps="$(($(grep -c ' Compiling ' "$log/cold" || true) - 2))"
say "cold docker compose build: one image, ${deps} dependencies compiled once, in ${cold} s"

# 3. An edit under app/ recompiles only this crate.
edited="$log/app-edit"
checkout "$edited"
# Unique per run: BuildKit keeps its cache between runs on one machine, and an edit it had
# seen before would be a cache hit that compiles nothing.
echo "// an edit, to time a rebuild ($(date +%s%N))" >>"$edited/app/lib.rs"
start=$(date +%s)
rebuild "$edited" "$log/warm"
warm=$(($(date +%s) - start))
compiled="$(grep -oE 'Compiling [a-z0-9_-]+ v' "$log/warm" | awk '{print $2}' | sort -u | tr '\n' ' ')"
[ "$compiled" = "bookmarks-sharded " ] || fail "the rebuild compiled: '$compiled' (expected bookmarks-sharded only)"
# BuildKit's plain progress interleaves steps: find the dependency step's number, then
# its own CACHED line.
dep_step="$(grep -oE '^#[0-9]+ \[[a-z0-9_-]+ builder [0-9/]+\] RUN sed -n ' "$log/warm" | head -1 | cut -d' ' -f1)"
[ -n "$dep_step" ] && grep -qx "$dep_step CACHED" "$log/warm" \
	|| fail "the dependency layer was not reused"
say "rebuild after an edit under app/: dependency layer reused, only bookmarks-sharded compiled, in ${warm} s"

edited="$log/readme-edit"
checkout "$edited"
echo 'An edit outside the build context.' >>"$edited/README.md"
rebuild "$edited" "$log/docs"
! grep -q ' Compiling ' "$log/docs" || fail "a README edit recompiled something"
say "rebuild after a README edit: nothing compiled"

# 4. The image runs.
docker run --rm bookmarks-sharded:latest check-config >"$log/run" 2>&1 \
	|| { cat "$log/run"; fail "bookmarks check-config in the image"; }
say "bookmarks-sharded:latest runs (check-config passes)"
