#!/usr/bin/env bash
# A deploy without a failed request: restarts the web replicas one at a time, then the
# worker, each recreated from the current compose files (so a changed topology or image is
# picked up), each waited for before the next goes.
#
#   scripts/rolling-restart.sh              # web1, web2, then worker
#   scripts/rolling-restart.sh web2         # just these, in this order
#
# Uses the compose project and files of the environment, as `docker compose` does
# (COMPOSE_FILE, COMPOSE_PROJECT_NAME, .env). Why no request fails: a replica told to stop
# drains before it refuses connections, and nginx sends what could not be delivered to the
# other one (nginx/default.conf, app/web/drain.rs). Never restart both replicas at once.
set -euo pipefail
cd "$(dirname "$0")/.."
[ $# -gt 0 ] || set -- web1 web2 worker
READY_WITHIN=${READY_WITHIN:-120}

say() { echo "rolling-restart: $*" >&2; }
# shellcheck source=scripts/lib/services.sh
. scripts/lib/services.sh

for service in "$@"; do
	case $service in
	web1 | web2 | worker) ;;
	*)
		say "unknown service $service (web1, web2 or worker)"
		exit 2
		;;
	esac
	before=$(address_of "$service")
	started=$SECONDS
	if [ "$service" = worker ]; then
		say "worker: stopping and starting it again (a job it was running is taken up again once its lease runs out)"
	else
		say "$service: stopping (it drains, then finishes its requests) and starting it again"
	fi
	docker compose up -d --no-deps --force-recreate "$service"
	if ! wait_ready "$service" "$READY_WITHIN"; then
		if [ "$service" = worker ]; then
			say "worker is not running"
		else
			say "$service is not ready after ${READY_WITHIN}s; stopping here, the other replica still serves"
			docker compose exec -T "$service" curl -sS http://127.0.0.1:3000/ready >&2 || true
		fi
		exit 1
	fi
	[ "$service" = worker ] || follow_address "$service" "$before"
	say "$service: back in $((SECONDS - started))s"
done
