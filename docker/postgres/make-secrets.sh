#!/bin/sh
# The stack's database passwords, one per login, each in its own volume so that a container
# mounts only the ones it uses: made once, on the stack's first start, and kept. A variable
# given to compose wins (POSTGRES_PASSWORD, POSTGRES_REPLICATION_PASSWORD), for a stack whose
# databases were made with those values before.
#   /secrets/owner        the schema owner (`bookmarks`, a superuser): migrate
#   /secrets/web          `bookmarks_web`: the web replicas, the worker and their CLI
#   /secrets/move-slot    `bookmarks_move_slot`: the move_slot tool
#   /secrets/replication  `replicator`: the streaming replicas
set -eu

put() {
	file="/secrets/$1/password"
	if [ -n "$2" ]; then
		printf '%s\n' "$2" >"$file"
	elif [ ! -s "$file" ]; then
		# 192 random bits, hex: nothing a URL or a shell would need to escape.
		printf '%s\n' "$(od -An -tx1 -N24 /dev/urandom | tr -d ' \n')" >"$file"
		echo "make-secrets.sh: made the $1 password"
	fi
	chmod 0444 "$file"
}

put owner "${POSTGRES_PASSWORD:-}"
put web ""
put move-slot ""
put replication "${POSTGRES_REPLICATION_PASSWORD:-}"
