# Sourced by the scripts that stop and start the stack's app services (rolling-restart.sh;
# `cargo xtask nemesis` has the same in xtask/src/compose.rs). Uses the compose project and
# files of the environment, as `docker compose` does.

# address_of SERVICE: the service's container addresses ("" when it has no container).
address_of() {
	local id
	id=$(docker compose ps -q "$1" 2>/dev/null)
	[ -n "$id" ] || return 0
	docker inspect -f '{{range .NetworkSettings.Networks}}{{.IPAddress}} {{end}}' "$id"
}

# wait_ready SERVICE SECONDS: until a web replica answers /ready inside its container, or
# the worker is running; non-zero after SECONDS.
wait_ready() {
	local started=$SECONDS
	if [ "$1" = worker ]; then
		until [ "$(docker compose ps --format '{{.State}}' worker 2>/dev/null)" = running ]; do
			[ $((SECONDS - started)) -lt "$2" ] || return 1
			sleep 1
		done
		return 0
	fi
	until docker compose exec -T "$1" curl -fsS -o /dev/null http://127.0.0.1:3000/ready 2>/dev/null; do
		[ $((SECONDS - started)) -lt "$2" ] || return 1
		sleep 1
	done
}

# follow_address SERVICE BEFORE: nginx resolved the replicas' names when it started, so a
# replica that came back at another address than BEFORE needs nginx reloaded.
follow_address() {
	local after
	after=$(address_of "$1")
	if [ "$after" != "$2" ]; then
		echo "$1 has a new address ($2-> $after): reloading nginx" >&2
		docker compose exec -T nginx nginx -s reload
	fi
}
