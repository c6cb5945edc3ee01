#!/bin/sh
# Runs inside the chroot after the packages are installed: puts in place the pieces that make
# Debian's postgresql-15 behave like the official postgres:15 image (entrypoint, gosu, a sample
# config that listens on all interfaces, the en_US.UTF-8 locale, the directories the entrypoint
# expects).
set -eu
src="$1"
install -m 0755 "$src/docker-entrypoint.sh" /usr/local/bin/docker-entrypoint.sh
install -m 0755 "$src/gosu" /usr/local/bin/gosu

sample=/usr/share/postgresql/15/postgresql.conf.sample
sed -ri "s!^#?(listen_addresses)\s*=\s*\S+.*!\1 = '*'!" "$sample"
grep -qF "listen_addresses = '*'" "$sample"

[ "$(id -u postgres):$(id -g postgres)" = "999:999" ]
[ ! -e /etc/postgresql/15/main ] && [ ! -e /var/lib/postgresql/15/main ]
install -d -o postgres -g postgres -m 1777 /var/lib/postgresql /var/lib/postgresql/data
install -d -o postgres -g postgres -m 3777 /var/run/postgresql
install -d -m 0755 /docker-entrypoint-initdb.d

# The official image's locale, so that initdb gives databases the same collation (en_US.utf8:
# ORDER BY on text sorts the same on both images).
localedef -i en_US -c -f UTF-8 -A /usr/share/locale/locale.alias en_US.UTF-8
locale -a | grep -qx 'en_US.utf8'

# Fail the build if anything the entrypoint or a compose script relies on is missing.
for tool in setpriv bash psql; do command -v "$tool" >/dev/null; done
for tool in postgres initdb pg_ctl pg_isready pg_basebackup; do
	[ -x "/usr/lib/postgresql/15/bin/$tool" ]
done
gosu postgres true
