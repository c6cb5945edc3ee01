# Sourced by the scripts that run a compose stack of their own (bench-outages.sh,
# whale-experiment.sh), after they set COMPOSE_PROJECT_NAME and BOOKMARKS_HTTP_PORT: uses
# the offline override when its app image exists (machines without a registry), sets
# $base to the stack's nginx, and takes the stack down, volumes too, on exit.
COMPOSE_FILE=docker-compose.yml
if docker image inspect bookmarks-sharded:offline >/dev/null 2>&1; then
	COMPOSE_FILE=docker-compose.yml:docker-compose.offline.yml
fi
export COMPOSE_FILE
# shellcheck disable=SC2034 # used by the scripts that source this file
base="http://127.0.0.1:$BOOKMARKS_HTTP_PORT"
trap 'docker compose down -v >/dev/null 2>&1' EXIT
