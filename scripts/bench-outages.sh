#!/usr/bin/env bash
# Times what a shard1 tenant sees through nginx when shard1's primary is stopped and when it
# is paused (a partition), on a compose stack of its own, and prints the figures the
# outage table in docs/outages.md reports. Not part of CI (tests/stack/ asserts the targets there).
# Offline machines: build the stand-ins first (scripts/build-offline-images.sh and
# scripts/build-offline-app-image.sh); they are used when present.
set -euo pipefail
cd "$(dirname "$0")/.."

export COMPOSE_PROJECT_NAME=bookmarks-bench-outages
export BOOKMARKS_HTTP_PORT=${BOOKMARKS_HTTP_PORT:-18080}
# shellcheck source=scripts/lib/compose-stack.sh
. scripts/lib/compose-stack.sh

docker compose up -d --wait >/dev/null 2>&1 || docker compose up -d >/dev/null
until curl -sf -o /dev/null "$base/ready"; do sleep 1; done

declare -A KEYS=([acme-corp]=$(key_for acme-corp) [hooli]=$(key_for hooli))
# One request as a tenant: "status seconds".
probe() { curl -s -o /dev/null -w '%{http_code} %{time_total}' "$base/api/bookmarks" -H "Authorization: Bearer ${KEYS[$1]}"; }
# The slowest of 20 requests as a tenant, in ms, and their statuses.
slowest() {
	local worst=0 statuses=""
	for _ in $(seq 20); do
		read -r code secs < <(probe "$1")
		statuses="$statuses $code"
		worst=$(awk -v a="$worst" -v b="$secs" 'BEGIN { print (b * 1000 > a) ? b * 1000 : a }')
	done
	echo "${worst} ms (statuses:$(echo "$statuses" | tr ' ' '\n' | sed '/^$/d' | sort | uniq -c | awk '{printf " %s×%s", $2, $1}'))"
}
# Seconds until a tenant is served again.
until_served() {
	local start
	start=$(date +%s.%N)
	until [ "$(probe "$1" | cut -d' ' -f1)" = 200 ]; do sleep 0.05; done
	awk -v s="$start" -v e="$(date +%s.%N)" 'BEGIN { printf "%.2f s\n", e - s }'
}

for t in acme-corp hooli; do for _ in 1 2 3 4; do probe "$t" >/dev/null; done; done

for how in stop pause; do
	echo "== shard1 primary: docker compose $how"
	docker compose "$how" postgres-shard-1 >/dev/null 2>&1
	echo "first shard1 request: $(probe acme-corp)"
	sleep 6 # each web replica notices by itself within about 5 s
	echo "later shard1 requests, slowest of 20: $(slowest acme-corp)"
	echo "shard0 requests, slowest of 20: $(slowest hooli)"
	if [ "$how" = stop ]; then docker compose start postgres-shard-1 >/dev/null 2>&1; else docker compose unpause postgres-shard-1 >/dev/null 2>&1; fi
	echo "served again after $( [ "$how" = stop ] && echo start || echo unpause ): $(until_served acme-corp)"
	until curl -sf -o /dev/null "$base/ready"; do sleep 1; done
done
