# Sourced by the scripts that run a compose stack of their own (bench-outages.sh,
# whale-experiment.sh), after they set COMPOSE_PROJECT_NAME and BOOKMARKS_HTTP_PORT: uses
# the offline override when its app image exists (machines without a registry), sets
# $base to the stack's nginx, exports the admin token (the shell's, else the development
# value from .env) for loadgen, defines key_for, and takes the stack down, volumes too, on
# exit.
COMPOSE_FILE=docker-compose.yml
if docker image inspect bookmarks-sharded:offline >/dev/null 2>&1; then
	COMPOSE_FILE=docker-compose.yml:docker-compose.offline.yml
fi
export COMPOSE_FILE
# shellcheck disable=SC2034 # used by the scripts that source this file
base="http://127.0.0.1:$BOOKMARKS_HTTP_PORT"
ADMIN_TOKEN=${ADMIN_TOKEN:-$(sed -n 's/^ADMIN_TOKEN=//p' .env)}
export ADMIN_TOKEN
# key_for TENANT: a new API key for TENANT, made with the CLI in web1.
key_for() { docker compose exec -T web1 bookmarks keys create "$1" --note "$COMPOSE_PROJECT_NAME" --key-only; }
trap 'docker compose down -v >/dev/null 2>&1' EXIT
