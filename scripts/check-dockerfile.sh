#!/usr/bin/env bash
# Builds the app image the way `docker compose up --build` does, from the repository's own
# Dockerfile, and checks what a newcomer depends on. Without a registry the two base images
# are local stand-ins (scripts/build-offline-rust-image.sh, scripts/build-offline-images.sh),
# passed as the Dockerfile's build arguments; nothing else differs.
#
#   1. `docker compose config` declares one build, for the app image (the migrate service);
#   2. `docker compose build` builds one image; when it starts cold it runs cargo twice, once
#      for the dependencies and once for this crate;
#   3. after an edit under app/, a rebuild reuses the dependency layer and compiles only this
#      crate; after an edit to the README, nothing is rebuilt;
#   4. the image runs (`bookmarks check-config` on the repository's autumn.toml).
#
# The first build uses BuildKit's cache from earlier runs, as a user's second `up --build`
# does. Its cache key for the dependency layer is the Dockerfile up to that step and the
# manifests, so a change to either builds it cold and 2 is checked; otherwise the layer is
# reused, and when this checkout's sources are new to the cache that build is itself the
# rebuild of 3 and is checked as one (no second crate compile). `--cold` ignores the cache.
#
# Leaves the image as bookmarks-sharded:latest and prints the build and rebuild times.
set -euo pipefail
cd "$(dirname "$0")/.."
say() { echo "check-dockerfile: $*"; }
fail() { say "FAILED: $*" >&2; exit 1; }
no_cache=()
case "${1:-}" in
	"") ;;
	--cold) no_cache=(--no-cache) ;;
	*) fail "unknown argument '$1' (usage: $0 [--cold])" ;;
esac

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

# The dependency step's number in a BuildKit plain log (its steps interleave), and whether
# that step was a cache hit.
dep_step() { grep -oE '^#[0-9]+ \[[a-z0-9_-]+ builder [0-9/]+\] RUN sed -n ' "$1" | head -1 | cut -d' ' -f1; }
dep_cached() { local step; step="$(dep_step "$1")"; [ -n "$step" ] && grep -qx "$step CACHED" "$1"; }
compiled() { grep -oE 'Compiling [a-z0-9_-]+ v' "$1" | awk '{print $2}' | sort -u | tr '\n' ' '; }
# 3's checks on a build's log: the dependency layer reused, only this crate compiled.
check_rebuild() {
	[ "$(compiled "$1")" = "bookmarks-sharded " ] \
		|| fail "the rebuild compiled: '$(compiled "$1")' (expected bookmarks-sharded only)"
	dep_cached "$1" || fail "the dependency layer was not reused"
}

# 2. The build: one image; from cold, cargo once for dependencies and once for the crate.
start=$(date +%s)
docker compose -f "$log/clean/docker-compose.yml" --progress plain build "${no_cache[@]}" "${build_args[@]}" \
	>"$log/first" 2>&1 || { tail -40 "$log/first"; fail "docker compose build"; }
first=$(($(date +%s) - start))
built="$(grep -oE '^#[0-9]+ \[[a-z0-9_-]+ builder' "$log/first" | awk '{print $2}' | sort -u | tr -d '[' | tr '\n' ' ')"
[ "$built" = "migrate " ] || fail "services that built: '$built' (expected migrate only)"
rebuilt=0
if ! dep_cached "$log/first"; then
	crate_builds="$(grep -c 'Compiling bookmarks-sharded v' "$log/first" || true)"
	finished="$(grep -c 'Finished `release` profile' "$log/first" || true)"
	[ "$crate_builds" = 2 ] && [ "$finished" = 2 ] \
		|| fail "expected two cargo runs (dependencies, then the crate); saw $finished, crate compiled $crate_builds times"
	deps="$(($(grep -c ' Compiling ' "$log/first" || true) - 2))"
	say "cold docker compose build: one image, ${deps} dependencies compiled once, in ${first} s"
elif [ -n "$(compiled "$log/first")" ]; then
	check_rebuild "$log/first"
	rebuilt=1
	say "docker compose build: one image; these sources were new to the cache: dependency layer reused, only bookmarks-sharded compiled, in ${first} s"
else
	say "docker compose build: one image, every layer from the cache, in ${first} s"
fi

# 3. An edit under app/ recompiles only this crate (already seen when the first build was one).
if [ "$rebuilt" = 0 ]; then
	edited="$log/app-edit"
	checkout "$edited"
	# Unique per run: BuildKit keeps its cache between runs on one machine, and an edit it had
	# seen before would be a cache hit that compiles nothing.
	echo "// an edit, to time a rebuild ($(date +%s%N))" >>"$edited/app/lib.rs"
	start=$(date +%s)
	rebuild "$edited" "$log/warm"
	warm=$(($(date +%s) - start))
	check_rebuild "$log/warm"
	say "rebuild after an edit under app/: dependency layer reused, only bookmarks-sharded compiled, in ${warm} s"
fi

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
