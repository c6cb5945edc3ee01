#!/bin/sh
# Last customize step for every offline image (run inside the chroot by
# scripts/build-offline-images.sh): mmdebstrap copies the build host's resolv.conf and hostname
# into the rootfs, and neither should leak into an image (docker supplies both at run time).
set -eu
: > /etc/resolv.conf
echo localhost > /etc/hostname
rm -f /var/cache/apt/*.bin /var/cache/debconf/*-old /var/lib/dpkg/*-old
rm -rf /var/log/apt/* /var/cache/ldconfig/aux-cache
