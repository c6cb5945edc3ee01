#!/bin/bash
# Entrypoint of bookmarks-offline/nginx. It keeps the part of the official nginx image's contract
# a compose file may rely on: when the command is nginx, *.sh hooks in /docker-entrypoint.d/ run
# first (sourced if named *.envsh), and /etc/nginx/templates/**/*.template files are rendered with
# envsubst into /etc/nginx/conf.d/ (only ${VARS} that are set in the environment are replaced;
# NGINX_ENVSUBST_TEMPLATE_DIR/_SUFFIX/OUTPUT_DIR and NGINX_ENVSUBST_FILTER are honoured).
# Any other command is exec'ed as-is.
set -eo pipefail

entrypoint_log() {
	if [ -z "${NGINX_ENTRYPOINT_QUIET_LOGS:-}" ]; then
		echo "$@"
	fi
}

render_templates() {
	local dir="${NGINX_ENVSUBST_TEMPLATE_DIR:-/etc/nginx/templates}"
	local suffix="${NGINX_ENVSUBST_TEMPLATE_SUFFIX:-.template}"
	local out_dir="${NGINX_ENVSUBST_OUTPUT_DIR:-/etc/nginx/conf.d}"
	local filter="${NGINX_ENVSUBST_FILTER:-}"
	local defined_envs template relative out
	[ -d "$dir" ] || return 0
	if [ ! -w "$out_dir" ]; then
		entrypoint_log "$0: $out_dir is not writable, not rendering templates"
		return 0
	fi
	defined_envs="$(printf '${%s} ' $(awk "END { for (name in ENVIRON) { print ( name ~ /${filter}/ ) ? name : \"\" } }" </dev/null))"
	while IFS= read -r -d '' template; do
		relative="${template#"$dir/"}"
		out="$out_dir/${relative%"$suffix"}"
		mkdir -p "$(dirname "$out")"
		entrypoint_log "$0: rendering $template to $out"
		envsubst "$defined_envs" <"$template" >"$out"
	done < <(find "$dir" -follow -type f -name "*$suffix" -print0 | sort -z)
}

if [ "$1" = nginx ] || [ "$1" = nginx-debug ]; then
	if [ -d /docker-entrypoint.d ]; then
		while IFS= read -r -d '' hook; do
			case "$hook" in
				*.envsh) entrypoint_log "$0: sourcing $hook"; . "$hook" ;;
				*.sh)
					if [ -x "$hook" ]; then
						entrypoint_log "$0: running $hook"
						"$hook"
					else
						entrypoint_log "$0: ignoring $hook, not executable"
					fi
					;;
			esac
		done < <(find /docker-entrypoint.d -follow -type f -print0 | sort -z)
	fi
	render_templates
	entrypoint_log "$0: Configuration complete; ready for start up"
fi

exec "$@"
