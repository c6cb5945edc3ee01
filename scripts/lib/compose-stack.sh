# Sourced by the scripts that run a compose stack of their own (bench-outages.sh,
# whale-experiment.sh), after they set COMPOSE_PROJECT_NAME and BOOKMARKS_HTTP_PORT: uses
# the offline override when its app image exists (machines without a registry), sets
# $base to the stack's nginx, exports an admin token (the shell's, else a random one) that
# the stack's web replicas take and loadgen presents, defines key_for, and takes the stack
# down, volumes too, on exit.
COMPOSE_FILE=docker-compose.yml
if docker image inspect bookmarks-sharded:offline >/dev/null 2>&1; then
	COMPOSE_FILE=docker-compose.yml:docker-compose.offline.yml
fi
export COMPOSE_FILE
# shellcheck disable=SC2034 # used by the scripts that source this file
base="http://127.0.0.1:$BOOKMARKS_HTTP_PORT"
ADMIN_TOKEN=${ADMIN_TOKEN:-$(head -c 32 /dev/urandom | od -An -tx1 | tr -d ' \n')}
export ADMIN_TOKEN
# key_for TENANT: a new API key for TENANT, made with the CLI in web1.
key_for() { docker compose exec -T web1 bookmarks keys create "$1" --note "$COMPOSE_PROJECT_NAME" --key-only; }
trap 'docker compose down -v >/dev/null 2>&1' EXIT
