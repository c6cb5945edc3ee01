#!/bin/sh
# Runs inside the chroot before postgresql-15 is installed: gives the postgres user the same
# uid/gid (999) as the official image so data volumes are interchangeable between the two, and
# stops the Debian packaging from creating a "main" cluster that the image would never use.
set -eu
grep -q '^postgres:' /etc/group || echo 'postgres:x:999:' >> /etc/group
grep -q '^postgres:' /etc/passwd \
	|| echo 'postgres:x:999:999:PostgreSQL administrator:/var/lib/postgresql:/bin/bash' >> /etc/passwd
mkdir -p /etc/postgresql-common/createcluster.d
echo 'create_main_cluster = false' > /etc/postgresql-common/createcluster.d/docker.conf
