#!/bin/sh
# Runs inside the chroot after nginx is installed: reshapes Debian's nginx into the official
# image's layout (conf.d only, no sites-enabled server, user nginx, logs on stdout/stderr).
set -eu
src="$1"
install -m 0644 "$src/nginx.conf" /etc/nginx/nginx.conf
install -m 0644 "$src/default.conf" /etc/nginx/conf.d/default.conf
install -m 0755 "$src/docker-entrypoint.sh" /docker-entrypoint.sh
install -d -m 0755 /docker-entrypoint.d
rm -f /etc/nginx/sites-enabled/default

# uid/gid 101 like the official image.
grep -q '^nginx:' /etc/group || echo 'nginx:x:101:' >> /etc/group
grep -q '^nginx:' /etc/passwd \
	|| echo 'nginx:x:101:101:nginx user:/nonexistent:/usr/sbin/nologin' >> /etc/passwd
[ "$(id -u nginx):$(id -g nginx)" = "101:101" ]

ln -sf /dev/stdout /var/log/nginx/access.log
ln -sf /dev/stderr /var/log/nginx/error.log

nginx -t
command -v curl envsubst >/dev/null
