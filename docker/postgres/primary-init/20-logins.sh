#!/bin/bash
# The logins of the app's processes, each allowed to switch to the roles it works as and
# nothing more (docs/security.md, "Tenant isolation in the database"). Mounted into
# /docker-entrypoint-initdb.d of every primary, control included, it runs once on first start;
# on a stack whose databases are older, run it by hand once per primary:
#   docker compose exec postgres-shard-0 bash /docker-entrypoint-initdb.d/20-logins.sh
# It makes the roles the migrations would (with the same attributes) when they are missing,
# so that the logins can be members before the first `migrate`. Without the password files
# (a bare server, the test suite's) it does nothing.
#   env: BOOKMARKS_WEB_PASSWORD_FILE, BOOKMARKS_MOVE_SLOT_PASSWORD_FILE
(
	set -euo pipefail
	if [ -z "${BOOKMARKS_WEB_PASSWORD_FILE:-}" ] || [ -z "${BOOKMARKS_MOVE_SLOT_PASSWORD_FILE:-}" ]; then
		echo "20-logins.sh: no password files given; no logins made"
		exit 0
	fi
	web_password="$(head -n1 "$BOOKMARKS_WEB_PASSWORD_FILE")"
	move_password="$(head -n1 "$BOOKMARKS_MOVE_SLOT_PASSWORD_FILE")"

	echo "20-logins.sh: making the logins bookmarks_web and bookmarks_move_slot"
	psql -v ON_ERROR_STOP=1 --no-psqlrc --username "$POSTGRES_USER" --dbname postgres \
		--set web_password="$web_password" --set move_password="$move_password" <<-'EOSQL'
		DO $$
		DECLARE
		    r TEXT;
		BEGIN
		    FOREACH r IN ARRAY ARRAY['bookmarks_app', 'bookmarks_reader', 'bookmarks_worker'] LOOP
		        IF NOT EXISTS (SELECT 1 FROM pg_roles WHERE rolname = r) THEN
		            EXECUTE format('CREATE ROLE %I NOLOGIN NOSUPERUSER NOBYPASSRLS NOCREATEDB NOCREATEROLE', r);
		        END IF;
		    END LOOP;
		    IF NOT EXISTS (SELECT 1 FROM pg_roles WHERE rolname = 'bookmarks_mover') THEN
		        CREATE ROLE bookmarks_mover NOLOGIN NOSUPERUSER BYPASSRLS NOCREATEDB NOCREATEROLE;
		    END IF;
		    IF NOT EXISTS (SELECT 1 FROM pg_roles WHERE rolname = 'bookmarks_web') THEN
		        CREATE ROLE bookmarks_web LOGIN NOINHERIT;
		    END IF;
		    IF NOT EXISTS (SELECT 1 FROM pg_roles WHERE rolname = 'bookmarks_move_slot') THEN
		        CREATE ROLE bookmarks_move_slot LOGIN NOINHERIT;
		    END IF;
		END $$;
		-- NOINHERIT: a login holds no privilege of its own; each session switches (SET ROLE)
		-- to the role it works as, and RESET ROLE gives it nothing.
		ALTER ROLE bookmarks_web PASSWORD :'web_password';
		ALTER ROLE bookmarks_move_slot PASSWORD :'move_password';
		GRANT bookmarks_app, bookmarks_reader, bookmarks_worker TO bookmarks_web;
		-- The mover acts as bookmarks_app on the control database.
		GRANT bookmarks_app, bookmarks_mover TO bookmarks_move_slot;
	EOSQL
)
